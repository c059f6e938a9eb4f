package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/pixie-dev/pixie/internal/testutil"
)

// TestPixieSettings shows the configured model and tests the connection against the model test
// server, then saves a Jev key on the decision engine page: it is stored (the server reports
// it saved in the credentials) and never shown again, and it can be removed.
func TestPixieSettings(t *testing.T) {
	m := newModelServer(t, `{"verdict":"pass"}`, "ok")
	p := testutil.StartServer(t, t.TempDir(), nil, m.modelArgs()...)
	b := NewBrowser(t, 1280, 800)
	viewport(t, b, 1280, 800)
	login(t, b, p)
	watchErrors(t, b)

	open(t, b, "#/settings?tab=model", "[data-action=test-model]")
	mustContain(t, "model", textOf(t, b, "#tabpanel"), "Configured", "openai", m.srv.URL+"/v1", "set (never shown)")
	b.Run(t, "test the connection", chromedp.Click(chromedp.CSS("[data-action=test-model]")))
	waitFor(t, b, "the model answered", `document.querySelector('.test-result').innerText.includes('The model answered in')`)
	shot(t, b, "model")

	open(t, b, "#/settings?tab=engine", "[name=jev-key]")
	mustContain(t, "engine", textOf(t, b, "#tabpanel"), "LLM", "in use", "No judge model is set: the Pixie model answers.", "built-in", "not set")
	b.Run(t, "save without a key", chromedp.Click(chromedp.CSS("[data-action=save-key]")))
	waitFor(t, b, "the refusal next to the key", `document.querySelector('.jev-key .field-error') && document.querySelector('.jev-key .field-error').textContent.includes('Paste the key first')`)
	const key = "ts-e2e-secret-key-0123456789"
	b.Run(t, "paste and save the key", chromedp.SendKeys(chromedp.CSS("[name=jev-key]"), key), chromedp.Click(chromedp.CSS("[data-action=save-key]")))
	waitFor(t, b, "the key saved", `document.querySelector('[data-key-source="credentials"]')`)
	if Eval[bool](t, b, `document.body.innerHTML.includes(`+jsq(key)+`) || [...document.querySelectorAll('input')].some((i) => i.value.includes(`+jsq(key)+`))`) {
		t.Fatal("the Jev key is shown after saving")
	}
	var st struct {
		Configured bool   `json:"configured"`
		Source     string `json:"source"`
	}
	adminAPI(t, p, "GET", "/v1/judge/key", nil, &st)
	if !st.Configured || st.Source != "credentials" {
		t.Fatalf("key status %+v", st)
	}
	shot(t, b, "engine")
	b.Run(t, "remove the key", chromedp.Click(`//button[text()="Remove key"]`))
	waitFor(t, b, "the key removed", `!document.querySelector('[data-key-source]') && document.querySelector('.jev-key').innerText.includes('not set')`)
	adminAPI(t, p, "GET", "/v1/judge/key", nil, &st)
	if st.Configured {
		t.Fatalf("key status after removal %+v", st)
	}
	noConsoleErrors(t, b)
}

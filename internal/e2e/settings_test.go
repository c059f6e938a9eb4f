package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/pixie-dev/pixie/internal/testutil"
)

// TestPixieSettings changes the Pixie model at run time: the configured model is shown, the
// connection test makes a real call to the model test server, a bad change is refused next to
// its field, a good one is saved and used, and Use pixie.yaml again restores the file. On the
// decision engine page it switches the engine, sees a bad Jev timeout refused next to its
// field, and saves a Jev key that is stored and never shown again.
func TestPixieSettings(t *testing.T) {
	m := newModelServer(t, `{"verdict":"pass"}`, "OK")
	p := testutil.StartServer(t, t.TempDir(), nil, m.modelArgs()...)
	b := NewBrowser(t, 1280, 800)
	viewport(t, b, 1280, 800)
	login(t, b, p)
	watchErrors(t, b)

	open(t, b, "#/settings?tab=model", "[data-action=test-model]")
	mustContain(t, "model", textOf(t, b, "#tabpanel"), "Configured", m.srv.URL+"/v1", "A key is set in pixie.yaml.")
	if v := Eval[[]string](t, b, `['provider','model'].map((n) => document.querySelector('[name=' + n + ']').value)`); v[0] != "openai" || v[1] != "m" {
		t.Fatalf("form holds %q", v)
	}
	b.Run(t, "test the connection", click(chromedp.CSS("[data-action=test-model]")))
	waitFor(t, b, "the model answered", `document.querySelector('.test-result').innerText.includes('The model answered in') && document.querySelector('.test-result').innerText.includes('OK')`)
	shot(t, b, "model")

	// A provider without a model name is refused next to the Model field.
	b.Run(t, "empty the model name", clearField("[name=model]"), click(chromedp.CSS("[data-action=save-model]")))
	waitFor(t, b, "the refusal next to Model", `document.querySelector('[name=model]').getAttribute('aria-invalid') === 'true'`)
	mustContain(t, "refusal", errorsNextTo(t, b, "[name=model]"), "the model name is required")
	shot(t, b, "model-refusal")
	b.Run(t, "a new model name", chromedp.SendKeys(chromedp.CSS("[name=model]"), "m2"), click(chromedp.CSS("[data-action=save-model]")))
	waitFor(t, b, "saved", `document.querySelector('#tabpanel').innerText.includes('Saved here, on top of pixie.yaml')`)
	var view struct {
		Model struct {
			Model  string `json:"model"`
			Fields map[string]struct {
				Source string `json:"source"`
			} `json:"fields"`
		} `json:"model"`
		Judge struct {
			Engine string `json:"engine"`
		} `json:"judge"`
	}
	adminAPI(t, p, "GET", "/v1/settings", nil, &view)
	if view.Model.Model != "m2" || view.Model.Fields["model"].Source != "settings" || view.Model.Fields["provider"].Source != "file" {
		t.Fatalf("settings after save: %+v", view.Model)
	}
	b.Run(t, "use pixie.yaml again", click(`//button[text()="Use pixie.yaml again"]`))
	waitFor(t, b, "the file again", `document.querySelector('[name=model]').value === 'm' && document.querySelector('#tabpanel').innerText.includes('pixie.yaml and the environment')`)

	// The decision engine.
	open(t, b, "#/settings?tab=engine", "[name=jev-key]")
	mustContain(t, "engine", textOf(t, b, "#tabpanel"), "LLM", "in use", "No judge model is set: the Pixie model answers.", "The built-in prompt is in use.", "not set")
	b.Run(t, "a bad Jev timeout", clearField("[name=jevTimeout]"), chromedp.SendKeys(chromedp.CSS("[name=jevTimeout]"), "soon"), click(chromedp.CSS("[data-action=save-engine]")))
	waitFor(t, b, "the refusal next to the timeout", `document.querySelector('[name=jevTimeout]').getAttribute('aria-invalid') === 'true'`)
	b.Run(t, "choose Jev", clearField("[name=jevTimeout]"), chromedp.SendKeys(chromedp.CSS("[name=jevTimeout]"), "20s"),
		click(chromedp.CSS(`[data-engine="jev"] input[type=radio]`)), click(chromedp.CSS("[data-action=save-engine]")))
	waitFor(t, b, "Jev in use", `document.querySelector('[data-engine="jev"]').innerText.includes('in use')`)
	adminAPI(t, p, "GET", "/v1/settings", nil, &view)
	if view.Judge.Engine != "jev" {
		t.Fatalf("engine %q", view.Judge.Engine)
	}

	b.Run(t, "save without a key", click(chromedp.CSS("[data-action=save-key]")))
	waitFor(t, b, "the refusal next to the key", `document.querySelector('.jev-key .field-error') && document.querySelector('.jev-key .field-error').textContent.includes('Paste the key first')`)
	const key = "ts-e2e-secret-key-0123456789"
	b.Run(t, "paste and save the key", chromedp.SendKeys(chromedp.CSS("[name=jev-key]"), key), click(chromedp.CSS("[data-action=save-key]")))
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
	b.Run(t, "remove the key", click(`//button[text()="Remove key"]`))
	waitFor(t, b, "the key removed", `!document.querySelector('[data-key-source]') && document.querySelector('.jev-key').innerText.includes('not set')`)
	adminAPI(t, p, "GET", "/v1/judge/key", nil, &st)
	if st.Configured {
		t.Fatalf("key status after removal %+v", st)
	}
	noConsoleErrors(t, b)
}

package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/pixie-dev/pixie/internal/testutil"
)

// TestGatesPageShowsSetupProblems: hooks that ask for a preset that does not exist, a server
// with no default preset, and hook calls without a valid token are each a warning on the Gates
// page (the missing preset with its count and last call); the warning's action adds the preset
// and opens it on Scope, and once it is saved with a gate the warning is gone. At 420 px the
// warnings fit the width.
func TestGatesPageShowsSetupProblems(t *testing.T) {
	p := testutil.StartServer(t, t.TempDir(), nil)
	adminAPI(t, p, http.MethodPut, "/v1/gates", map[string]any{
		"gates":   []map[string]any{{"name": "verify-answer", "point": "turn-end", "task": "Check the answer claims only what was shown."}},
		"presets": []map[string]any{{"name": "dev", "gates": []map[string]any{{"gate": "verify-answer"}}}},
	}, nil)
	for range 2 {
		testutil.PostStopHook(t, p.URL, "e2e-setup-session", "?preset=reveiw&host=codex", "Bearer "+p.Token(t))
	}
	testutil.PostStopHook(t, p.URL, "e2e-setup-session", "?preset=reveiw", "")
	testutil.PostStopHook(t, p.URL, "e2e-setup-session", "?preset=reveiw", "Bearer not-the-token")

	b := NewBrowser(t, 1280, 800)
	viewport(t, b, 1280, 800)
	login(t, b, p)
	watchErrors(t, b)
	open(t, b, "#/gates", "[data-warn=missing-presets]")
	missing := textOf(t, b, "[data-warn=missing-presets]")
	mustContain(t, "missing presets", missing, "Hooks asked for a preset that does not exist", "reveiw", "2 calls", "session e2e-setup-session, codex", "pixie init claude --preset NAME")
	mustContain(t, "no default", textOf(t, b, "[data-warn=no-default-preset]"), "No preset is called “default”", "hooks.defaultPreset")
	mustContain(t, "refused calls", textOf(t, b, "[data-warn=refused-hook-calls]"), "2 hook calls carried no valid token", "1 without a token, 1 with a wrong one", "PIXIE_TOKEN", "pixie doctor")
	if strings.Contains(Eval[string](t, b, `document.body.innerText`), "not-the-token") {
		t.Fatal("the page shows a token a hook call sent")
	}
	shot(t, b, "gates-setup-warnings")
	viewport(t, b, 420, 800)
	if over := Eval[bool](t, b, `document.documentElement.scrollWidth > window.innerWidth`); over {
		shot(t, b, "FAILED-setup-warnings-420")
		t.Fatal("at 420 px the warnings are wider than the window")
	}
	shot(t, b, "gates-setup-warnings-420")
	viewport(t, b, 1280, 800)

	// The fix: Create preset adds it and opens it on Scope, focused on Add gate; add a gate, Save.
	b.Run(t, "create the preset", click(chromedp.CSS(`[data-action=create-preset][data-preset="reveiw"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-preset="reveiw"] [name=add-gate]`)))
	waitFor(t, b, "the preset's Add gate focused", `document.activeElement && document.activeElement.closest('[data-preset="reveiw"]') && document.activeElement.name === 'add-gate'`)
	b.Run(t, "add the gate", chromedp.SetValue(chromedp.CSS(`[data-preset="reveiw"] [name=add-gate]`), "verify-answer"),
		click(chromedp.CSS(`[data-preset="reveiw"] [data-action=add-gate]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-preset="reveiw"] tr[data-gate="verify-answer"]`)),
		click(chromedp.CSS("[data-action=save]")))
	waitFor(t, b, "saved", `!document.querySelector('.badge.warn[role=status]') && !document.querySelector('.alert')`)
	var set gateSet
	adminAPI(t, p, http.MethodGet, "/v1/gates", nil, &set)
	if len(set.Presets) != 2 || set.Presets[1].Name != "reveiw" || len(set.Presets[1].Gates) != 1 {
		t.Fatalf("presets after the fix: %+v", set.Presets)
	}
	open(t, b, "#/gates", "[data-warn=no-default-preset]")
	if Eval[bool](t, b, `!!document.querySelector('[data-warn=missing-presets]')`) {
		t.Fatalf("the missing-preset warning stays after the preset was saved: %s", textOf(t, b, "[data-warn=missing-presets]"))
	}
	var report struct {
		MissingPresets []struct{ Name string } `json:"missingPresets"`
	}
	adminAPI(t, p, http.MethodGet, "/v1/gates/setup", nil, &report)
	if len(report.MissingPresets) != 0 {
		t.Fatalf("the server still lists %+v", report.MissingPresets)
	}

	// Hooks that name no preset: the default preset is listed as missing (once, not twice).
	testutil.PostStopHook(t, p.URL, "e2e-setup-session", "", "Bearer "+p.Token(t))
	open(t, b, "#/scope", "[name=folder]")
	open(t, b, "#/gates", "[data-warn=missing-presets]")
	mustContain(t, "default missing", textOf(t, b, "[data-warn=missing-presets]"), "default", "1 call", "hooks that name no preset use it")
	if Eval[bool](t, b, `!!document.querySelector('[data-warn=no-default-preset]')`) {
		t.Fatal("the default preset is warned of twice")
	}
	b.Run(t, "create default", click(chromedp.CSS(`[data-action=create-preset][data-preset="default"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-preset="default"] [name=add-gate]`)))
	// Back on Gates before saving: the preset is in the unsaved changes, and the page says so.
	open(t, b, "#/gates", "[data-warn=missing-presets]")
	mustContain(t, "drafted", textOf(t, b, `[data-missing-preset="default"]`), "In your unsaved changes")
	noConsoleErrors(t, b)
}

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/pixie-dev/pixie/internal/testutil"
)

// clearField empties an input or textarea the way a person does (select all, Backspace), so
// the page sees the input event.
func clearField(css string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(chromedp.Focus(chromedp.CSS(css)),
		chromedp.Evaluate[chromedp.Void](`document.querySelector(`+jsq(css)+`).select()`),
		chromedp.KeyEvent(kb.Backspace))
}

// errorsNextTo returns the refusals shown in the error slot of the field css.
func errorsNextTo(t *testing.T, b *Browser, css string) string {
	t.Helper()
	return Eval[string](t, b, `(() => { const el = document.querySelector(`+jsq(css)+`);
		const slot = el && document.querySelector('[data-errors-for="' + el.id + '"]');
		return slot ? slot.innerText : ''; })()`)
}

type gateSet struct {
	Gates []struct {
		Name    string `json:"name"`
		Point   string `json:"point"`
		Task    string `json:"task"`
		Enabled bool   `json:"enabled"`
	} `json:"gates"`
	Presets []struct {
		Name  string `json:"name"`
		Gates []struct {
			Gate    string `json:"gate"`
			Enabled bool   `json:"enabled"`
		} `json:"gates"`
	} `json:"presets"`
	Revision int64 `json:"revision"`
}

// TestGateFromTemplate creates a gate from a template, tries it on a sample (the model test
// server answers), saves it, then sees a save-time refusal next to its field; on Scope it
// attaches gates to a preset and sees the one-gate-per-point refusal next to the attachment's
// switch; on Records it opens the runs of a session, a run's detail, Edit and send for a
// rejected input, and a per-session switch.
func TestGateFromTemplate(t *testing.T) {
	const reason = "rm -rf would delete the whole projects folder; move it to a trash folder instead."
	m := newModelServer(t, `{"verdict":"stop","reason":"`+reason+`"}`, "unused")
	home := t.TempDir()
	p := testutil.StartServer(t, home, nil, m.modelArgs()...)
	b := NewBrowser(t, 1280, 800)
	viewport(t, b, 1280, 800)
	login(t, b, p)
	watchErrors(t, b)

	b.Run(t, "gates page", chromedp.WaitVisible(chromedp.CSS("[data-action=new-gate]")))
	shot(t, b, "gates-empty")
	b.Run(t, "New gate", click(chromedp.CSS("[data-action=new-gate]")), chromedp.WaitVisible(chromedp.CSS(".template-list")))
	if n := Eval[int](t, b, `document.querySelectorAll('.template-list [data-template]').length`); n != 6 {
		t.Fatalf("%d templates listed, want 6 (one per point and the blank gate)", n)
	}
	if last := Eval[string](t, b, `[...document.querySelectorAll('.template-list [data-template]')].pop().dataset.template`); last != "blank" {
		t.Fatalf("the last template is %q, want the blank gate", last)
	}
	shot(t, b, "templates")

	b.Run(t, "use a template", click(chromedp.CSS(`[data-template="block-risky-commands"]`)), chromedp.WaitVisible(chromedp.CSS("[name=task]")))
	mustContain(t, "task", Eval[string](t, b, `document.querySelector('[name=task]').value`), "{{tool.name}}", "{{tool.args}}")
	if v := Eval[string](t, b, `document.querySelector('[name=point]').value`); v != "tool-before" {
		t.Fatalf("point %q", v)
	}
	shot(t, b, "editor")

	// Try it: the model really answers; the point table turns its stop into a block.
	b.Run(t, "try it", chromedp.SendKeys(chromedp.CSS("[name=toolName]"), "bash"), click(chromedp.CSS("[data-action=try]")),
		chromedp.WaitVisible(chromedp.CSS(".try .result")))
	res := textOf(t, b, ".try .result")
	mustContain(t, "trial", res, "Blocked", "stop", reason)
	shot(t, b, "try")

	// Save (it applies the editor first).
	b.Run(t, "save", click(chromedp.CSS("[data-action=save]")))
	waitFor(t, b, "the save toast", `[...document.querySelectorAll('#toasts .toast')].some((x) => x.textContent.includes('Saved'))`)
	var set gateSet
	adminAPI(t, p, "GET", "/v1/gates", nil, &set)
	if len(set.Gates) != 1 || set.Gates[0].Name != "block-risky-commands" || set.Gates[0].Point != "tool-before" || !strings.Contains(set.Gates[0].Task, "{{tool.args}}") {
		t.Fatalf("saved set: %+v", set)
	}

	// A refusal: an empty task and no rule. It shows next to the Task field.
	b.Run(t, "empty the task", clearField("[name=task]"), click(chromedp.CSS("[data-action=save]")))
	waitFor(t, b, "the refusal", `document.querySelector('[name=task]').getAttribute('aria-invalid') === 'true'`)
	mustContain(t, "refusal next to Task", errorsNextTo(t, b, "[name=task]"), "a gate with an empty task needs a rule")
	if Eval[bool](t, b, `document.activeElement !== document.querySelector('[name=task]')`) {
		t.Fatal("the refused field did not get the focus")
	}
	shot(t, b, "refusal")
	adminAPI(t, p, "GET", "/v1/gates", nil, &set)
	if set.Gates[0].Task == "" {
		t.Fatal("a refused save changed the saved gate")
	}

	// Back on the list, discard the refused draft.
	open(t, b, "#/gates", ".gate-card")
	b.Run(t, "discard", click(`//button[text()="Discard changes"]`))
	waitFor(t, b, "no unsaved badge", `!document.querySelector('.badge.warn[role=status]')`)
	shot(t, b, "gates")

	// A second gate at the same point, made by an agent over the API.
	adminAPI(t, p, "PUT", "/v1/gates/definitions/no-secrets", map[string]any{"point": "tool-before", "task": "Stop if {{tool.args}} prints a secret.", "description": "Keeps secrets out of tool calls."}, nil)
	adminAPI(t, p, "PUT", "/v1/gates/definitions/instruction-check", map[string]any{"point": "user-message", "task": "Stop when the instruction has no goal."}, nil)

	// Scope: the script folder lists a script added after start once refreshed; a WASM guest
	// uploads and is listed.
	open(t, b, "#/scope", "[name=preset]")
	waitFor(t, b, "the folder listed", `document.querySelector('[aria-labelledby=folder-title]').innerText.includes('In use')`)
	if err := os.MkdirAll(filepath.Join(home, "commands"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "commands", "measure-subtitle.sh"), []byte("#!/bin/bash\nwc -c\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b.Run(t, "refresh the list", click(chromedp.CSS("[data-action=refresh-scripts]")))
	waitFor(t, b, "the script listed", `document.querySelector('table.scripts') && document.querySelector('table.scripts').innerText.includes('{{hooks.measure-subtitle.text}}')`)
	guest := testutil.GuestPath(t, "block-risky-commands")
	b.Run(t, "upload a module", chromedp.SetUploadFiles(chromedp.CSS("[name=module]"), []string{guest}),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[name=module]').dispatchEvent(new Event('change'))`),
		click(chromedp.CSS("[data-action=upload-module]")))
	waitFor(t, b, "the module listed", `document.querySelector('tr[data-module="block-risky-commands"]')`)

	// A preset with both tool-before gates on is refused next to the second switch.
	b.Run(t, "new preset", chromedp.SendKeys(chromedp.CSS("[name=preset]"), "default\n"), chromedp.WaitVisible(chromedp.CSS(`[data-preset="default"]`)))
	for _, g := range []string{"block-risky-commands", "no-secrets", "instruction-check"} {
		b.Run(t, "add "+g, chromedp.SetValue(chromedp.CSS(`[data-preset="default"] [name=add-gate]`), g),
			click(chromedp.CSS(`[data-preset="default"] [data-action=add-gate]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-preset="default"] tr[data-gate="`+g+`"]`)))
	}
	waitFor(t, b, "the page warns", `document.querySelector('.warn[role=note]') && document.querySelector('.warn[role=note]').innerText.includes('Only one enabled gate per preset')`)
	b.Run(t, "save the scope", click(chromedp.CSS("[data-action=save]")))
	waitFor(t, b, "the refusal next to the switch", `document.querySelector('[data-preset="default"] tr[data-gate="no-secrets"] .field-error')`)
	mustContain(t, "refusal", textOf(t, b, `[data-preset="default"] tr[data-gate="no-secrets"]`), "only one enabled gate per preset and point")
	shot(t, b, "scope-refusal")
	b.Run(t, "switch it off in this preset", click(chromedp.CSS(`[data-preset="default"] tr[data-gate="no-secrets"] input[role=switch]`)),
		click(chromedp.CSS("[data-action=save]")))
	waitFor(t, b, "saved", `!document.querySelector('.badge.warn[role=status]') && !document.querySelector('.alert')`)
	adminAPI(t, p, "GET", "/v1/gates", nil, &set)
	if len(set.Presets) != 1 || len(set.Presets[0].Gates) != 3 {
		t.Fatalf("presets: %+v", set.Presets)
	}
	for _, a := range set.Presets[0].Gates {
		if a.Enabled != (a.Gate != "no-secrets") {
			t.Fatalf("attachment %+v", a)
		}
	}
	shot(t, b, "scope")

	// Two runs in a session, the way an agent host reports its points.
	adminAPI(t, p, "POST", "/v1/gates/evaluate", map[string]any{"point": "tool-before", "session": map[string]any{"id": "sess-1", "preset": "default"},
		"turn": 1, "tool": map[string]any{"name": "bash", "args": map[string]any{"command": "rm -rf ~/projects"}}, "target": `{"command":"rm -rf ~/projects"}`}, nil)
	adminAPI(t, p, "POST", "/v1/gates/evaluate", map[string]any{"point": "user-message", "session": map[string]any{"id": "sess-1", "preset": "default"},
		"turn": 2, "target": "fix it"}, nil)

	open(t, b, "#/records?session=sess-1", "table.records tbody tr")
	waitFor(t, b, "two runs", `document.querySelectorAll('table.records tbody tr').length === 2`)
	waitFor(t, b, "the session's switches", `document.querySelectorAll('.switch-list li').length === 2`)
	mustContain(t, "records", textOf(t, b, "table.records"), "block-risky-commands", "Blocked", "instruction-check", "Rejected", reason)
	shot(t, b, "records")

	// The rejected instruction's detail, and Edit and send into the hint composer.
	b.Run(t, "open the rejected run", click(`//table[contains(@class,"records")]//tr[td[contains(., "instruction-check")]]//a`), chromedp.WaitVisible(chromedp.CSS(".record")))
	mustContain(t, "detail", textOf(t, b, ".record"), "Rejected", "Pixie", "Original text", "fix it", "Final text", reason, "120 in · 24 out", "No helper calls")
	shot(t, b, "record-detail")
	b.Run(t, "Edit and send", click(chromedp.CSS("[data-action=edit-and-send]")), chromedp.WaitVisible(chromedp.CSS("#hintbar .panel textarea")))
	if v := Eval[[]string](t, b, `[document.querySelector('#hintbar textarea').value, document.querySelector('#hintbar .panel input').value]`); v[0] != "fix it" || v[1] != "sess-1" {
		t.Fatalf("composer holds %q", v)
	}
	b.Run(t, "close the bar", chromedp.KeyEvent(kb.Escape))

	// A per-session switch.
	open(t, b, "#/records?session=sess-1", ".switch-list li")
	b.Run(t, "switch off for the session", click(chromedp.CSS(`.switch-list li[data-gate="block-risky-commands"] input`)))
	waitFor(t, b, "the switch saved", `[...document.querySelectorAll('#toasts .toast')].some((x) => x.textContent.includes('block-risky-commands is off in this session'))`)
	var sg struct {
		Gates []struct {
			Gate string `json:"gate"`
			On   bool   `json:"on"`
		} `json:"gates"`
	}
	adminAPI(t, p, "GET", "/v1/gates/sessions/sess-1/switches", nil, &sg)
	for _, g := range sg.Gates {
		if g.On == (g.Gate == "block-risky-commands") {
			t.Fatalf("switches: %+v", sg.Gates)
		}
	}

	// Narrow window.
	viewport(t, b, 420, 800)
	shot(t, b, "records-narrow")
	open(t, b, "#/gates", ".gate-card")
	shot(t, b, "gates-narrow")
	open(t, b, "#/gates?edit=block-risky-commands", "[name=task]")
	shot(t, b, "editor-narrow")
	open(t, b, "#/scope", `[data-preset="default"]`)
	shot(t, b, "scope-narrow")
	noConsoleErrors(t, b)
}

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/testutil"
)

// rect is an element's box in CSS pixels.
type rect struct{ L, T, R, B float64 }

func (a rect) overlaps(b rect) bool { return a.L < b.R && b.L < a.R && a.T < b.B && b.T < a.B }

func rectOf(t *testing.T, b *Browser, css string) rect {
	t.Helper()
	r := Eval[[]float64](t, b, fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (!e) return [0,0,0,0];
		const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; })()`, jsq(css)))
	return rect{r[0], r[1], r[2], r[3]}
}

// pushModule uploads a built guest as a module through the admin API.
func pushModule(t *testing.T, p *testutil.Proc, guest, name string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.URL+"/v1/modules?name="+name, bytes.NewReader(testutil.Guest(t, guest)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+p.Token(t))
	req.Header.Set("Content-Type", "application/wasm")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 && resp.StatusCode != 201 {
		t.Fatalf("push %s: %d", guest, resp.StatusCode)
	}
}

// registerSkill imports a Skill directory and puts it on the wheel through the admin API.
func registerSkill(t *testing.T, p *testutil.Proc, dir string) {
	t.Helper()
	var in struct {
		Path        string `json:"path"`
		Fingerprint string `json:"fingerprint"`
	}
	adminAPI(t, p, http.MethodPost, "/v1/pet/skills/inspect", map[string]string{"path": dir}, &in)
	adminAPI(t, p, http.MethodPost, "/v1/pet/skills", map[string]any{"path": in.Path, "confirm": true, "fingerprint": in.Fingerprint,
		"enabled": true, "shortcut": true}, nil)
}

// seedStudio gives every Studio page something to show: gates (one with a WASM rule), presets,
// a hook call naming a preset that does not exist, a session with runs, Skills on the wheel with long names, a pending hint.
func seedStudio(t *testing.T, p *testutil.Proc) {
	t.Helper()
	pushModule(t, p, "block-risky-commands", "block-risky-commands")
	set := map[string]any{
		"gates": []map[string]any{
			{"name": "instruction-format-check", "point": "user-message", "task": "Check that the instruction names a file.", "description": "Asks for a file name."},
			{"name": "block-risky-commands", "point": "tool-before", "rule": map[string]string{"kind": "module", "name": "block-risky-commands"}, "description": "A WASM rule, no task."},
			{"name": "verify-answer", "point": "turn-end", "task": "Check the answer claims only what was shown.", "enabled": false},
		},
		"presets": []map[string]any{{"name": "default", "gates": []map[string]any{{"gate": "instruction-format-check"}, {"gate": "block-risky-commands"}}}},
	}
	adminAPI(t, p, http.MethodPut, "/v1/gates", set, nil)
	for i, sess := range []string{"9f1c2e7a-claude-session", "b4d0-second-session"} {
		adminAPI(t, p, http.MethodPost, "/v1/gates/evaluate", map[string]any{"point": "user-message", "target": "fix it", "turn": i + 1,
			"session": map[string]any{"id": sess, "preset": "default"}}, nil)
	}
	testutil.PostStopHook(t, p.URL, "e2e-setup-session", "?preset=review&host=claude-code", "Bearer "+p.Token(t)) // a preset that does not exist: the Gates page warns
	skills := t.TempDir()
	for _, s := range [][2]string{{"documentation-consistency", "Checks that the docs match the code."}, {"summarize", "Summarises the change."},
		{"translate-to-english", "Translates the selection."}, {"dependency-upgrade-review", "Reviews a dependency upgrade."}} {
		registerSkill(t, p, writeSkill(t, skills, s[0], s[1], "Do it."))
	}
	adminAPI(t, p, http.MethodPost, "/v1/hints", map[string]any{"text": "use the staging database", "sessionId": "9f1c2e7a-claude-session"}, nil)
}

// TestStudioScreenshots opens every Studio page at 1280×800 and 420×800 and writes a screenshot
// of each to bin/screenshots/studio-<width>-<page>.png. At both widths it checks the layout
// fixes a screenshot alone would not prove: wheel labels wrap between words only, a toast
// covers neither Log out nor the navigation, and the floating Pet and hint buttons cover no
// content.
func TestStudioScreenshots(t *testing.T) {
	m := newModelServer(t, `{"verdict":"stop","reason":"Say which file to change."}`, "Notes.")
	p := testutil.StartServer(t, t.TempDir(), nil, m.modelArgs()...)
	seedStudio(t, p)
	b := NewBrowser(t, 1280, 800)
	viewport(t, b, 1280, 800)
	login(t, b, p)
	watchErrors(t, b)
	pages := []struct{ name, hash, wait string }{
		{"gates", "#/gates", "[data-action=new-gate]"},
		{"gate-editor", "#/gates?edit=block-risky-commands", "[name=task]"},
		{"new-gate", "#/gates?new=instruction-format-check", "[name=task]"},
		{"scope", "#/scope", "[name=folder]"},
		{"records", "#/records", ".sessions-table"},
		{"records-session", "#/records?session=9f1c2e7a-claude-session", "#runs-title"},
		{"settings", "#/settings", "main h1"},
		{"pet", "#/pet", "main h1"},
		{"pet-settings-general", "#/pet-settings?tab=general", "[role=tablist]"},
		{"pet-settings-skills", "#/pet-settings?tab=skills", "[name=skill-path]"},
		{"pet-settings-locus", "#/pet-settings?tab=locus", "[role=tablist]"},
		{"pet-settings-environment", "#/pet-settings?tab=environment", "[role=tablist]"},
		{"pet-settings-channel", "#/pet-settings?tab=channel", "[data-note=lark-enable]"},
		{"pet-settings-diagnostics", "#/pet-settings?tab=diagnostics", "[role=tablist]"},
	}
	for _, w := range []int64{1280, 420} {
		viewport(t, b, w, 800)
		Eval[bool](t, b, `(document.getElementById('toasts').replaceChildren(), true)`)
		for _, pg := range pages {
			open(t, b, pg.hash, pg.wait)
			waitFor(t, b, pg.name+" loaded", `!document.querySelector('#main .view').innerText.startsWith('Loading')`)
			time.Sleep(150 * time.Millisecond) // late sections (lists loaded after the head)
			shot(t, b, fmt.Sprintf("studio-%d-%s", w, pg.name))
		}
		open(t, b, "#/gates", "[data-action=new-gate]")

		// The floating buttons cover no content: scrolled to the end, the last content ends
		// above them (at 420 px they sit on a bar of their own).
		Eval[bool](t, b, `(window.scrollTo(0, document.body.scrollHeight), true)`)
		last := Eval[float64](t, b, `(() => { const v = document.querySelector('#main .view'); const k = [...v.querySelectorAll('*')].filter((e) => e.offsetParent);
			return Math.max(...k.map((e) => e.getBoundingClientRect().bottom)); })()`)
		for _, btn := range []string{"button.mascot", "#hintbar button.pill"} {
			if r := rectOf(t, b, btn); r.T < last && r.B > 0 && w <= 640 {
				shot(t, b, fmt.Sprintf("FAILED-covered-%d", w))
				t.Fatalf("at %d px %s (top %.0f) covers content ending at %.0f", w, btn, r.T, last)
			}
		}
		if w <= 640 {
			// Every button fits on the bar: the bar's top is above the buttons' tops.
			bar := Eval[float64](t, b, `window.innerHeight - parseFloat(getComputedStyle(document.body, '::after').height)`)
			for _, btn := range []string{"button.mascot", "#hintbar button.pill"} {
				if r := rectOf(t, b, btn); r.T < bar-1 {
					t.Fatalf("at %d px %s starts at %.0f, above its bar (%.0f)", w, btn, r.T, bar)
				}
			}
		}

		// A toast covers neither Log out, the navigation nor an open hint panel.
		Eval[bool](t, b, `(window.scrollTo(0, 0), true)`)
		b.Run(t, "open the hints for the toast", click(chromedp.CSS("#hintbar button.pill")), chromedp.WaitVisible(chromedp.CSS("#hintbar .panel")))
		Eval[bool](t, b, `(import('/ui/lib/dom.js').then((m) => m.toast('A toast long enough to wrap onto a second line in a narrow window.')), true)`)
		waitFor(t, b, "the toast", `document.querySelector('#toasts .toast')`)
		tr := rectOf(t, b, "#toasts .toast")
		for _, css := range []string{"#logout", ".top nav", "#hintbar .panel"} {
			if tr.overlaps(rectOf(t, b, css)) {
				shot(t, b, fmt.Sprintf("FAILED-toast-%d", w))
				t.Fatalf("at %d px the toast %+v covers %s %+v", w, tr, css, rectOf(t, b, css))
			}
		}
		for _, n := range Eval[[]string](t, b, `[...document.querySelectorAll('.top nav a')].map((a) => a.dataset.nav)`) {
			if tr.overlaps(rectOf(t, b, `.top nav a[data-nav="`+n+`"]`)) {
				t.Fatalf("at %d px the toast covers the %s link", w, n)
			}
		}
		if pe := Eval[string](t, b, `getComputedStyle(document.querySelector('#toasts .toast')).pointerEvents`); pe != "none" {
			t.Fatalf("a toast takes clicks (pointer-events %s): it hides the buttons under it", pe)
		}
		shot(t, b, fmt.Sprintf("studio-%d-toast", w))
		b.Run(t, "close the hints after the toast", click(chromedp.CSS("#hintbar button.pill")))
		Eval[bool](t, b, `(document.getElementById('toasts').replaceChildren(), true)`)

		// The wheel: labels break between words (or after a hyphen), never inside a word, and
		// fit their buttons.
		b.Run(t, "open the Pet", click(chromedp.CSS("button.mascot")), chromedp.WaitVisible(chromedp.CSS(`.wheel-entry[data-entry="documentation-consistency"]`)))
		time.Sleep(100 * time.Millisecond) // fitLabels runs on the next frame
		broken := Eval[[]string](t, b, `(() => {
			const out = [];
			for (const el of document.querySelectorAll('.entry-label')) {
				const node = el.firstChild; if (!node) continue;
				const s = node.textContent; const tops = [];
				for (let i = 0; i < s.length; i++) { const r = document.createRange(); r.setStart(node, i); r.setEnd(node, i + 1); tops.push(Math.round(r.getBoundingClientRect().top)); }
				for (let i = 0; i + 1 < s.length; i++) if (/[\p{L}\p{N}]/u.test(s[i]) && /[\p{L}\p{N}]/u.test(s[i + 1]) && tops[i] !== tops[i + 1]) out.push(s + ' between ' + s[i] + s[i + 1]);
				if (el.scrollWidth > el.clientWidth + 1 || el.scrollHeight > el.clientHeight + 1) out.push(s + ' overflows its button');
			}
			return out; })()`)
		if len(broken) > 0 {
			shot(t, b, fmt.Sprintf("FAILED-wheel-%d", w))
			t.Fatalf("at %d px wheel labels break inside a word: %q", w, broken)
		}
		shot(t, b, fmt.Sprintf("studio-%d-wheel", w))
		b.Run(t, "close the Pet", click(chromedp.CSS("button.mascot")))
		b.Run(t, "open the hints", click(chromedp.CSS("#hintbar button.pill")), chromedp.WaitVisible(chromedp.CSS("#hintbar .panel")))
		shot(t, b, fmt.Sprintf("studio-%d-hints", w))
		b.Run(t, "close the hints", click(chromedp.CSS("#hintbar button.pill")))
	}
	noConsoleErrors(t, b)
}

// TestStudioModuleOnlyGate saves a gate whose rule is a WASM module and whose task is empty:
// no field turns red, nothing calls the module a script, and Try it runs the module and says
// so. A tool-before gate does not offer the redo limit or the confirmation, which do not
// apply there.
func TestStudioModuleOnlyGate(t *testing.T) {
	p := testutil.StartServer(t, t.TempDir(), nil)
	pushModule(t, p, "block-risky-commands", "block-risky-commands")
	b := NewBrowser(t, 1280, 800)
	viewport(t, b, 1280, 800)
	login(t, b, p)
	watchErrors(t, b)
	// No preset yet: Scope says hooks that name none (they use "default") run no gates.
	open(t, b, "#/scope", "[data-warn=no-default-preset]")
	mustContain(t, "no-default warning", textOf(t, b, "[data-warn=no-default-preset]"), "No preset is called “default”", "run no gates")
	open(t, b, "#/gates?new=block-risky-commands", "[name=task]")
	b.Run(t, "clear the task", clearField("[name=task]"))
	b.Run(t, "open advanced", chromedp.Evaluate[chromedp.Void](`document.querySelector('details.advanced').open = true`))
	b.Run(t, "pick the module", chromedp.SetValue(chromedp.CSS("[name=rule]"), "module:block-risky-commands"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[name=rule]').dispatchEvent(new Event('change'))`))
	waitFor(t, b, "the module help", `document.querySelector('[name=rule]').value === 'module:block-risky-commands'`)
	form := textOf(t, b, ".editor-form")
	if strings.Contains(form, "Scripts are the executable files") || strings.Contains(strings.ToLower(textOf(t, b, ".try")), "script") {
		t.Fatalf("a module rule is described as a script:\n%s\n%s", form, textOf(t, b, ".try"))
	}
	// tool-before: no redo limit, no confirmation.
	if n := Eval[int](t, b, `document.querySelectorAll('[name=redoLimit], [name=confirmReplace]').length`); n != 0 {
		t.Fatalf("a tool-before gate shows %d of Redo limit / Confirm before replacing", n)
	}
	b.Run(t, "apply", click(chromedp.CSS("[data-action=apply]")))
	b.Run(t, "save", click(chromedp.CSS("[data-action=save]")))
	waitFor(t, b, "saved", `!document.querySelector('.badge.warn')`)
	// Try it: the module runs and blocks rm -rf; nothing is red.
	b.Run(t, "tool name", chromedp.SetValue(chromedp.CSS("[name=toolName]"), "Bash"),
		chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('[name=sample]'); s.value = '{"command":"rm -rf /"}'; s.dispatchEvent(new Event('input')); const n = document.querySelector('[name=toolName]'); n.dispatchEvent(new Event('input')); })()`))
	b.Run(t, "try", click(chromedp.CSS("[data-action=try]")))
	// The first run compiles the module (seconds on a loaded machine).
	ctx, cancel := context.WithTimeout(b.Ctx, 2*time.Minute)
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](`!!(document.querySelector('.rule-ran') || document.querySelector('.try-result .error'))`, chromedp.WithPollingInterval(100*time.Millisecond)))
	cancel()
	if err != nil {
		shot(t, b, "FAILED-trial")
		t.Fatalf("no trial result: %v", err)
	}
	shot(t, b, "module-only-tried")
	res := textOf(t, b, ".try-result")
	mustContain(t, "trial", res, "The WASM rule block-risky-commands ran", "Blocked")
	page := textOf(t, b, "#main")
	if strings.Contains(page, "gate.task") || Eval[int](t, b, `document.querySelectorAll('[aria-invalid=true]').length`) != 0 {
		t.Fatalf("a field is red after saving and trying a module-only gate:\n%s", page)
	}
	// turn-end gets the redo limit; user-message the confirmation.
	b.Run(t, "point turn-end", chromedp.SetValue(chromedp.CSS("[name=point]"), "turn-end"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[name=point]').dispatchEvent(new Event('change'))`))
	waitFor(t, b, "the redo limit", `document.querySelector('[name=redoLimit]') && !document.querySelector('[name=confirmReplace]')`)
	// The point list and the table under it are the server's point table (GET /v1/gates/points).
	pointTableShown(t, b, "turn-end")
	b.Run(t, "point user-message", chromedp.SetValue(chromedp.CSS("[name=point]"), "user-message"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[name=point]').dispatchEvent(new Event('change'))`))
	waitFor(t, b, "the confirmation", `!document.querySelector('[name=redoLimit]') && document.querySelector('[name=confirmReplace]')`)
	pointTableShown(t, b, "user-message")
	noConsoleErrors(t, b)
}

// pointTableShown checks that the gate editor lists the points of internal/gate's table in its
// order and words, and shows the table's row for point (stop, replacement, addition, note).
func pointTableShown(t *testing.T, b *Browser, point string) {
	t.Helper()
	var labels []string
	var row []string
	for _, p := range gate.PointTable() {
		labels = append(labels, p.Label)
		if p.ID == point {
			row = []string{p.Apply.Stop, p.Apply.Replacement, p.Apply.Addition, p.Apply.Note}
		}
	}
	if got := Eval[[]string](t, b, `[...document.querySelectorAll('[name=point] option')].map((o) => o.textContent)`); strings.Join(got, "|") != strings.Join(labels, "|") {
		t.Fatalf("the point list shows %q, want %q", got, labels)
	}
	if got := Eval[[]string](t, b, `[...document.querySelectorAll('.apply-table tbody td')].map((c) => c.textContent)`); strings.Join(got, "|") != strings.Join(row, "|") {
		t.Fatalf("the table at %s shows %q, want %q", point, got, row)
	}
}

// startOn starts `pixie serve` on a given address (a restart keeps the address the page uses).
func startOn(t *testing.T, home, addr string, env []string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(testutil.PixieBinary(t), "serve", "--home", home, "--addr", addr)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_, _ = cmd.Process.Wait()
		}
	})
	for i := 0; i < 600; i++ {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			return cmd
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the server did not start on %s:\n%s", addr, out.String())
	return nil
}

// TestStudioServerDownThenBack stops the server under an open Studio: the page says it cannot
// reach the server (no blank page) and retries; when the server is back the banner goes and
// the page that failed opens again.
func TestStudioServerDownThenBack(t *testing.T) {
	home := t.TempDir()
	p := testutil.StartServer(t, home, nil)
	adminAPI(t, p, http.MethodPut, "/v1/gates", map[string]any{"gates": []map[string]any{{"name": "fmt", "point": "user-message", "task": "Check."}},
		"presets": []map[string]any{{"name": "default", "gates": []map[string]any{{"gate": "fmt"}}}}}, nil)
	b := NewBrowser(t, 1280, 800)
	viewport(t, b, 1280, 800)
	login(t, b, p)
	b.Run(t, "gates", chromedp.WaitVisible(chromedp.CSS("[data-action=new-gate]")))
	p.Stop(t)

	// A page that has not been loaded yet, and one that has.
	for _, hash := range []string{"#/records", "#/gates"} {
		b.Run(t, "go to "+hash, chromedp.Evaluate[chromedp.Void](`location.hash = `+jsq(hash)))
		waitFor(t, b, "the banner", `document.getElementById('offline') && !document.getElementById('offline').hidden`)
		mustContain(t, "banner", textOf(t, b, "#offline"), "Cannot reach the Pixie server at "+p.URL, "retries")
		waitFor(t, b, hash+" says why it is empty", `document.querySelector('#main .error[role=alert]')`)
		mustContain(t, hash+" while the server is down", textOf(t, b, "#main"), "Cannot reach the Pixie server")
		if v := Eval[bool](t, b, `document.getElementById('app').hidden`); v {
			t.Fatalf("%s: the app was hidden while the server is down", hash)
		}
	}
	shot(t, b, "server-down")

	startOn(t, home, p.Addr, nil)
	// Studio may reload itself (a page module that failed to download is not retried by the
	// browser): poll across the reload.
	back := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !back; time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(b.Ctx, 2*time.Second)
		v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(!document.getElementById('offline') || document.getElementById('offline').hidden) &&
			!!(document.querySelector('[data-action=new-gate]') || !document.getElementById('login').hidden)`))
		cancel()
		back = err == nil && v
	}
	if !back {
		shot(t, b, "FAILED-not-back")
		t.Fatal("Studio did not recover after the server came back")
	}
	if Eval[bool](t, b, `!document.getElementById('login').hidden`) {
		// The session did not survive the restart: logging in again works.
		b.Run(t, "log in again", chromedp.SetValue(chromedp.CSS("#login-token"), p.Token(t)),
			click(chromedp.CSS("#login-form button[type=submit]")), chromedp.WaitVisible(chromedp.CSS("#app nav")))
	}
	b.Run(t, "gates again", chromedp.WaitVisible(chromedp.CSS(`[data-action=new-gate]`)))
	mustContain(t, "gates after the restart", textOf(t, b, "#main"), "fmt")
	shot(t, b, "server-back")
}

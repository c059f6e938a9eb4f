package e2e

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/pixie-dev/pixie/internal/testutil"
)

// tabTo presses Tab until the focused element matches css (at most max presses).
func tabTo(t *testing.T, b *Browser, css string, max int) {
	t.Helper()
	for i := 0; i < max; i++ {
		if Eval[bool](t, b, `!!document.activeElement && document.activeElement.matches(`+jsq(css)+`)`) {
			return
		}
		b.Run(t, "Tab", chromedp.KeyEvent(kb.Tab))
	}
	b.Shot(t, "FAILED-tab-"+sanitize(css))
	t.Fatalf("%s was not reached with %d Tab presses; focus is on %s", css, max,
		Eval[string](t, b, `document.activeElement ? document.activeElement.outerHTML.slice(0, 160) : 'nothing'`))
}

// TestKeyboardOnly logs in, opens a page from the navigation, opens the hint bar and sends a
// hint, opens the Pet's wheel and moves between settings tabs, all with the keyboard alone.
func TestKeyboardOnly(t *testing.T) {
	m := newModelServer(t, `{"verdict":"pass"}`, "ok")
	p := testutil.StartServer(t, t.TempDir(), nil, m.modelArgs()...)
	b := NewBrowser(t, 1280, 800)
	viewport(t, b, 1280, 800)

	b.Run(t, "open", chromedp.Navigate(p.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#login-token")))
	if !Eval[bool](t, b, `document.activeElement === document.querySelector('#login-token')`) {
		t.Fatal("the token field is not focused on the login page")
	}
	b.Run(t, "type the token and press Enter", chromedp.KeyEvent(p.Token(t)), chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS("#app nav")))
	watchErrors(t, b)

	// On a fresh load (the session cookie keeps the login) the skip link comes first, then the
	// navigation.
	b.Run(t, "reload", chromedp.Navigate(p.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#app nav")), chromedp.WaitVisible(chromedp.CSS("main h1")))
	watchErrors(t, b)
	b.Run(t, "first Tab", chromedp.KeyEvent(kb.Tab))
	if !Eval[bool](t, b, `document.activeElement.matches('a.skip')`) {
		t.Fatalf("the first Tab focuses %s, want the skip link", Eval[string](t, b, `document.activeElement.outerHTML.slice(0, 120)`))
	}
	tabTo(t, b, `nav a[data-nav="records"]`, 8)
	shot(t, b, "focus-on-nav")
	b.Run(t, "Enter opens Records", chromedp.KeyEvent(kb.Enter))
	waitFor(t, b, "the Records page", `location.hash === '#/records' && document.querySelector('main h1') && document.querySelector('main h1').textContent === 'Records'`)
	if v := Eval[string](t, b, `document.querySelector('nav a[aria-current=page]').dataset.nav`); v != "records" {
		t.Fatalf("aria-current is on %q", v)
	}

	// The hint bar: reach it, open it with Enter, send with Enter, close with Escape.
	tabTo(t, b, "#hintbar button.pill", 30)
	b.Run(t, "open the bar", chromedp.KeyEvent(kb.Enter))
	waitFor(t, b, "the bar open with the input focused", `!document.querySelector('#hintbar .panel').hidden && document.activeElement === document.querySelector('#hintbar textarea')`)
	b.Run(t, "type and send", chromedp.KeyEvent("Check the migration first"), chromedp.KeyEvent(kb.Enter))
	waitFor(t, b, "the hint pending", `document.querySelector('[aria-label="Pending hints"]').innerText.includes('Check the migration first')`)
	shot(t, b, "hint-bar-by-keyboard")
	b.Run(t, "Escape", chromedp.KeyEvent(kb.Escape))
	waitFor(t, b, "the bar closed and the focus back", `document.querySelector('#hintbar .panel').hidden && document.activeElement === document.querySelector('#hintbar button.pill')`)

	// The Pet: the next stop after the hint bar; Enter opens the wheel, Escape closes it.
	tabTo(t, b, "button.mascot", 3)
	b.Run(t, "open the Pet", chromedp.KeyEvent(kb.Enter))
	waitFor(t, b, "the Pet panel", `!document.querySelector('.pet-panel').hidden && document.querySelector('.pet-panel').contains(document.activeElement)`)
	b.Run(t, "Escape", chromedp.KeyEvent(kb.Escape))
	waitFor(t, b, "the Pet closed", `document.querySelector('.pet-panel').hidden && document.activeElement === document.querySelector('button.mascot')`)

	// Settings tabs move with the arrow keys.
	open(t, b, "#/pet-settings", `[role=tab][aria-selected=true]`)
	b.Run(t, "focus the selected tab", chromedp.Focus(chromedp.CSS(`[role=tab][aria-selected=true]`)), chromedp.KeyEvent(kb.ArrowRight))
	waitFor(t, b, "the Skills tab", `document.activeElement.dataset.tab === 'skills' && document.activeElement.getAttribute('aria-selected') === 'true'`)
	b.Run(t, "End", chromedp.KeyEvent(kb.End))
	waitFor(t, b, "the Diagnostics tab", `document.activeElement.dataset.tab === 'diagnostics' && location.hash === '#/pet-settings?tab=diagnostics'`)
	noConsoleErrors(t, b)
}

// TestPageScreenshots writes a screenshot of every page at 1280×800 and in a narrow window
// (420×800), and checks that no page overflows the narrow window sideways.
func TestPageScreenshots(t *testing.T) {
	m := newModelServer(t, `{"verdict":"pass"}`, "ok")
	p := testutil.StartServer(t, t.TempDir(), nil, m.modelArgs()...)
	b := NewBrowser(t, 1280, 800)
	viewport(t, b, 1280, 800)
	login(t, b, p)
	watchErrors(t, b)
	pages := []struct{ name, hash, ready string }{
		{"gates", "#/gates", "[data-action=new-gate]"},
		{"scope", "#/scope", "[name=preset]"},
		{"records", "#/records", "[name=session]"},
		{"settings-model", "#/settings?tab=model", "[data-action=test-model]"},
		{"settings-engine", "#/settings?tab=engine", `[role=tab][data-tab="engine"][aria-selected=true]`},
		{"pet", "#/pet", ".task-list h2"},
		{"pet-settings", "#/pet-settings?tab=general", `[role=tab][data-tab="general"][aria-selected=true]`},
	}
	for _, size := range []struct{ w, h int64 }{{1280, 800}, {420, 800}} {
		viewport(t, b, size.w, size.h)
		for _, pg := range pages {
			open(t, b, pg.hash, pg.ready)
			waitFor(t, b, pg.name+" loaded", `!document.querySelector('main').innerText.includes('Loading…')`)
			if size.w < 500 {
				if over := Eval[int](t, b, `document.documentElement.scrollWidth - window.innerWidth`); over > 0 {
					b.Shot(t, "FAILED-overflow-"+pg.name)
					t.Fatalf("%s overflows a %d px window by %d px", pg.name, size.w, over)
				}
			}
			shot(t, b, fmt.Sprintf("%s-%d", pg.name, size.w))
		}
	}
	noConsoleErrors(t, b)
}

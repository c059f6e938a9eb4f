package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/pixie-dev/pixie/internal/testutil"
)

// TestHintSentAndConsumed sends a hint from the bar (Enter sends, Shift+Enter adds a newline),
// sees it pending, lets an agent take and confirm it over the API, and sees the toast and the
// consumed list; then cancels a second hint from the pending list.
func TestHintSentAndConsumed(t *testing.T) {
	p := testutil.StartServer(t, t.TempDir(), nil)
	b := NewBrowser(t, 1280, 800)
	viewport(t, b, 1280, 800)
	login(t, b, p)
	watchErrors(t, b)

	b.Run(t, "open the bar", click(chromedp.CSS("#hintbar button.pill")), chromedp.WaitVisible(chromedp.CSS("#hintbar .panel textarea")))
	if got := Eval[bool](t, b, `document.activeElement === document.querySelector('#hintbar textarea')`); !got {
		t.Fatal("the hint input is not focused when the bar opens")
	}
	b.Run(t, "type a two-line hint",
		chromedp.SendKeys(chromedp.CSS("#hintbar textarea"), "Use the v2 API"),
		chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(chromedp.ModifierShift)),
		chromedp.SendKeys(chromedp.CSS("#hintbar textarea"), "and keep the tests green"))
	if v := Eval[string](t, b, `document.querySelector('#hintbar textarea').value`); v != "Use the v2 API\nand keep the tests green" {
		t.Fatalf("Shift+Enter should add a newline, the input holds %q", v)
	}
	b.Run(t, "Enter sends", chromedp.KeyEvent(kb.Enter))
	waitFor(t, b, "the pending count", `document.querySelector('#hintbar .count').textContent === '1' && !document.querySelector('#hintbar .count').hidden`)
	waitFor(t, b, "the pending list", `document.querySelector('[aria-label="Pending hints"]').innerText.includes('and keep the tests green')`)
	// The bar clears the input only once the server has answered the send (a failed send keeps
	// the text), and the pending list can update over the event stream before that answer
	// arrives: so wait for the clearing rather than read the input once.
	waitFor(t, b, "the input cleared after the send", `document.querySelector('#hintbar textarea').value === ''`)
	shot(t, b, "hint-bar-open")

	// The agent's next step takes the hint and confirms it reached the model.
	var take struct {
		TakeID string `json:"takeId"`
		Hints  []struct {
			ID   string `json:"id"`
			Text string `json:"text"`
		} `json:"hints"`
	}
	adminAPI(t, p, "POST", "/v1/hints/take", map[string]any{"sessionId": "s-1"}, &take)
	if len(take.Hints) != 1 || !strings.HasPrefix(take.Hints[0].Text, "Use the v2 API") {
		t.Fatalf("take: %+v", take)
	}
	adminAPI(t, p, "POST", "/v1/hints/confirm", map[string]any{"takeId": take.TakeID}, nil)

	waitFor(t, b, "the consumption toast", `[...document.querySelectorAll('#toasts .toast')].some((x) => x.textContent.includes('The agent used your hint: Use the v2 API'))`)
	waitFor(t, b, "the consumed list", `document.querySelector('[aria-label="Recently consumed hints"]').innerText.includes('Use the v2 API')`)
	waitFor(t, b, "no pending badge", `document.querySelector('#hintbar .count').hidden`)
	shot(t, b, "hint-consumed")

	// A second hint, cancelled from the pending list.
	b.Run(t, "send a second hint", chromedp.SendKeys(chromedp.CSS("#hintbar textarea"), "never mind\n"))
	waitFor(t, b, "the second hint pending", `document.querySelector('[aria-label="Pending hints"]').innerText.includes('never mind')`)
	b.Run(t, "cancel it", click(chromedp.CSS(`[aria-label="Pending hints"] li button`)))
	waitFor(t, b, "the pending list empties", `document.querySelector('[aria-label="Pending hints"]').innerText.includes('Nothing pending')`)

	waitFor(t, b, "the focus back in the input after the cancel", `document.activeElement === document.querySelector('#hintbar textarea')`)
	b.Run(t, "Escape closes the bar", chromedp.KeyEvent(kb.Escape))
	waitFor(t, b, "the bar closed", `document.querySelector('#hintbar .panel').hidden && document.activeElement === document.querySelector('#hintbar button.pill')`)
	noConsoleErrors(t, b)
}

// TestHintPollingFallback runs the bar in a browser without EventSource: it says so, follows
// the queue by polling /v1/hints/state, and still toasts when an agent consumes a hint.
func TestHintPollingFallback(t *testing.T) {
	p := testutil.StartServer(t, t.TempDir(), nil)
	b := NewBrowser(t, 1280, 800)
	viewport(t, b, 1280, 800)
	b.Run(t, "no EventSource", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `delete window.EventSource;`})
		return err
	}))
	login(t, b, p)
	watchErrors(t, b)
	b.Run(t, "open the bar", click(chromedp.CSS("#hintbar button.pill")), chromedp.WaitVisible(chromedp.CSS("#hintbar .panel textarea")))
	waitFor(t, b, "the polling mode shown", `document.querySelector('#hintbar .panel').innerText.includes('polling')`)

	// A hint sent by a model-side tool (not from this page) shows up by polling.
	adminAPI(t, p, "POST", "/v1/hints", map[string]any{"text": "Prefer the small fix", "sessionId": "s-2"}, nil)
	waitFor(t, b, "the polled pending hint", `document.querySelector('[aria-label="Pending hints"]').innerText.includes('Prefer the small fix') && document.querySelector('#hintbar .count').textContent === '1'`)
	var take struct {
		TakeID string `json:"takeId"`
	}
	adminAPI(t, p, "POST", "/v1/hints/take", map[string]any{"sessionId": "s-2"}, &take)
	adminAPI(t, p, "POST", "/v1/hints/confirm", map[string]any{"takeId": take.TakeID}, nil)
	waitFor(t, b, "the toast from a polled snapshot", `[...document.querySelectorAll('#toasts .toast')].some((x) => x.textContent.includes('The agent used your hint: Prefer the small fix'))`)
	waitFor(t, b, "the consumed list", `document.querySelector('[aria-label="Recently consumed hints"]').innerText.includes('Prefer the small fix')`)
	shot(t, b, "polling")
	noConsoleErrors(t, b)
}

// TestHintEnterAddsNoLineBreak: Enter sends the hint and never adds a line break to the input,
// however long the server takes to answer. The browser gets Enter as CDP sends it, a keydown
// and then its own char event (a real keyboard's keypress); the request is held unanswered, so
// the input is read before the bar clears it.
func TestHintEnterAddsNoLineBreak(t *testing.T) {
	p := testutil.StartServer(t, t.TempDir(), nil)
	b := NewBrowser(t, 1280, 800)
	viewport(t, b, 1280, 800)
	login(t, b, p)
	b.Run(t, "open the bar", click(chromedp.CSS("#hintbar button.pill")), chromedp.WaitVisible(chromedp.CSS("#hintbar .panel textarea")))
	b.Run(t, "type a hint", chromedp.SendKeys(chromedp.CSS("#hintbar textarea"), "Use the v2 API"))
	Eval[bool](t, b, `(() => { const f = window.fetch; window.__held = 0;
		window.fetch = (u, o) => (o && o.method === 'POST' && String(u).endsWith('/v1/hints')) ? (window.__held++, new Promise(() => {})) : f(u, o); return true; })()`)
	b.Run(t, "Enter sends", chromedp.KeyEvent(kb.Enter))
	waitFor(t, b, "the held send", `window.__held === 1`)
	if v := Eval[string](t, b, `document.querySelector('#hintbar textarea').value`); v != "Use the v2 API" {
		t.Fatalf("after Enter the input holds %q, want the text without a line break", v)
	}
}

// TestHintBarAbsentWhenHintsAreOff: with hints.enabled off the server mounts no hint route, and
// Studio shows no hint bar and never asks for the hint state or its event stream.
func TestHintBarAbsentWhenHintsAreOff(t *testing.T) {
	p := testutil.StartServer(t, t.TempDir(), []string{"PIXIE_HINTS_ENABLED=false"})
	b := NewBrowser(t, 1280, 800)
	viewport(t, b, 1280, 800)
	login(t, b, p)
	watchErrors(t, b)
	waitFor(t, b, "the Gates page", `!!document.querySelector('#main .view h1')`)
	if Eval[bool](t, b, `!!document.querySelector('#hintbar button') || !document.getElementById('hintbar').hidden`) {
		t.Fatal("the hint bar is shown although the server has no hints")
	}
	if got := Eval[[]string](t, b, `performance.getEntriesByType('resource').map((e) => e.name).filter((n) => n.includes('/v1/hints'))`); len(got) != 0 {
		t.Fatalf("Studio asked for hint routes: %v", got)
	}
	shot(t, b, "hints-off")
	noConsoleErrors(t, b)
}

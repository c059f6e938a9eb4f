package e2e

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/pixie-dev/pixie/internal/testutil"
)

// TestRecordNotesBlock: a run's notes show on Records as the chat's note block, here for a gate
// whose "Show the result in the chat" is off (its notes reach no host, so this is where they are
// read): the bracketed label is the title, "미확인" gets the not verified badge, the body is
// Markdown with any raw HTML shown as text (an <img onerror> runs nothing), a note without a
// label is titled with the gate's name, Hide collapses only its block, and Turn off in this
// session switches the gate off for that session.
func TestRecordNotesBlock(t *testing.T) {
	note := "[한국어 번역 — 미확인]\n**굵게** 그리고 `코드`\n\n- 하나\n- 둘\n\n<img src=x onerror=\"window.__xss=1\">\n\n[docs](https://example.com/docs) [bad](javascript:window.__xss=2)"
	answer, _ := json.Marshal(map[string]string{"note": note, "reason": "REASON-ONLY"})
	m := newModelServer(t, string(answer), "")
	p := testutil.StartServer(t, t.TempDir(), nil, m.modelArgs()...)
	adminAPI(t, p, http.MethodPut, "/v1/gates", map[string]any{
		"gates": []map[string]any{{"name": "translate", "point": "turn-end", "task": "Translate the answer into Korean.",
			"advanced": map[string]any{"showInChat": false}}},
		"presets": []map[string]any{{"name": "default", "gates": []map[string]any{{"gate": "translate"}}}},
	}, nil)
	var res struct {
		RunID      string   `json:"runId"`
		Notes      []string `json:"notes"`
		ShowInChat bool     `json:"showInChat"`
	}
	adminAPI(t, p, http.MethodPost, "/v1/gates/evaluate", map[string]any{"point": "turn-end", "target": "All done.", "turn": 1,
		"session": map[string]any{"id": "notes-1", "preset": "default"}}, &res)
	if res.RunID == "" || len(res.Notes) != 2 || res.ShowInChat {
		t.Fatalf("evaluate: %+v", res)
	}

	b := NewBrowser(t, 1280, 900)
	viewport(t, b, 1280, 900)
	login(t, b, p)
	watchErrors(t, b)
	open(t, b, "#/records?session=notes-1&run="+res.RunID, ".chat-note")
	waitFor(t, b, "two note blocks", `document.querySelectorAll('.chat-note').length === 2`)
	got := Eval[map[string]any](t, b, `(() => {
		const [a, c] = document.querySelectorAll('.chat-note');
		const body = a.querySelector('.note-body');
		return {
			title: a.querySelector('.note-title').textContent,
			badge: !!a.querySelector('[data-badge=not-verified]') && a.querySelector('[data-badge=not-verified]').textContent,
			strong: body.querySelector('strong') && body.querySelector('strong').textContent,
			code: body.querySelector('code') && body.querySelector('code').textContent,
			items: body.querySelectorAll('li').length,
			img: document.querySelectorAll('.record img').length,
			htmlShownAsText: body.textContent.includes('<img src=x onerror="window.__xss=1">'),
			link: [...body.querySelectorAll('a')].map((x) => x.href + ' ' + x.rel + ' ' + x.target).join('|'),
			badLinkText: body.textContent.includes('[bad](javascript:window.__xss=2)'),
			xss: window.__xss === undefined ? 0 : window.__xss,
			second: c.querySelector('.note-title').textContent,
			secondBadge: !!c.querySelector('[data-badge]'),
			secondBody: c.querySelector('.note-body').textContent,
			lead: document.querySelector('.card.notes').innerText,
		};
	})()`)
	want := map[string]any{"title": "한국어 번역 — 미확인", "badge": "not verified", "strong": "굵게", "code": "코드", "items": 2.0, "img": 0.0,
		"htmlShownAsText": true, "link": "https://example.com/docs noopener noreferrer _blank", "badLinkText": true, "xss": 0.0,
		"second": "translate", "secondBadge": false, "secondBody": "Reason: REASON-ONLY"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
	mustContain(t, "the notes' lead", got["lead"].(string), "does not show its results in the chat")
	shot(t, b, "record-notes")

	// Hide collapses only that block.
	b.Run(t, "hide the first note", click(chromedp.CSS(`.chat-note:first-of-type [data-action=hide-note]`)))
	waitFor(t, b, "the first note collapsed", `document.querySelector('.chat-note .note-body').hidden`)
	if Eval[bool](t, b, `(() => { const [a, c] = document.querySelectorAll('.chat-note');
		return !c.querySelector('.note-body').hidden && a.querySelector('.note-title').offsetParent !== null &&
			a.querySelector('[data-action=hide-note]').textContent === 'Show' && a.querySelector('[data-action=hide-note]').getAttribute('aria-expanded') === 'false' &&
			document.querySelector('.record h2#run-title').offsetParent !== null; })()`) != true {
		t.Fatal("Hide did more (or less) than collapse its own block")
	}
	b.Run(t, "show it again", click(chromedp.CSS(`.chat-note:first-of-type [data-action=hide-note]`)))
	waitFor(t, b, "the first note open", `!document.querySelector('.chat-note .note-body').hidden`)

	// Turn off in this session: the gate's per-session switch.
	b.Run(t, "turn the gate off in this session", click(chromedp.CSS(`.chat-note:first-of-type [data-action=switch-gate]`)))
	waitFor(t, b, "the switch saved", `[...document.querySelectorAll('#toasts .toast')].some((x) => x.textContent.includes('translate is off in this session'))`)
	waitFor(t, b, "the button says so", `document.querySelector('.chat-note [data-action=switch-gate]').textContent === 'Turn on in this session'`)
	var sg struct {
		Gates []struct {
			Gate string `json:"gate"`
			On   bool   `json:"on"`
		} `json:"gates"`
	}
	adminAPI(t, p, http.MethodGet, "/v1/gates/sessions/notes-1/switches?preset=default", nil, &sg)
	if len(sg.Gates) != 1 || sg.Gates[0].Gate != "translate" || sg.Gates[0].On {
		t.Fatalf("switches: %+v", sg.Gates)
	}
	// Reopened, the blocks know the gate is off.
	open(t, b, "#/records?session=notes-1", "table.records")
	open(t, b, "#/records?session=notes-1&run="+res.RunID, ".chat-note")
	waitFor(t, b, "the switch state after a reload", `document.querySelector('.chat-note [data-action=switch-gate]').textContent === 'Turn on in this session'`)
	noConsoleErrors(t, b)
}

package hint

import (
	"context"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
)

func ptr(s string) *string { return &s }

func TestHintSend(t *testing.T) {
	ctx := context.Background()
	q, _ := newQueue(t, Config{MaxPendingPerSession: 1})
	if err := q.TurnStart("me"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, caller string
		args         SendArgs
		wantSession  string
		running      bool
		evicted      bool
		code         errs.Code
	}{
		{name: "defaults-to-caller", caller: "me", args: SendArgs{Text: "a"}, wantSession: "me", running: true},
		{name: "explicit-session", caller: "me", args: SendArgs{Text: "b", SessionID: ptr("other")}, wantSession: "other"},
		{name: "explicit-global", caller: "me", args: SendArgs{Text: "c", SessionID: ptr("")}, wantSession: "", running: true},
		{name: "evicts-at-cap", caller: "me", args: SendArgs{Text: "d"}, wantSession: "me", running: true, evicted: true},
		{name: "blank", caller: "me", args: SendArgs{Text: "  "}, code: errs.Invalid},
		{name: "reserved-session", caller: "me", args: SendArgs{Text: "x", SessionID: ptr("*")}, code: errs.Invalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := q.HintSend(ctx, tc.caller, tc.args)
			if tc.code != "" {
				wantCode(t, err, tc.code)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !r.OK || r.HintID == "" || r.SessionID != tc.wantSession || r.Running != tc.running ||
				r.Evicted != tc.evicted || len(r.Dropped) != map[bool]int{true: 1}[tc.evicted] {
				t.Fatalf("result = %+v", r)
			}
		})
	}
}

// hint_send reports a cut at the limit instead of cutting silently; the edge is exact.
func TestHintSendReportsTruncation(t *testing.T) {
	ctx := context.Background()
	q, _ := newQueue(t, Config{MaxContentChars: 5})
	for _, tc := range []struct {
		text      string
		truncated bool
		chars     int
	}{{"héllo", false, 5}, {"  héllo  ", false, 5}, {"héllo!", true, 5}, {"ab", false, 2}} {
		r, err := q.HintSend(ctx, "", SendArgs{Text: tc.text})
		if err != nil {
			t.Fatal(err)
		}
		if r.Truncated != tc.truncated || r.Chars != tc.chars {
			t.Errorf("%q: truncated %v chars %d", tc.text, r.Truncated, r.Chars)
		}
	}
}

func TestHintStatus(t *testing.T) {
	ctx := context.Background()
	q, _ := newQueue(t, Config{})
	put(t, q, "me", "mine")
	put(t, q, "", "global")
	put(t, q, "other", "theirs")
	if _, err := q.TakeAndConfirm(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	put(t, q, "other", "theirs-2")
	if err := q.TurnStart("other"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, caller     string
		args             StatusArgs
		session, pending string
		consumed         string
		running          bool
	}{
		{name: "caller", caller: "me", session: "me", pending: "mine", consumed: "global"},
		{name: "explicit", caller: "me", args: StatusArgs{SessionID: ptr("other")}, session: "other",
			pending: "theirs-2", consumed: "theirs,global", running: true},
		{name: "all", caller: "me", args: StatusArgs{SessionID: ptr("*")}, session: "*",
			pending: "mine,theirs-2", consumed: "theirs,global", running: true},
		{name: "global-only", caller: "", session: "", pending: "", consumed: "global", running: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := q.HintStatus(ctx, tc.caller, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			// Consumed come newest first; the take consumed "global" and "theirs" in one step,
			// so order them by text for a stable comparison.
			if r.SessionID != tc.session || strings.Join(texts(r.Pending), ",") != tc.pending ||
				!sameSet(texts(r.Consumed), tc.consumed) || r.Running != tc.running ||
				strings.Join(r.RunningSessions, ",") != "other" {
				t.Fatalf("status = %+v", r)
			}
		})
	}
	_, err := q.HintStatus(ctx, "me", StatusArgs{SessionID: ptr("bad\x01")})
	wantCode(t, err, errs.Invalid)
}

func sameSet(got []string, want string) bool {
	if want == "" {
		return len(got) == 0
	}
	w := strings.Split(want, ",")
	if len(w) != len(got) {
		return false
	}
	m := map[string]bool{}
	for _, g := range got {
		m[g] = true
	}
	for _, x := range w {
		if !m[x] {
			return false
		}
	}
	return true
}

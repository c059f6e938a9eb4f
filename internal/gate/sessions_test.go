package gate

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

func TestSessionsNewestFirstWithLastRun(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	e.saveGates(t, gateAt("fmt", "user-message", "Check."))
	eval := func(session string, turn int) {
		r := evalReq("user-message", "x")
		r.Session.ID, r.Turn = session, turn
		if _, err := e.svc.Evaluate(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	page, err := e.svc.Sessions(ctx, "", 0)
	if err != nil || len(page.Sessions) != 0 || page.Sessions == nil {
		t.Fatalf("empty: %+v %v", page, err)
	}
	eval("a", 1)
	eval("b", 1)
	eval("c", 1)
	eval("a", 2) // a moves to the front
	var order []string
	var turns []int
	cursor := ""
	pages := 0
	for {
		page, err := e.svc.Sessions(ctx, cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, s := range page.Sessions {
			order = append(order, s.Session)
			turns = append(turns, s.LastRun.Turn)
			if s.Preset != "dev" || s.LastRun.ID == "" || s.LastRun.Gate != "fmt" {
				t.Errorf("session %+v", s)
			}
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	if want := []string{"a", "c", "b"}; !reflect.DeepEqual(order, want) || pages != 2 {
		t.Errorf("order %v over %d pages, want %v over 2", order, pages, want)
	}
	if !reflect.DeepEqual(turns, []int{2, 1, 1}) {
		t.Errorf("last runs' turns %v", turns)
	}
	for _, bad := range []struct {
		cursor string
		limit  int
	}{{"nope", 0}, {"", -1}, {"", MaxSessionPage + 1}, {"00000000000000000000/a/b", 0}} {
		if _, err := e.svc.Sessions(ctx, bad.cursor, bad.limit); !errs.Is(err, errs.Invalid) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if page, err := e.svc.Sessions(ctx, "", MaxSessionPage); err != nil || len(page.Sessions) != 3 {
		t.Errorf("max page: %+v %v", page, err)
	}
}

// TestSessionEntriesUnderConcurrentRecords: records written in the background and the records
// of redos (written at once, in their own commit) for the same sessions at the same time leave
// each session exactly one place in the sessions list, at its newest run; the sessions'
// entries are cached by the writer (sessionCache), so this is what keeps two commits from
// starting from the same entry.
func TestSessionEntriesUnderConcurrentRecords(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	e.llm.SetReply(answer(`{"verdict":"stop","reason":"again"}`))
	e.saveGates(t, gateAt("ask", "user-message", "Check."), gateAt("end", "turn-end", "Check the answer."))
	const sessions, runs = 4, 25
	var wg sync.WaitGroup
	for s := range sessions {
		for _, point := range []string{"user-message", "turn-end"} {
			wg.Go(func() {
				for i := range runs {
					r := evalReq(point, fmt.Sprintf("%s %d", point, i))
					r.Session.ID, r.Turn = fmt.Sprintf("s%d", s), 1000+i
					res, err := e.svc.Evaluate(ctx, r)
					if err != nil || res.RunID == "" {
						t.Errorf("%+v %v", res, err)
						return
					}
					if point == "turn-end" && res.Action != ActionSteered {
						t.Errorf("turn-end run %d: %s, want a redo", i, res.Action)
					}
				}
			})
		}
	}
	wg.Wait()
	if err := e.svc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	places := map[string]int{}
	err := e.st.View(ctx, func(tx *store.Tx) error {
		return sessionRecentCol.Each(tx, "", store.ScanOptions{}, func(_ string, session string) error {
			places[session]++
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for s := range sessions {
		id := fmt.Sprintf("s%d", s)
		if places[id] != 1 {
			t.Errorf("session %s has %d places in the sessions list", id, places[id])
		}
		page, err := e.svc.Records(ctx, id, "", 1)
		if err != nil || len(page.Records) != 1 {
			t.Fatalf("%+v %v", page, err)
		}
		sp, err := e.svc.Sessions(ctx, "", MaxSessionPage)
		if err != nil {
			t.Fatal(err)
		}
		for _, ss := range sp.Sessions {
			if ss.Session == id && ss.LastRun.ID != page.Records[0].ID {
				t.Errorf("session %s: last run %s, its newest record %s", id, ss.LastRun.ID, page.Records[0].ID)
			}
		}
	}
}

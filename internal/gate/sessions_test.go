package gate

import (
	"context"
	"reflect"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
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

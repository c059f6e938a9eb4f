package hooks

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/pixie-dev/pixie/internal/store/pgstore"
	"github.com/pixie-dev/pixie/internal/store/pgstore/pgtest"
)

// A session's turn counter lives in the store only, so two replicas over one PostgreSQL
// database that get a session's hook events (in any order, at once) count its turns as one
// process does: each new turn key advances the turn once, none is lost or counted twice.
func TestTurnsAcrossReplicas(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	var svcs []*Service
	for i := 0; i < 2; i++ {
		st, err := pgstore.Open(ctx, pgstore.Options{URL: url, MaxConns: 4, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		svc, err := New(ctx, Config{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		svcs = append(svcs, svc)
	}
	const prompts = 20
	var mu sync.Mutex
	var got []int
	var wg sync.WaitGroup
	for i := 0; i < prompts; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := svcs[i%2].turn(ctx, Event{Name: EventUserPromptSubmit, Agent: AgentRoot, SessionID: "s1", TurnKey: fmt.Sprintf("k%d", i)})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			got = append(got, n)
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Ints(got)
	for i, n := range got {
		if n != i+1 {
			t.Fatalf("turns handed out %v, want 1..%d once each", got, prompts)
		}
	}
	// A tool event without a turn key, on either replica, belongs to the current turn.
	for _, s := range svcs {
		n, err := s.turn(ctx, Event{Name: EventPreToolUse, Agent: AgentRoot, SessionID: "s1"})
		if err != nil {
			t.Fatal(err)
		}
		if n != prompts {
			t.Fatalf("a tool event got turn %d, want %d", n, prompts)
		}
	}
}

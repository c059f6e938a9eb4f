package hint

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/pgstore"
	"github.com/pixie-dev/pixie/internal/store/pgstore/pgtest"
)

// replicas opens n Queues over one fresh PostgreSQL database, as n replicas would.
func replicas(t *testing.T, n int, poll bool) []*Queue {
	t.Helper()
	url := pgtest.NewDatabase(t)
	var qs []*Queue
	for i := 0; i < n; i++ {
		st, err := pgstore.Open(context.Background(), pgstore.Options{URL: url, MaxConns: 4, SweepInterval: -1,
			Poll: poll, PollInterval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		q, err := New(context.Background(), Config{Store: st, Lease: time.Minute, MaxPendingPerSession: 1000, MaxPerStep: 5})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Close(context.Background()); st.Close() })
		qs = append(qs, q)
	}
	return qs
}

// collect reads a subscription's frames until the state reaches rev.
func collect(t *testing.T, sub *Subscription, rev uint64) (states []Snapshot, acts []Action) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-sub.Ready():
			for _, f := range sub.Next() {
				switch f.Event {
				case EventState:
					var s Snapshot
					if err := json.Unmarshal(f.Data, &s); err != nil {
						t.Fatal(err)
					}
					states = append(states, s)
				case EventHint:
					var a Action
					if err := json.Unmarshal(f.Data, &a); err != nil {
						t.Fatal(err)
					}
					acts = append(acts, a)
				}
			}
			if n := len(states); n > 0 && states[n-1].Revision >= rev {
				return states, acts
			}
		case <-deadline:
			t.Fatalf("no state at revision %d (got %d states, %d actions)", rev, len(states), len(acts))
		}
	}
}

func summary(acts []Action) []string {
	var out []string
	for _, a := range acts {
		out = append(out, fmt.Sprintf("%d %s %s", a.Revision, a.Kind, a.Hint.Text))
	}
	return out
}

// A stream on one replica sees what another replica changed, in revision order, with the same
// frames whether the store notifies or is polled.
func TestStreamSeesOtherReplicas(t *testing.T) {
	ctx := context.Background()
	var runs [][]string
	for _, poll := range []bool{false, true} {
		t.Run(fmt.Sprintf("poll=%v", poll), func(t *testing.T) {
			qs := replicas(t, 3, poll)
			a, b, c := qs[0], qs[1], qs[2]
			sub, snap, err := a.Subscribe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			if snap.Revision != 0 {
				t.Fatalf("fresh queue at revision %d", snap.Revision)
			}
			put(t, b, "s1", "from b")
			put(t, c, "s1", "from c")
			tk, err := b.Take(ctx, "s1")
			if err != nil || len(tk.Hints) != 2 {
				t.Fatalf("take: %+v %v", tk, err)
			}
			if _, err := c.Confirm(ctx, tk.ID); err != nil {
				t.Fatal(err)
			}
			states, acts := collect(t, sub, 4)
			last := states[len(states)-1]
			if last.Revision != 4 || len(last.Pending) != 0 || len(last.Consumed) != 2 {
				t.Fatalf("last state %+v", last)
			}
			got := summary(acts)
			want := []string{"1 added from b", "2 added from c", "4 consumed from b", "4 consumed from c"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("actions %v, want %v", got, want)
			}
			runs = append(runs, got)
			// A late subscriber on c starts from its snapshot: no old actions.
			sub2, snap2, err := c.Subscribe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer sub2.Close()
			put(t, a, "", "global")
			_, acts2 := collect(t, sub2, snap2.Revision+1)
			if fmt.Sprint(summary(acts2)) != fmt.Sprint([]string{fmt.Sprintf("%d added global", snap2.Revision+1)}) {
				t.Fatalf("late subscriber got %v", summary(acts2))
			}
		})
	}
	if len(runs) == 2 && fmt.Sprint(runs[0]) != fmt.Sprint(runs[1]) {
		t.Fatalf("polling disagrees with notifications: %v vs %v", runs[1], runs[0])
	}
}

// Hints put on three replicas and taken concurrently from all three are each delivered once.
func TestConcurrentTakesAcrossReplicasDeliverOnce(t *testing.T) {
	ctx := context.Background()
	qs := replicas(t, 3, false)
	const perReplica = 20
	var wg sync.WaitGroup
	for i, q := range qs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < perReplica; j++ {
				if _, err := q.Put(ctx, "s", fmt.Sprintf("h-%d-%d", i, j)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var mu sync.Mutex
	seen := map[string]int{}
	stop := make(chan struct{})
	var takers sync.WaitGroup
	for _, q := range qs {
		takers.Add(1)
		go func() {
			defer takers.Done()
			for {
				tk, err := q.Take(ctx, "s")
				if err != nil {
					t.Error(err)
					return
				}
				if tk.ID != "" {
					if _, err := q.Confirm(ctx, tk.ID); err != nil {
						t.Error(err)
						return
					}
				}
				mu.Lock()
				for _, h := range tk.Hints {
					seen[h.Text]++
				}
				n := len(seen)
				mu.Unlock()
				select {
				case <-stop:
					return
				default:
				}
				if n == 3*perReplica {
					return
				}
				if len(tk.Hints) == 0 {
					time.Sleep(2 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	done := make(chan struct{})
	go func() { takers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		close(stop)
		t.Fatal("takers did not finish")
	}
	var dup []string
	for k, n := range seen {
		if n != 1 {
			dup = append(dup, k)
		}
	}
	sort.Strings(dup)
	if len(seen) != 3*perReplica || len(dup) > 0 {
		t.Fatalf("%d distinct hints delivered (want %d); delivered more than once: %v", len(seen), 3*perReplica, dup)
	}
}

func TestRunningSessionsAreShared(t *testing.T) {
	qs := replicas(t, 2, false)
	a, b := qs[0], qs[1]
	if b.Running("s1") || b.Running("") {
		t.Fatal("running before any turn")
	}
	if err := a.TurnStart("s1"); err != nil {
		t.Fatal(err)
	}
	if !b.Running("s1") || !b.Running("") || fmt.Sprint(b.RunningSessions()) != "[s1]" {
		t.Fatalf("b does not see a's turn: %v", b.RunningSessions())
	}
	r := put(t, b, "s1", "x")
	if !r.Running {
		t.Fatal("put on b reports s1 not running")
	}
	if err := b.TurnEnd("s1"); err != nil {
		t.Fatal(err)
	}
	if a.Running("s1") {
		t.Fatal("a still sees the ended turn")
	}
}

// Only one replica sweeps expired leases at a time.
func TestSweepLeaderIsOne(t *testing.T) {
	qs := replicas(t, 3, false)
	ctx := context.Background()
	leaders := 0
	for _, q := range qs {
		ok, err := q.st.Lead(ctx, "hint-lease-sweep", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("%d leaders", leaders)
	}
	var _ = store.ErrStop
}

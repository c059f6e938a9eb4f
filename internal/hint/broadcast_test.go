package hint

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

func decodeFrames(t *testing.T, fs []Frame) (states []Snapshot, acts []Action) {
	t.Helper()
	for _, f := range fs {
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
		default:
			t.Fatalf("unknown event %q", f.Event)
		}
	}
	return states, acts
}

func waitFrames(t *testing.T, sub *Subscription) []Frame {
	t.Helper()
	select {
	case <-sub.Ready():
		return sub.Next()
	case <-time.After(5 * time.Second):
		t.Fatal("no frames within 5s")
		return nil
	}
}

func TestSubscriptionFrames(t *testing.T) {
	ctx := context.Background()
	q, _ := newQueue(t, Config{})
	put(t, q, "s", "before")
	sub, snap, err := q.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if snap.Revision != 1 || len(snap.Pending) != 1 {
		t.Fatalf("initial snapshot = %+v", snap)
	}
	if fs := sub.Next(); fs != nil {
		t.Fatalf("frames before any change: %v", fs)
	}

	steps := []struct {
		name    string
		do      func() error
		kinds   []ActionKind
		pending int
	}{
		{name: "put", do: func() error { _, err := q.Put(ctx, "s", "new"); return err },
			kinds: []ActionKind{ActionAdded}, pending: 2},
		{name: "take-emits-no-receipt-yet", do: func() error { _, err := q.Take(ctx, "s"); return err },
			pending: 0},
		{name: "rollback-emits-state-only", do: func() error {
			snap, _ := q.Snapshot(ctx)
			_, err := q.Rollback(ctx, snap.Consumed[0].TakeID)
			return err
		}, pending: 2},
		{name: "take-and-confirm-emits-receipts", do: func() error { _, err := q.TakeAndConfirm(ctx, "s"); return err },
			kinds: []ActionKind{ActionConsumed, ActionConsumed}, pending: 0},
		{name: "cancel", do: func() error {
			r, err := q.Put(ctx, "s", "to cancel")
			if err != nil {
				return err
			}
			waitFrames(t, sub) // the put's frames
			_, err = q.Cancel(ctx, r.Hint.ID)
			return err
		}, kinds: []ActionKind{ActionCancelled}, pending: 0},
	}
	last := snap.Revision
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if err := st.do(); err != nil {
				t.Fatal(err)
			}
			states, acts := decodeFrames(t, waitFrames(t, sub))
			if len(states) != 1 || states[0].Revision <= last || len(states[0].Pending) != st.pending {
				t.Fatalf("states = %+v, want one newer than %d with %d pending", states, last, st.pending)
			}
			last = states[0].Revision
			if len(acts) != len(st.kinds) {
				t.Fatalf("actions = %+v, want kinds %v", acts, st.kinds)
			}
			for i, a := range acts {
				if a.Kind != st.kinds[i] || a.Revision != last {
					t.Fatalf("action %d = %+v, want %s at revision %d", i, a, st.kinds[i], last)
				}
			}
		})
	}
	// Confirm of a two-phase take emits the receipts.
	put(t, q, "s", "x")
	waitFrames(t, sub)
	tk, _ := q.Take(ctx, "s")
	waitFrames(t, sub)
	if _, err := q.Confirm(ctx, tk.ID); err != nil {
		t.Fatal(err)
	}
	_, acts := decodeFrames(t, waitFrames(t, sub))
	if len(acts) != 1 || acts[0].Kind != ActionConsumed || acts[0].Hint.ID != tk.Hints[0].ID {
		t.Fatalf("confirm actions = %+v", acts)
	}
}

// A subscriber that does not read keeps only the newest state and its action backlog; writers
// never wait for it.
func TestSlowSubscriberGetsLatestState(t *testing.T) {
	ctx := context.Background()
	q, _ := newQueue(t, Config{MaxPendingPerSession: 100})
	sub, _, err := q.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	const n = 25
	for i := 0; i < n; i++ {
		put(t, q, "s", fmt.Sprintf("h%d", i))
	}
	states, acts := decodeFrames(t, sub.Next())
	if len(states) != 1 || states[0].Revision != n || len(states[0].Pending) != n {
		t.Fatalf("states = %d (rev %v), want the one newest", len(states), states)
	}
	if len(acts) != n {
		t.Fatalf("%d actions, want %d", len(acts), n)
	}
}

func TestBacklogOverflowDropsOldestActions(t *testing.T) {
	b := newBroadcaster()
	s := b.subscribe()
	for i := 1; i <= maxBacklog+10; i++ {
		b.publish(Snapshot{Revision: uint64(i)}, []Action{{Kind: ActionAdded, Hint: Hint{ID: fmt.Sprint(i)}}})
	}
	// An older state arriving late (commits publish out of order) is not delivered.
	b.publish(Snapshot{Revision: 3}, nil)
	states, acts := decodeFrames(t, s.Next())
	if len(states) != 1 || states[0].Revision != maxBacklog+10 {
		t.Fatalf("states = %+v", states)
	}
	if len(acts) != maxBacklog || acts[0].Hint.ID != "11" || s.Dropped() != 10 {
		t.Fatalf("%d actions starting at %s, dropped %d", len(acts), acts[0].Hint.ID, s.Dropped())
	}
	b.close()
	select {
	case <-s.Done():
	default:
		t.Fatal("closing the broadcaster did not end the subscription")
	}
	s.Close() // twice is fine
}

func TestCloseEndsSubscriptions(t *testing.T) {
	ctx := context.Background()
	q, _ := newQueue(t, Config{})
	sub, _, err := q.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if q.Subscribers() != 1 {
		t.Fatalf("subscribers = %d", q.Subscribers())
	}
	q.Close(context.Background())
	select {
	case <-sub.Done():
	case <-time.After(time.Second):
		t.Fatal("subscription still open after Close")
	}
	if _, _, err := q.Subscribe(ctx); err == nil {
		t.Fatal("subscribed to a closed queue")
	}
}

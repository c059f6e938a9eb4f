// Package storetest is the conformance suite every store driver must pass: CRUD, ordered prefix
// listing (forward, reverse, paged), transactions (atomic commit, rollback on error, read-only
// views), conflict retry under concurrent writers, TTL expiry, and data kept across a reopen.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/store"
)

// Opener opens the store kept in dir; opening the same dir again must see earlier data.
type Opener func(t *testing.T, dir string) *store.Store

type item struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

var items = store.NewCollection[item]("item")

// Run runs the suite.
func Run(t *testing.T, open Opener) {
	ctx := context.Background()
	t.Run("crud", func(t *testing.T) {
		s := open(t, t.TempDir())
		defer s.Close()
		err := s.View(ctx, func(tx *store.Tx) error { _, err := items.Get(tx, "a"); return err })
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("get missing: got %v, want ErrNotFound", err)
		}
		must(t, s.Update(ctx, func(tx *store.Tx) error { return items.Put(tx, "a", item{"A", 1}) }))
		var got item
		must(t, s.View(ctx, func(tx *store.Tx) (err error) { got, err = items.Get(tx, "a"); return }))
		if got != (item{"A", 1}) {
			t.Fatalf("got %+v", got)
		}
		err = s.Update(ctx, func(tx *store.Tx) error { return items.Insert(tx, "a", item{"B", 2}) })
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("insert existing: got %v, want ErrConflict", err)
		}
		must(t, s.Update(ctx, func(tx *store.Tx) error { return items.Delete(tx, "a") }))
		must(t, s.Update(ctx, func(tx *store.Tx) error { return items.Delete(tx, "never") }))
		err = s.View(ctx, func(tx *store.Tx) error { _, err := items.Get(tx, "a"); return err })
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("after delete: %v", err)
		}
	})
	t.Run("list-by-prefix-in-order", func(t *testing.T) {
		s := open(t, t.TempDir())
		defer s.Close()
		ids := []string{"s1/003", "s1/001", "s2/001", "s1/002", "s10/001"}
		must(t, s.Update(ctx, func(tx *store.Tx) error {
			for i, id := range ids {
				if err := items.Put(tx, id, item{id, i}); err != nil {
					return err
				}
			}
			return nil
		}))
		cases := []struct {
			name   string
			prefix string
			opts   store.ScanOptions
			want   []string
		}{
			{"forward", "s1/", store.ScanOptions{}, []string{"s1/001", "s1/002", "s1/003"}},
			{"reverse", "s1/", store.ScanOptions{Reverse: true}, []string{"s1/003", "s1/002", "s1/001"}},
			{"limit", "s1/", store.ScanOptions{Limit: 2}, []string{"s1/001", "s1/002"}},
			{"after", "s1/", store.ScanOptions{After: []byte("s1/001")}, []string{"s1/002", "s1/003"}},
			{"reverse-after", "s1/", store.ScanOptions{Reverse: true, After: []byte("s1/003"), Limit: 1}, []string{"s1/002"}},
			{"all", "", store.ScanOptions{}, []string{"s1/001", "s1/002", "s1/003", "s10/001", "s2/001"}},
			{"none", "zz", store.ScanOptions{}, nil},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				var got []string
				must(t, s.View(ctx, func(tx *store.Tx) error {
					es, err := items.List(tx, c.prefix, c.opts)
					for _, e := range es {
						got = append(got, e.ID)
					}
					return err
				}))
				if fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Fatalf("got %v, want %v", got, c.want)
				}
			})
		}
	})
	t.Run("transaction-atomic", func(t *testing.T) {
		s := open(t, t.TempDir())
		defer s.Close()
		boom := errors.New("boom")
		committed := false
		err := s.Update(ctx, func(tx *store.Tx) error {
			tx.AfterCommit(func() { committed = true })
			if err := items.Put(tx, "x", item{"X", 1}); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("callback error not returned as is: %v", err)
		}
		if committed {
			t.Fatal("AfterCommit ran for a failed transaction")
		}
		err = s.View(ctx, func(tx *store.Tx) error { _, err := items.Get(tx, "x"); return err })
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("failed transaction left a write: %v", err)
		}
		err = s.View(ctx, func(tx *store.Tx) error { return items.Put(tx, "y", item{}) })
		if err == nil {
			t.Fatal("write in a view succeeded")
		}
	})
	t.Run("conflict-retry", func(t *testing.T) {
		s := open(t, t.TempDir())
		defer s.Close()
		must(t, s.Update(ctx, func(tx *store.Tx) error { return items.Put(tx, "n", item{"n", 0}) }))
		const writers, each = 8, 25
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					err := s.Update(ctx, func(tx *store.Tx) error {
						v, err := items.Get(tx, "n")
						if err != nil {
							return err
						}
						v.Count++
						return items.Put(tx, "n", v)
					})
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("concurrent increment: %v", err)
		}
		var got item
		must(t, s.View(ctx, func(tx *store.Tx) (err error) { got, err = items.Get(tx, "n"); return }))
		if got.Count != writers*each {
			t.Fatalf("lost updates: count %d, want %d", got.Count, writers*each)
		}
	})
	t.Run("ttl", func(t *testing.T) {
		s := open(t, t.TempDir())
		defer s.Close()
		must(t, s.Update(ctx, func(tx *store.Tx) error { return items.PutTTL(tx, "t", item{}, time.Second) }))
		ok := false
		must(t, s.View(ctx, func(tx *store.Tx) (err error) { ok, err = items.Has(tx, "t"); return }))
		if !ok {
			t.Fatal("fresh TTL entry missing")
		}
		deadline := time.Now().Add(5 * time.Second)
		for ok && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			must(t, s.View(ctx, func(tx *store.Tx) (err error) { ok, err = items.Has(tx, "t"); return }))
		}
		if ok {
			t.Fatal("TTL entry did not expire")
		}
	})
	t.Run("reopen-keeps-data", func(t *testing.T) {
		dir := t.TempDir()
		s := open(t, dir)
		must(t, s.Update(ctx, func(tx *store.Tx) error { return items.Put(tx, "kept", item{"K", 7}) }))
		must(t, s.Close())
		if err := s.Update(ctx, func(tx *store.Tx) error { return nil }); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("update after close: %v, want ErrClosed", err)
		}
		s2 := open(t, dir)
		defer s2.Close()
		var got item
		must(t, s2.View(ctx, func(tx *store.Tx) (err error) { got, err = items.Get(tx, "kept"); return }))
		if got != (item{"K", 7}) {
			t.Fatalf("after reopen: %+v", got)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

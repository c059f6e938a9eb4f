// Package storetest is the conformance suite every store driver must pass: CRUD, ordered prefix
// listing (forward, reverse, paged), transactions (atomic commit, rollback on error, read-only
// views), conflict retry under concurrent writers, TTL expiry, notifications sent only on
// commit, and data kept across a reopen. RunShared adds what a driver shared by several
// processes must do: notifications and conflicts between two Stores over one database, and
// exclusive leases.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	t.Run("keys-order-bytewise", func(t *testing.T) {
		s := open(t, t.TempDir())
		defer s.Close()
		ids := []string{"a\xff", "a", "a\x00", "b", "a/z", "A", "a\x7f", "\xc3\xa9"}
		must(t, s.Update(ctx, func(tx *store.Tx) error {
			for _, id := range ids {
				if err := tx.SetRaw("k/"+id, []byte(id), 0); err != nil {
					return err
				}
			}
			return nil
		}))
		want := []string{"A", "a", "a\x00", "a/z", "a\x7f", "a\xff", "b", "\xc3\xa9"}
		var got []string
		must(t, s.View(ctx, func(tx *store.Tx) error {
			return tx.ScanRaw("k/", store.ScanOptions{}, func(k string, v []byte) error {
				got = append(got, string(v))
				return nil
			})
		}))
		if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
			t.Fatalf("order: got %q, want %q", got, want)
		}
		got = nil
		must(t, s.View(ctx, func(tx *store.Tx) error {
			return tx.ScanRaw("k/a", store.ScanOptions{Reverse: true}, func(k string, v []byte) error {
				got = append(got, string(v))
				return nil
			})
		}))
		if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", []string{"a\xff", "a\x7f", "a/z", "a\x00", "a"}) {
			t.Fatalf("reverse prefix a: got %q", got)
		}
	})
	t.Run("scan-pages-and-reads-inside", func(t *testing.T) {
		s := open(t, t.TempDir())
		defer s.Close()
		const n = 700 // more than a driver's page
		must(t, s.Update(ctx, func(tx *store.Tx) error {
			for i := 0; i < n; i++ {
				if err := items.Put(tx, fmt.Sprintf("p/%04d", i), item{Count: i}); err != nil {
					return err
				}
			}
			return nil
		}))
		for _, rev := range []bool{false, true} {
			seen, last := 0, -1
			must(t, s.View(ctx, func(tx *store.Tx) error {
				return items.Each(tx, "p/", store.ScanOptions{Reverse: rev}, func(id string, v item) error {
					// A read inside a scan must work (callers look up related keys).
					if _, err := items.Get(tx, id); err != nil {
						return err
					}
					if last >= 0 && (!rev && v.Count != last+1 || rev && v.Count != last-1) {
						return fmt.Errorf("out of order at %s after %d", id, last)
					}
					last = v.Count
					seen++
					return nil
				})
			}))
			if seen != n {
				t.Fatalf("reverse=%v: saw %d of %d", rev, seen, n)
			}
		}
		var got []store.Entry[item]
		must(t, s.View(ctx, func(tx *store.Tx) (err error) {
			got, err = items.List(tx, "p/", store.ScanOptions{After: []byte("p/0299"), Limit: 300})
			return
		}))
		if len(got) != 300 || got[0].ID != "p/0300" || got[299].ID != "p/0599" {
			t.Fatalf("paged list: %d entries, first %v", len(got), got[0].ID)
		}
		stopped := 0
		must(t, s.View(ctx, func(tx *store.Tx) error {
			return items.Each(tx, "p/", store.ScanOptions{}, func(string, item) error {
				stopped++
				if stopped == 3 {
					return store.ErrStop
				}
				return nil
			})
		}))
		if stopped != 3 {
			t.Fatalf("ErrStop: %d calls", stopped)
		}
	})
	t.Run("ttl-overwrite-and-scan", func(t *testing.T) {
		s := open(t, t.TempDir())
		defer s.Close()
		must(t, s.Update(ctx, func(tx *store.Tx) error {
			if err := items.PutTTL(tx, "short", item{}, 500*time.Millisecond); err != nil {
				return err
			}
			if err := items.PutTTL(tx, "kept", item{}, 500*time.Millisecond); err != nil {
				return err
			}
			return items.Put(tx, "kept", item{Name: "no ttl now"}) // an overwrite drops the TTL
		}))
		time.Sleep(1500 * time.Millisecond)
		var ids []string
		must(t, s.View(ctx, func(tx *store.Tx) error {
			es, err := items.List(tx, "", store.ScanOptions{})
			for _, e := range es {
				ids = append(ids, e.ID)
			}
			return err
		}))
		if fmt.Sprint(ids) != "[kept]" {
			t.Fatalf("after expiry a scan sees %v, want [kept]", ids)
		}
	})
	t.Run("serial-update", func(t *testing.T) {
		s := open(t, t.TempDir())
		defer s.Close()
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 10; i++ {
					err := s.UpdateSerial(ctx, "n", func(tx *store.Tx) error {
						v, err := items.Get(tx, "n")
						if err != nil && !errors.Is(err, store.ErrNotFound) {
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
			t.Fatal(err)
		}
		var got item
		must(t, s.View(ctx, func(tx *store.Tx) (err error) { got, err = items.Get(tx, "n"); return }))
		if got.Count != 40 {
			t.Fatalf("serial updates: %d, want 40", got.Count)
		}
	})
	t.Run("notify-on-commit-only", func(t *testing.T) {
		s := open(t, t.TempDir())
		defer s.Close()
		got := make(chan store.Note, 16)
		stop := s.Listen("things", func(n store.Note) {
			if !n.Lost {
				got <- n
			}
		})
		defer stop()
		time.Sleep(100 * time.Millisecond) // a shared driver's listener connects
		boom := errors.New("boom")
		err := s.Update(ctx, func(tx *store.Tx) error {
			if err := tx.Notify("things", "rolled-back"); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatal(err)
		}
		must(t, s.Update(ctx, func(tx *store.Tx) error {
			if err := tx.Notify("other", "x"); err != nil {
				return err
			}
			return tx.Notify("things", "committed")
		}))
		select {
		case n := <-got:
			if n.Topic != "things" || n.Payload != "committed" {
				t.Fatalf("got %+v", n)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no notification after the commit")
		}
		select {
		case n := <-got:
			t.Fatalf("unexpected second notification %+v", n)
		case <-time.After(200 * time.Millisecond):
		}
		if err := s.View(ctx, func(tx *store.Tx) error { return tx.Notify("things", "x") }); err == nil {
			t.Fatal("notify in a view succeeded")
		}
		if ok, err := s.Lead(ctx, "chore", time.Second); err != nil || !ok {
			t.Fatalf("a lone store must lead: %v %v", ok, err)
		}
	})
	t.Run("lazy-update", func(t *testing.T) {
		dir := t.TempDir()
		s := open(t, dir)
		must(t, s.UpdateLazy(ctx, func(tx *store.Tx) error { return items.Put(tx, "lazy", item{"L", 1}) }))
		var got item
		must(t, s.View(ctx, func(tx *store.Tx) (err error) { got, err = items.Get(tx, "lazy"); return }))
		if got != (item{"L", 1}) {
			t.Fatalf("a lazy commit is not visible at once: %+v", got)
		}
		// Atomic as any other: a callback's error commits nothing.
		boom := errors.New("boom")
		if err := s.UpdateLazy(ctx, func(tx *store.Tx) error {
			if err := items.Put(tx, "half", item{"H", 1}); err != nil {
				return err
			}
			return boom
		}); !errors.Is(err, boom) {
			t.Fatalf("lazy update: %v, want the callback's error", err)
		}
		if err := s.View(ctx, func(tx *store.Tx) error { _, err := items.Get(tx, "half"); return err }); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a failed lazy update left a write behind: %v", err)
		}
		must(t, s.Close())
		if err := s.UpdateLazy(ctx, func(tx *store.Tx) error { return nil }); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("lazy update after close: %v, want ErrClosed", err)
		}
		s2 := open(t, dir)
		defer s2.Close()
		must(t, s2.View(ctx, func(tx *store.Tx) (err error) { got, err = items.Get(tx, "lazy"); return }))
		if got != (item{"L", 1}) {
			t.Fatalf("a lazy commit is lost by a clean close: %+v", got)
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

// PairOpener opens two Stores over one fresh database, as two processes would.
type PairOpener func(t *testing.T) (a, b *store.Store)

// RunShared runs the suite of drivers shared by several processes.
func RunShared(t *testing.T, open PairOpener) {
	ctx := context.Background()
	t.Run("shared-flag", func(t *testing.T) {
		a, b := open(t)
		defer a.Close()
		defer b.Close()
		if !a.Shared() || !b.Shared() {
			t.Fatal("a shared driver's store must report Shared")
		}
		if a.Instance() == b.Instance() || a.Instance() == "" {
			t.Fatalf("instances %q and %q", a.Instance(), b.Instance())
		}
	})
	t.Run("notify-reaches-the-other-process", func(t *testing.T) {
		a, b := open(t)
		defer a.Close()
		defer b.Close()
		got := make(chan store.Note, 16)
		stop := b.Listen("t", func(n store.Note) {
			if !n.Lost {
				got <- n
			}
		})
		defer stop()
		time.Sleep(200 * time.Millisecond)
		must(t, a.Update(ctx, func(tx *store.Tx) error { return tx.Notify("t", "from a") }))
		select {
		case n := <-got:
			if n.Payload != "from a" {
				t.Fatalf("got %+v", n)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("b did not hear a's notification")
		}
	})
	t.Run("conflicts-between-processes", func(t *testing.T) {
		a, b := open(t)
		defer a.Close()
		defer b.Close()
		must(t, a.Update(ctx, func(tx *store.Tx) error { return items.Put(tx, "n", item{}) }))
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := 0; w < 8; w++ {
			s := a
			if w%2 == 1 {
				s = b
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					if err := s.Update(ctx, func(tx *store.Tx) error {
						v, err := items.Get(tx, "n")
						if err != nil {
							return err
						}
						v.Count++
						return items.Put(tx, "n", v)
					}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		var got item
		must(t, b.View(ctx, func(tx *store.Tx) (err error) { got, err = items.Get(tx, "n"); return }))
		if got.Count != 160 {
			t.Fatalf("lost updates across processes: %d, want 160", got.Count)
		}
	})
	t.Run("insert-race-one-wins", func(t *testing.T) {
		a, b := open(t)
		defer a.Close()
		defer b.Close()
		for round := 0; round < 5; round++ {
			id := fmt.Sprintf("once-%d", round)
			var wg sync.WaitGroup
			res := make(chan error, 2)
			for _, s := range []*store.Store{a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res <- s.Update(ctx, func(tx *store.Tx) error { return items.Insert(tx, id, item{}) })
				}()
			}
			wg.Wait()
			close(res)
			won := 0
			for err := range res {
				if err == nil {
					won++
				} else if !errors.Is(err, store.ErrConflict) {
					t.Fatal(err)
				}
			}
			if won != 1 {
				t.Fatalf("round %d: %d inserts of one id succeeded", round, won)
			}
		}
	})
	t.Run("serial-updates-across-processes", func(t *testing.T) {
		a, b := open(t)
		defer a.Close()
		defer b.Close()
		must(t, a.Update(ctx, func(tx *store.Tx) error { return items.Put(tx, "q", item{}) }))
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := 0; w < 8; w++ {
			s := a
			if w%2 == 1 {
				s = b
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					if err := s.UpdateSerial(ctx, "q", func(tx *store.Tx) error {
						v, err := items.Get(tx, "q")
						if err != nil {
							return err
						}
						v.Count++
						return items.Put(tx, "q", v)
					}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		var got item
		must(t, b.View(ctx, func(tx *store.Tx) (err error) { got, err = items.Get(tx, "q"); return }))
		if got.Count != 160 {
			t.Fatalf("serial updates lost %d of 160", 160-got.Count)
		}
		// A callback's error rolls back and releases the lock for the next one.
		boom := errors.New("boom")
		if err := a.UpdateSerial(ctx, "q", func(tx *store.Tx) error { return boom }); !errors.Is(err, boom) {
			t.Fatal(err)
		}
		must(t, b.UpdateSerial(ctx, "q", func(tx *store.Tx) error { return nil }))
		// A waiter whose context ends gives up, in the holder's process and in the other one,
		// and leaves the lock usable once the holder is done.
		held, release := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- a.UpdateSerial(ctx, "q", func(tx *store.Tx) error {
				close(held)
				<-release
				return nil
			})
		}()
		<-held
		for _, s := range []*store.Store{a, b} {
			wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			err := s.UpdateSerial(wctx, "q", func(tx *store.Tx) error { return errors.New("ran while the lock was held") })
			cancel()
			if err == nil || !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "cancel") {
				t.Fatalf("a waiter past its deadline: %v", err)
			}
		}
		close(release)
		must(t, <-done)
		for _, s := range []*store.Store{a, b} {
			must(t, s.UpdateSerial(ctx, "q", func(tx *store.Tx) error { return nil }))
		}
	})
	t.Run("lease-is-exclusive", func(t *testing.T) {
		a, b := open(t)
		defer b.Close()
		ok, err := a.Lead(ctx, "chore", 2*time.Second)
		if err != nil || !ok {
			t.Fatalf("a: %v %v", ok, err)
		}
		if ok, err := b.Lead(ctx, "chore", 2*time.Second); err != nil || ok {
			t.Fatalf("b took a held lease: %v %v", ok, err)
		}
		if ok, err := a.Lead(ctx, "chore", 2*time.Second); err != nil || !ok {
			t.Fatalf("a could not renew: %v %v", ok, err)
		}
		if ok, err := b.Lead(ctx, "other", time.Second); err != nil || !ok {
			t.Fatalf("b: another lease: %v %v", ok, err)
		}
		must(t, a.Close()) // gives the lease up
		if ok, err := b.Lead(ctx, "chore", 2*time.Second); err != nil || !ok {
			t.Fatalf("b after a closed: %v %v", ok, err)
		}
		// An expired lease passes to whoever asks.
		c, d := open(t)
		defer c.Close()
		defer d.Close()
		if ok, _ := c.Lead(ctx, "short", 300*time.Millisecond); !ok {
			t.Fatal("c")
		}
		time.Sleep(600 * time.Millisecond)
		if ok, err := d.Lead(ctx, "short", time.Second); err != nil || !ok {
			t.Fatalf("d after expiry: %v %v", ok, err)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

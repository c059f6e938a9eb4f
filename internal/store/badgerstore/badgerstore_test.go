package badgerstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, dir string) *store.Store {
		s, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: dir, GCInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestLazyUpdateSurvivesKill: a lazy commit survives SIGKILL of the process that made it (the
// logs are shared mappings the kernel keeps), and so does a durable one; the next process that
// opens the directory reads both.
func TestLazyUpdateSurvivesKill(t *testing.T) {
	ctx := context.Background()
	if dir := os.Getenv("BADGERSTORE_KILL_DIR"); dir != "" {
		s, err := badgerstore.Open(ctx, badgerstore.Options{Dir: dir, GCInterval: -1})
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(3)
		}
		if err := s.Update(ctx, func(tx *store.Tx) error { return tx.SetRaw("k/durable", []byte("d"), 0) }); err != nil {
			os.Exit(4)
		}
		for i := range 100 {
			if err := s.UpdateLazy(ctx, func(tx *store.Tx) error {
				return tx.SetRaw(fmt.Sprintf("k/lazy-%03d", i), []byte("l"), 0)
			}); err != nil {
				os.Exit(5)
			}
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestLazyUpdateSurvivesKill$")
	cmd.Env = append(os.Environ(), "BADGERSTORE_KILL_DIR="+dir)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the writer was not killed: %v\n%s", err, out)
	}
	s, err := badgerstore.Open(ctx, badgerstore.Options{Dir: dir, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	if err := s.View(ctx, func(tx *store.Tx) error {
		return tx.ScanRaw("k/", store.ScanOptions{}, func(string, []byte) error { n++; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	if n != 101 {
		t.Fatalf("%d of 101 commits survived the kill", n)
	}
}

// TestCloseWhileTransactionsRun: Close while other goroutines scan and write (the hint queue's
// lease sweep, a gate's record) never makes Badger panic ("DB Closed", which a check of
// IsClosed before the transaction let through in CI): each transaction either runs whole or
// gets store.ErrClosed, and Close waits for the ones already running.
func TestCloseWhileTransactionsRun(t *testing.T) {
	ctx := context.Background()
	for round := range 20 {
		s, err := badgerstore.Open(ctx, badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Update(ctx, func(tx *store.Tx) error {
			for i := range 50 {
				if err := tx.SetRaw(fmt.Sprintf("k/%03d", i), []byte("v"), 0); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 64)
		done := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ; n++ {
					var err error
					switch w % 2 {
					case 0:
						err = s.View(ctx, func(tx *store.Tx) error {
							return tx.ScanRaw("k/", store.ScanOptions{}, func(string, []byte) error { return nil })
						})
					default:
						err = s.UpdateLazy(ctx, func(tx *store.Tx) error {
							return tx.SetRaw(fmt.Sprintf("w/%d-%d", w, n), []byte("v"), 0)
						})
					}
					if err != nil {
						errs <- err
						return
					}
					select {
					case <-done:
						return
					default:
					}
				}
			}()
		}
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		if err := s.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		close(done)
		wg.Wait()
		close(errs)
		for err := range errs {
			if !errors.Is(err, store.ErrClosed) {
				t.Fatalf("round %d: a transaction racing Close got %v, want store.ErrClosed", round, err)
			}
		}
	}
}

// TestCloseWaitsForTheRunningTransaction: Close begun while a transaction runs waits for it;
// a transaction begun inside it meanwhile gets store.ErrClosed instead of hanging behind the
// waiting Close.
func TestCloseWaitsForTheRunningTransaction(t *testing.T) {
	ctx := context.Background()
	s, err := badgerstore.Open(ctx, badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	var nested error
	err = s.View(ctx, func(tx *store.Tx) error {
		go func() { closed <- s.Close() }()
		select {
		case err := <-closed:
			t.Errorf("Close returned (%v) while a transaction was running", err)
		case <-time.After(200 * time.Millisecond):
		}
		nested = s.View(ctx, func(*store.Tx) error { return nil })
		_, err := tx.GetRaw("missing")
		if !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("the running transaction's read after Close began: %w", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(nested, store.ErrClosed) {
		t.Fatalf("a transaction begun while Close waited: %v, want store.ErrClosed", nested)
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return after the transaction ended")
	}
	if err := s.Update(ctx, func(tx *store.Tx) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Update after Close: %v, want store.ErrClosed", err)
	}
}

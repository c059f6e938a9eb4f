package wasm

import (
	"context"
	"errors"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// waitProcs waits until GOMAXPROCS is want, or fails after within.
func waitProcs(t *testing.T, want int, within time.Duration, why string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for goruntime.GOMAXPROCS(0) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: GOMAXPROCS %d after %s, want %d", why, goruntime.GOMAXPROCS(0), within, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitNoBackground waits until no background slot is held (the work of earlier tests).
func waitNoBackground(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for bgHeld.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d background slots still held", bgHeld.Load())
		}
		time.Sleep(time.Millisecond)
	}
}

func TestGovernProcs(t *testing.T) {
	ctx := context.Background()
	defer func(d time.Duration) { widenAfter = d }(widenAfter)
	widenAfter = time.Second
	e, err := newEnv(ctx, t.TempDir(), Config{CacheDir: testutil.WasmCacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	e.push(t, "testdata/fault-loop", "fault-loop")
	e.push(t, "testdata/echo", "echo")
	if err := e.x.Warm(ctx, "fault-loop"); err != nil {
		t.Fatal(err)
	}
	waitNoBackground(t)

	narrow := goruntime.GOMAXPROCS(0)
	gctx, cancel := context.WithCancel(ctx)
	done := GovernProcs(gctx, 2*narrow)
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	defer stop()
	if got := goruntime.GOMAXPROCS(0); got != 2*narrow {
		t.Fatalf("no background code: GOMAXPROCS %d, want %d", got, 2*narrow)
	}
	if second := GovernProcs(gctx, 3*narrow); !isClosed(second) || goruntime.GOMAXPROCS(0) != 2*narrow {
		t.Fatalf("a second governor took over: GOMAXPROCS %d", goruntime.GOMAXPROCS(0))
	}

	t.Run("healthy runs keep the wide count", func(t *testing.T) {
		for range 20 {
			if _, err := e.run(t, runtime.Request{Ref: "echo", Target: "hi"}); err != nil {
				t.Fatal(err)
			}
			if got := goruntime.GOMAXPROCS(0); got != 2*narrow {
				t.Fatalf("after a healthy run: GOMAXPROCS %d, want %d", got, 2*narrow)
			}
		}
	})

	t.Run("a spinning guest narrows them while it runs", func(t *testing.T) {
		spun := make(chan error, 1)
		go func() {
			_, err := e.run(t, runtime.Request{Ref: "fault-loop", Timeout: time.Second, Vars: map[string]string{abi.VarSessionID: "spinner"}})
			spun <- err
		}()
		// Demoted after demoteAfter (20 ms) of guest code, the run holds a background slot.
		waitProcs(t, narrow, 900*time.Millisecond, "while a guest spins in the background class")
		if err := <-spun; !errors.Is(err, runtime.ErrTimeout) {
			t.Fatalf("the spinner: %v", err)
		}
		// The module faulted: its pool's refills run in the background too; once they are done,
		// the count widens again after widenAfter, not before (a late look here only makes the
		// measured wait shorter than it was, never longer).
		waitNoBackground(t)
		quietSince := time.Now()
		waitProcs(t, 2*narrow, 5*time.Second, "after the background work ended")
		if d := time.Since(quietSince); d < widenAfter/2 {
			t.Fatalf("widened %s after the background work ended, want about %s", d, widenAfter)
		}
	})

	t.Run("stopping gives the count back", func(t *testing.T) {
		stop()
		if got := goruntime.GOMAXPROCS(0); got != narrow {
			t.Fatalf("after the governor stopped: GOMAXPROCS %d, want %d", got, narrow)
		}
	})
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// A server governs its processors for as long as it serves.
func ExampleGovernProcs() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := GovernProcs(ctx, 2*goruntime.GOMAXPROCS(0))
	serveUntilDone(ctx)
	stop()
	<-done // the processors are back to what they were
}

func serveUntilDone(context.Context) {}

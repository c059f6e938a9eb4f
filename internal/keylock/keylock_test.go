package keylock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestMutex(t *testing.T) {
	t.Run("one holder per key", func(t *testing.T) {
		var k Mutex
		var (
			mu      sync.Mutex
			inside  = map[string]int{}
			highest = map[string]int{}
			wg      sync.WaitGroup
		)
		for i := 0; i < 40; i++ {
			key := fmt.Sprint("k", i%3)
			wg.Add(1)
			go func() {
				defer wg.Done()
				unlock, err := k.Lock(context.Background(), key)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				inside[key]++
				highest[key] = max(highest[key], inside[key])
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				inside[key]--
				mu.Unlock()
				unlock()
			}()
		}
		wg.Wait()
		for key, n := range highest {
			if n != 1 {
				t.Errorf("key %s had %d holders at once", key, n)
			}
		}
		if len(k.held) != 0 {
			t.Errorf("released keys are still held: %v", k.held)
		}
	})
	t.Run("other keys do not wait", func(t *testing.T) {
		var k Mutex
		unlock, _ := k.Lock(context.Background(), "a")
		defer unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		unlockB, err := k.Lock(ctx, "b")
		if err != nil {
			t.Fatalf("key b waited for key a: %v", err)
		}
		unlockB()
	})
	t.Run("a waiter gives up when its context ends", func(t *testing.T) {
		var k Mutex
		unlock, _ := k.Lock(context.Background(), "a")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if _, err := k.Lock(ctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want the context's", err)
		}
		unlock()
		again, err := k.Lock(context.Background(), "a")
		if err != nil {
			t.Fatalf("after the release: %v", err)
		}
		again()
	})
	t.Run("the next waiter gets the key on release", func(t *testing.T) {
		var k Mutex
		unlock, _ := k.Lock(context.Background(), "a")
		got := make(chan error, 1)
		go func() {
			u, err := k.Lock(context.Background(), "a")
			if err == nil {
				u()
			}
			got <- err
		}()
		select {
		case err := <-got:
			t.Fatalf("the waiter did not wait (err %v)", err)
		case <-time.After(20 * time.Millisecond):
		}
		unlock()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	})
}

func ExampleMutex() {
	var sessions Mutex
	unlock, err := sessions.Lock(context.Background(), "session-1")
	if err != nil {
		return // the context ended while an earlier holder kept the key
	}
	defer unlock()
	fmt.Println("session-1 is ours")
	// Output: session-1 is ours
}

package later

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
)

func TestLater(t *testing.T) {
	tests := []struct {
		name string
		run  func(log func(string) func()) []string // what ran by the end of the step
		want []string
	}{
		{"without Defer, at once", func(log func(string) func()) []string {
			Do(context.Background(), log("a"))
			return nil
		}, []string{"a"}},
		{"held until the answer, in order", func(log func(string) func()) []string {
			ctx, sent := Defer(context.Background())
			Do(ctx, log("a"))
			Do(ctx, log("b"))
			log("answer")()
			sent()
			return nil
		}, []string{"answer", "a", "b"}},
		{"after the answer, at once", func(log func(string) func()) []string {
			ctx, sent := Defer(context.Background())
			sent()
			Do(ctx, log("a"))
			log("after")()
			return nil
		}, []string{"a", "after"}},
		{"a second end runs nothing again", func(log func(string) func()) []string {
			ctx, sent := Defer(context.Background())
			Do(ctx, log("a"))
			sent()
			sent()
			return nil
		}, []string{"a"}},
		{"a derived context holds too", func(log func(string) func()) []string {
			ctx, sent := Defer(context.Background())
			child, cancel := context.WithCancel(ctx)
			defer cancel()
			Do(child, log("a"))
			log("answer")()
			sent()
			return nil
		}, []string{"answer", "a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var ran []string
			log := func(s string) func() {
				return func() { mu.Lock(); ran = append(ran, s); mu.Unlock() }
			}
			tc.run(log)
			if !slices.Equal(ran, tc.want) {
				t.Fatalf("ran %v, want %v", ran, tc.want)
			}
		})
	}
}

// Work set off from many goroutines under one Defer all runs, exactly once.
func TestLaterConcurrent(t *testing.T) {
	ctx, sent := Defer(context.Background())
	var mu sync.Mutex
	n := 0
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			Do(ctx, func() { mu.Lock(); n++; mu.Unlock() })
		}()
	}
	wg.Add(1)
	go func() { defer wg.Done(); sent() }()
	wg.Wait()
	if n != 50 {
		t.Fatalf("%d of 50 ran", n)
	}
}

func Example() {
	ctx, sent := Defer(context.Background())
	defer sent()
	Do(ctx, func() { fmt.Println("the worker starts") })
	fmt.Println("the answer is sent")
	sent()
	// Output:
	// the answer is sent
	// the worker starts
}

// The Queue handed down as a field holds as the context's does; a nil Queue holds nothing.
func TestQueue(t *testing.T) {
	tests := []struct {
		name string
		run  func(log func(string) func())
		want []string
	}{
		{"a nil queue, at once", func(log func(string) func()) {
			var q *Queue
			q.Do(log("a"))
			log("answer")()
		}, []string{"a", "answer"}},
		{"held until released, in order", func(log func(string) func()) {
			q := &Queue{}
			q.Do(log("a"))
			q.Do(log("b"))
			log("answer")()
			q.Release()
		}, []string{"answer", "a", "b"}},
		{"after release, at once", func(log func(string) func()) {
			q := &Queue{}
			q.Release()
			q.Do(log("a"))
			log("after")()
		}, []string{"a", "after"}},
		{"one queue, by field and by context", func(log func(string) func()) {
			q := &Queue{}
			ctx := With(context.Background(), q)
			q.Do(log("a"))
			Do(ctx, log("b"))
			log("answer")()
			q.Release()
			q.Release()
		}, []string{"answer", "a", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ran []string
			tc.run(func(s string) func() { return func() { ran = append(ran, s) } })
			if !slices.Equal(ran, tc.want) {
				t.Fatalf("ran %v, want %v", ran, tc.want)
			}
		})
	}
}

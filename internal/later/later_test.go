package later

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/pixie-dev/pixie/runtime"
)

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
		{"a second release runs nothing again", func(log func(string) func()) {
			q := &Queue{}
			q.Do(log("a"))
			q.Release()
			q.Release()
		}, []string{"a"}},
		// Across runtime.Executor.Run the Queue travels as runtime.Request.After.
		{"as runtime.Request.After, held", func(log func(string) func()) {
			q := &Queue{}
			req := runtime.Request{After: q}
			runtime.Defer(req.After, log("a"))
			log("answer")()
			q.Release()
		}, []string{"answer", "a"}},
		{"no runtime.Request.After, at once", func(log func(string) func()) {
			runtime.Defer(runtime.Request{}.After, log("a"))
			log("answer")()
		}, []string{"a", "answer"}},
		{"a nil queue as runtime.Request.After, at once", func(log func(string) func()) {
			var q *Queue
			runtime.Defer(runtime.Request{After: q}.After, log("a"))
			log("answer")()
		}, []string{"a", "answer"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var ran []string
			tc.run(func(s string) func() { return func() { mu.Lock(); ran = append(ran, s); mu.Unlock() } })
			if !slices.Equal(ran, tc.want) {
				t.Fatalf("ran %v, want %v", ran, tc.want)
			}
		})
	}
}

// Work set off from many goroutines under one Queue all runs, exactly once.
func TestQueueConcurrent(t *testing.T) {
	q := &Queue{}
	var mu sync.Mutex
	n := 0
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q.Do(func() { mu.Lock(); n++; mu.Unlock() })
		}()
	}
	wg.Add(1)
	go func() { defer wg.Done(); q.Release() }()
	wg.Wait()
	if n != 50 {
		t.Fatalf("%d of 50 ran", n)
	}
}

func Example() {
	q := &Queue{}
	defer q.Release()
	q.Do(func() { fmt.Println("the worker starts") })
	fmt.Println("the answer is sent")
	q.Release()
	// Output:
	// the answer is sent
	// the worker starts
}

package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestApplyMemoryLimit: server.memoryLimit becomes the Go runtime's soft limit; 0 leaves none;
// GOMEMLIMIT, when set, wins.
func TestApplyMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	for _, c := range []struct {
		name  string
		env   string
		limit int64
		want  int64
	}{
		{"set", "", 256 << 20, 256 << 20},
		{"none", "", 0, math.MaxInt64},
		{"GOMEMLIMIT wins", "1GiB", 256 << 20, math.MaxInt64},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", c.env)
			debug.SetMemoryLimit(math.MaxInt64)
			applyMemoryLimit(c.limit)
			if got := debug.SetMemoryLimit(-1); got != c.want {
				t.Fatalf("limit %d, want %d", got, c.want)
			}
		})
	}
}

package main

import (
	"context"
	goruntime "runtime"
	"testing"
)

func TestSetServeProcs(t *testing.T) {
	base := goruntime.GOMAXPROCS(0)
	tests := []struct {
		name, env string
		want      int
	}{
		{"unset: two processors per CPU", "", serveProcsPerCPU * base},
		{"set in the environment: left as it is", "1", base},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(func() { cancel(); goruntime.GOMAXPROCS(base) })
			t.Setenv("GOMAXPROCS", tc.env)
			if got := setServeProcs(ctx); got != tc.want || goruntime.GOMAXPROCS(0) != tc.want {
				t.Fatalf("setServeProcs() = %d, GOMAXPROCS %d, want %d", got, goruntime.GOMAXPROCS(0), tc.want)
			}
		})
	}
}

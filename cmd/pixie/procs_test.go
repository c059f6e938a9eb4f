package main

import (
	"github.com/pixie-dev/pixie/runtime/wasm"
	goruntime "runtime"
	"testing"
)

func TestSetServeProcs(t *testing.T) {
	base := goruntime.GOMAXPROCS(0)
	tests := []struct {
		name, env string
		want      int
	}{
		{"unset: two processors per CPU where background code can be lowered", "", map[bool]int{true: serveProcsPerCPU * base, false: base}[wasm.CanLowerBackground()]},
		{"set in the environment: left as it is", "1", base},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(func() { goruntime.GOMAXPROCS(base) })
			t.Setenv("GOMAXPROCS", tc.env)
			if got := setServeProcs(); got != tc.want || goruntime.GOMAXPROCS(0) != tc.want {
				t.Fatalf("setServeProcs() = %d, GOMAXPROCS %d, want %d", got, goruntime.GOMAXPROCS(0), tc.want)
			}
		})
	}
}

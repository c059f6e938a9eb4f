package main

import (
	"github.com/pixie-dev/pixie/runtime/wasm"
	"os"
	goruntime "runtime"
)

// serveProcsPerCPU is how many Go processors (GOMAXPROCS) `pixie serve` runs per CPU Go gives
// it by default (the CPUs it may use, cgroup limits included).
//
// Why more processors than CPUs: a server shares its CPUs with its clients (the agent hosts on
// the same machine). When the OS preempts a thread while it runs a Go processor, the goroutines
// queued on that processor wait until the thread runs again or another processor runs out of
// work and steals them; with one processor per CPU and clients waking on every answer, that
// was about one stall per request at 8 connections on 2 cores, and it set the WASM gate's p99
// there (9.3–12.5 ms). With two per CPU the other processors keep serving: p99 5.5–6.8 ms,
// and more requests per second, for ~0.04 ms more at the median of one connection (make bench,
// docs/runtime.md). The number of guest runs at once is still the number of CPUs
// (wasm.maxConcurrent).
const serveProcsPerCPU = 2

// setServeProcs applies serveProcsPerCPU unless GOMAXPROCS is set in the environment, and
// returns the processors the server runs.
func setServeProcs() int {
	if os.Getenv("GOMAXPROCS") != "" || !wasm.CanLowerBackground() {
		// Without idle-class threads for background guest code (wasm.IdleThreadsEnv), more
		// processors than CPUs let a storm of faulting guests take the CPUs from healthy gates
		// (docs/runtime.md).
		return goruntime.GOMAXPROCS(0)
	}
	n := serveProcsPerCPU * goruntime.GOMAXPROCS(0)
	goruntime.GOMAXPROCS(n)
	return n
}

package main

import (
	"context"
	"os"
	goruntime "runtime"

	"github.com/pixie-dev/pixie/runtime/wasm"
)

// serveProcsPerCPU is how many Go processors (GOMAXPROCS) `pixie serve` runs per CPU Go gives
// it by default (the CPUs it may use, cgroup limits included), while no background guest code
// runs.
//
// Why more processors than CPUs: a server shares its CPUs with its clients (the agent hosts on
// the same machine). When the OS preempts a thread while it runs a Go processor, the goroutines
// queued on that processor wait until the thread runs again or another processor runs out of
// work and steals them; with one processor per CPU and clients waking on every answer, that
// was about one stall per request at 8 connections on 2 cores, and it set the WASM gate's p99
// there (9.3–14.8 ms). With two per CPU the other processors keep serving (make bench,
// docs/runtime.md). The number of guest runs at once is still the number of CPUs
// (wasm.maxConcurrent).
//
// Why only while no background guest code runs: with more processors than CPUs, the OS shares
// the CPUs, in slices of milliseconds, and a faulting guest's run kept a CPU from healthy gates
// for its whole slice. So, unless its threads are of the OS's idle class
// (wasm.IdleThreadsEnv), the server narrows to one processor per CPU while any background run
// holds a slot (wasm.GovernProcs).
const serveProcsPerCPU = 2

// setServeProcs applies serveProcsPerCPU unless GOMAXPROCS is set in the environment, and
// returns the processors the server runs while no background guest code runs; the processors
// follow background code until ctx is done (wasm.GovernProcs), unless that code runs on
// idle-class threads.
func setServeProcs(ctx context.Context) int {
	if os.Getenv("GOMAXPROCS") != "" {
		return goruntime.GOMAXPROCS(0)
	}
	n := serveProcsPerCPU * goruntime.GOMAXPROCS(0)
	if wasm.CanLowerBackground() {
		goruntime.GOMAXPROCS(n)
		return n
	}
	wasm.GovernProcs(ctx, n)
	return n
}

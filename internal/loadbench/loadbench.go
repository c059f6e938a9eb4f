// Package loadbench is make bench's sustained-load run: rows of requests sent back to back on
// kept-alive connections (1 and 8 by default, at least 10 s each) to real servers the bench
// starts (`pixie serve` from bin/pixie in homes of its own, OPA's `opa run --server`), with
// every latency recorded, the rows interleaved in one process, and a table of req/s, p50, p99,
// the ratios between rows (WASM/OPA, storm/quiet) and the targets beside them (printed, never
// asserted). Nothing is paused or excluded from the clock: no pool refills, no warm-up between
// requests; what a row checks before it is measured (each gate decides the twin table, the Rego
// twin too) runs before its clock starts.
//
// The driver (Conn, measure) is a load generator in Go, as wrk is one in C: each connection is
// one goroutine that writes its request, already rendered, and reads the answer itself. It
// runs on the same machine as the servers and shares its CPUs with them; make bench prints a
// cross-check against wrk on /healthz (when wrk is installed) and can pin the servers and the
// driver to separate CPUs (-server-cpus, -driver-cpus).
//
// A row is a Row: a name, its connection counts, and a Prepare that starts or reuses its
// servers through the Env (Shared, MainPixie, StartPixie, StartOPA) and returns the Plan its
// connections repeat. Rows lists the table; GateRow makes a gate row on the shared server.
package loadbench

//go:build race

package wasm

// raceEnabled: the race detector slows the Go side of a run (the check, the garbage
// collector) several times; timing bounds in tests are widened under it.
const raceEnabled = true

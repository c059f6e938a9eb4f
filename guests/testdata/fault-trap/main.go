//go:build wasip1

// Command fault-trap panics outside sdk.Run, so the Go runtime aborts the guest.
package main

func main() {}

var m map[string]int

//go:wasmexport gate
func gate() int32 {
	m["boom"] = 1 // assignment to a nil map
	return 0
}

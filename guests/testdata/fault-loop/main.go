//go:build wasip1

// Command fault-loop spins forever.
package main

func main() {}

var n uint64

//go:wasmexport gate
func gate() int32 {
	for {
		n++
	}
}

//go:build wasip1

// Command fault-membomb allocates until memory runs out.
package main

func main() {}

var keep [][]byte

//go:wasmexport gate
func gate() int32 {
	for {
		b := make([]byte, 1<<20)
		for i := range b {
			b[i] = byte(i)
		}
		keep = append(keep, b)
	}
}

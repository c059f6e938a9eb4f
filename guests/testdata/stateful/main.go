//go:build wasip1

// Command stateful is an isolation probe: every run reports what it finds left by earlier
// runs on its instance — a package variable, a Go map, bytes on the heap, a file it left open
// (on the session's /work mount), an Extism variable — then leaves all of them set. A run
// that starts from the pristine state finds none of them.
package main

import (
	"os"

	"github.com/extism/go-pdk"

	"github.com/pixie-dev/pixie/sdk"
)

func main() {}

var (
	counter int
	seen    = map[string]int{}
	last    []byte
	file    *os.File
)

//go:wasmexport gate
func gate() int32 { return sdk.Run(rule) }

func rule() int32 {
	report := map[string]any{"counter": counter, "seen": len(seen), "last": string(last)}
	if file != nil {
		b := make([]byte, 64)
		n, err := file.ReadAt(b, 0)
		report["leftOpen"] = string(b[:n])
		if err != nil && n == 0 {
			report["leftOpenError"] = err.Error()
		}
	}
	if v := pdk.GetVar("last"); v != nil {
		report["var"] = string(v)
	}
	counter++
	seen[sdk.Target()]++
	last = []byte(sdk.Target())
	pdk.SetVar("last", []byte(sdk.Target()))
	if f, err := os.Open("secret.txt"); err == nil {
		file = f // left open on purpose
		report["fd"] = int(f.Fd())
	} else {
		report["openError"] = err.Error()
	}
	return sdk.ContinueData(report)
}

//go:build wasip1

// Command fs-probe reads probe.txt from its cwd and tries to write written.txt.
package main

import (
	"os"

	"github.com/pixie-dev/pixie/sdk"
)

func main() {}

//go:wasmexport gate
func gate() int32 {
	return sdk.Run(func() int32 {
		res := map[string]string{}
		wd, err := os.Getwd()
		res["cwd"] = wd
		if b, err := os.ReadFile("probe.txt"); err != nil {
			res["readError"] = err.Error()
		} else {
			res["read"] = string(b)
		}
		if err = os.WriteFile("written.txt", []byte("x"), 0o644); err != nil {
			res["writeError"] = err.Error()
		} else {
			res["write"] = "ok"
		}
		if err = os.Remove("probe.txt"); err != nil {
			res["removeError"] = err.Error()
		}
		return sdk.ContinueData(res)
	})
}

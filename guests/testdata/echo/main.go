//go:build wasip1

// Command echo reports what the host gave it.
package main

import (
	"strconv"

	"github.com/pixie-dev/pixie/sdk"
)

func main() {}

//go:wasmexport gate
func gate() int32 { return sdk.Run(rule) }

//go:wasmexport run
func run() int32 { return sdk.Run(rule) }

// runs counts gate calls on this instance: instances are single-use, so it is always 1.
var runs int

func rule() int32 {
	runs++
	vars := map[string]string{}
	for _, k := range []string{"PIXIE_POINT", "PIXIE_TOOL_NAME", "PIXIE_TOOL_ARGS", "PIXIE_AGENT", "PIXIE_SESSION_ID", "PIXIE_TURN", "PIXIE_GATE_NAME", "PIXIE_URL", "PIXIE_TOKEN"} {
		if v, ok := sdk.Config(k); ok {
			vars[k] = v
		}
	}
	logs, _ := sdk.Config("LOGS")
	n, _ := strconv.Atoi(logs)
	for i := range n {
		sdk.Logf("info", "line %d", i+1)
	}
	code := 0
	if s, ok := sdk.Config("EXIT"); ok {
		code, _ = strconv.Atoi(s)
	}
	sdk.ContinueData(map[string]any{"target": sdk.Target(), "vars": vars, "pet": string(sdk.PetContext()), "runs": runs})
	return int32(code)
}

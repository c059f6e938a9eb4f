// Command only-search-tools is the WASM twin of only-search-tools.sh (spec/pixie-gate.md): at
// the tool-after point it runs the gate only for long search results, and hands the result's
// size to the Pixie task.
package main

import (
	"strconv"

	"github.com/pixie-dev/pixie/sdk"
)

func main() {}

// minSize is the result size (bytes) above which the gate runs.
const minSize = 4000

func rule() int32 {
	switch sdk.ToolName() {
	case "grep", "glob", "web_search":
	default:
		return sdk.Skip()
	}
	size := len(sdk.Target())
	if size <= minSize {
		return sdk.Skip()
	}
	return sdk.Continue(strconv.Itoa(size))
}

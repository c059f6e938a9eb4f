// Package sdk is the Go SDK for Pixie rule guests: WebAssembly modules that a gate runs at one
// of its points (see docs/guests.md for the guide and docs/abi.md for the ABI underneath).
//
// A guest is a Go main package built with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared (or
// `pixie guest build DIR`). It exports the gate entry point and hands it a rule:
//
//	//go:build wasip1
//
//	package main
//
//	import "github.com/pixie-dev/pixie/sdk"
//
//	//go:wasmexport gate
//	func gate() int32 { return sdk.Run(rule) }
//
// and keeps the rule itself in a file without the build tag, so that plain `go test` on the
// host can run it through a Fake:
//
//	package main
//
//	import "github.com/pixie-dev/pixie/sdk"
//
//	func main() {}
//
//	func rule() int32 {
//		if sdk.ToolName() != "grep" {
//			return sdk.Skip()
//		}
//		return sdk.Continue(sdk.Target())
//	}
//
// A rule reads the gate target (Target) and its context (Point, ToolName, ToolArgs, Agent,
// SessionID, Turn, GateName, Config), may call the Pixie model (Ask) and the decision engine
// (JudgeBool, JudgeSelect, JudgeScore), may Log into the run record, and finishes with one of
// Continue, ContinueData, Skip, Conclude or Fail. Each of those returns the exit code of the run
// contract (0, 10, 11, or 1 for an error) and sets the output, so a rule ends with
// `return sdk.Skip()` and the like.
//
// Inside a WASM host the functions talk to Pixie through go-pdk and the pixie_* host functions:
// the target and the variables come in one pixie_context block, fetched on first use, so that a
// run makes as few of Extism's costly kernel calls as possible (docs/abi.md, "Cost").
// On any other platform they talk to the Fake that is running the rule, and panic when none is.
package sdk

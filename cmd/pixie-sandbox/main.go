// Command pixie-sandbox is the sandbox init of Pixie's bash executor (runtime/sandbox): a
// small program that does exactly what `pixie __sandbox` does (it runs the same code), so that
// a hook script or script Skill starts a 3 MB binary instead of the whole pixie binary. The
// executor uses it when it lies beside the pixie binary and was built from the same sources
// (make build puts both in bin/); otherwise runs start pixie itself (docs/sandbox.md).
//
// Build it without cgo (CGO_ENABLED=0, as make build does): a static binary starts faster.
package main

import (
	"os"

	"github.com/pixie-dev/pixie/runtime/sandbox"
)

func main() { os.Exit(sandbox.InitMain(os.Args[1:], os.Stdout)) }

package server

import (
	"os"
	"testing"

	"github.com/pixie-dev/pixie/runtime/sandbox"
)

// TestMain lets the test binary play the pixie binary for the bash executor, which starts
// every script through `<this binary> __sandbox …`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.Verb {
		os.Exit(sandbox.Main(os.Args[2:]))
	}
	os.Exit(m.Run())
}

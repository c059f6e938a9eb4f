package server

import (
	"testing"

	"github.com/pixie-dev/pixie/internal/testutil"
)

// TestMain lets the test binary play the pixie binary for the bash executor, which starts
// every script through `<this binary> __sandbox …` (testutil.Main).
func TestMain(m *testing.M) { testutil.Main(m) }

package app_test

import (
	"testing"

	"github.com/pixie-dev/pixie/internal/testutil"
)

// TestMain plays the sandbox verb when the test binary is started as the sandbox (app.New's
// bash executor probes it at start), and removes the pixie binary the tests built
// (testutil.Main).
func TestMain(m *testing.M) { testutil.Main(m) }

package agents

import (
	"testing"

	"github.com/pixie-dev/pixie/internal/testutil"
)

// TestMain removes the pixie binary the tests built (testutil.PixieBinary) once they are done.
func TestMain(m *testing.M) { testutil.Main(m) }

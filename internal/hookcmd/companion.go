package hookcmd

import (
	"embed"
	"sync"

	"github.com/pixie-dev/pixie/internal/companion"
	"github.com/pixie-dev/pixie/internal/hookwire"
	"github.com/pixie-dev/pixie/internal/minihttp"
	"github.com/pixie-dev/pixie/internal/pixiehome"
	"github.com/pixie-dev/pixie/internal/serverref"
)

// Name is the file name of the adapter's own program (cmd/pixie-hook), beside pixie.
const Name = "pixie-hook"

//go:embed *.go
var ownSource embed.FS

// Fingerprint identifies the adapter's code: its source, that of the packages it runs
// (internal/hookwire, internal/serverref, internal/minihttp, internal/pixiehome), and the Go
// version (internal/companion).
func Fingerprint() string { return fingerprint() }

var fingerprint = sync.OnceValue(func() string {
	return companion.Fingerprint(companion.Source{Name: "internal/hookcmd", FS: ownSource},
		companion.Source{Name: "internal/hookwire", FS: hookwire.Source}, companion.Source{Name: "internal/serverref", FS: serverref.Source},
		companion.Source{Name: "internal/minihttp", FS: minihttp.Source}, companion.Source{Name: "internal/pixiehome", FS: pixiehome.Source})
})

// Find returns the path of pixie-hook beside the pixie binary self when it runs this code
// (companion.Find), or why not.
func Find(self string) (string, error) { return companion.Find(self, Name, Fingerprint()) }

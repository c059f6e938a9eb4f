//go:build !linux

package wasm

import (
	"fmt"
	"io/fs"

	"github.com/pixie-dev/pixie/runtime"
)

// workFS cannot be built outside Linux: the cwd mount needs openat2 to keep every path beneath
// the cwd, so a mount is refused rather than given unconfined.
type workFS struct{ fs.FS }

func newWorkFS(dir string, _ []string) (*workFS, error) {
	return nil, fmt.Errorf("%w: the cwd mount (%s) needs Linux (openat2 with RESOLVE_BENEATH)", runtime.ErrUnsupported, dir)
}

func (*workFS) close() {}

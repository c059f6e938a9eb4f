package confine

import "embed"

// Source is this package's Go source. The sandbox init program (runtime/sandbox) must run
// exactly the code of the pixie binary that starts it, and this package decides what a run may
// reach, so the init's fingerprint covers it.
//
//go:embed *.go
var Source embed.FS

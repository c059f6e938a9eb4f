package pixiehome

import "embed"

// Source is this package's Go source: the command hook adapter's fingerprint covers it
// (internal/hookcmd), so that pixie init uses a pixie-hook only when it runs this code.
//
//go:embed *.go
var Source embed.FS

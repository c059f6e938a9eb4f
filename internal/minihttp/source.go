package minihttp

import "embed"

// Source is this package's Go source: the command hook adapter's fingerprint covers it
// (internal/hookcmd, which pixie-hook runs), so that pixie init uses a pixie-hook only when it runs this code.
//
//go:embed *.go
var Source embed.FS

//go:build race

package instrument

import "github.com/tetratelabs/wazero"

// raceEnabled: under the race detector the spec suite takes minutes; `make test` runs this
// package without -race as a step of its own, and the -race run skips the suite.
const raceEnabled = true

// specConfig is wazero's interpreter under the race detector (the fuzz seeds run there).
func specConfig() wazero.RuntimeConfig { return wazero.NewRuntimeConfigInterpreter() }

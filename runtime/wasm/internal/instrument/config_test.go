//go:build !race

package instrument

import "github.com/tetratelabs/wazero"

const raceEnabled = false

// specConfig is the compiler, as in production.
func specConfig() wazero.RuntimeConfig { return wazero.NewRuntimeConfigCompiler() }

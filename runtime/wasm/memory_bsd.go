//go:build darwin || freebsd || netbsd || openbsd

package wasm

const mapNoReserve = 0

// populate makes b's pages resident (see memory_linux.go).
func populate(b []byte) { touch(b) }

// hugePages does nothing here (see memory_linux.go).
func hugePages([]byte) {}

// Writes are not tracked here: a reset copies the whole snapshot back.
func track([]byte) bool                            { return false }
func writeProtect([]byte)                          {}
func restoreWritten([]byte, int, *image, bool) int { panic("wasm: no write tracking") }

func drop(b []byte, _ bool) {
	for i := range b {
		b[i] = 0
	}
}

var trackingSupported = false

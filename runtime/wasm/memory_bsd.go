//go:build darwin || freebsd || netbsd || openbsd

package wasm

const mapNoReserve = 0

// populate makes b's pages resident (see memory_linux.go).
func populate(b []byte) { touch(b) }

// hugePages does nothing here (see memory_linux.go).
func hugePages([]byte) {}

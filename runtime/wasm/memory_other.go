//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package wasm

import "context"

// withMemory leaves wazero's default (Go slice) memories where there is no mmap.
func withMemory(ctx context.Context) context.Context { return ctx }

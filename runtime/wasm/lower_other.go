//go:build !linux

package wasm

// lowerable is whether threads can be moved to an idle class here: not on this OS, where
// background runs share the CPUs like any other.
const lowerable = false

type threadAttr struct{}

func lowerThread() (threadAttr, bool) { return threadAttr{}, false }

func raiseThread(threadAttr) error { return nil }

func mayRaise() (ok, changed bool) { return false, false }

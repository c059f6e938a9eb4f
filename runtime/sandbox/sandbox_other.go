//go:build !linux

package sandbox

import (
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/runtime"
)

// KernelABI returns 0: Landlock exists only on Linux.
func KernelABI() int { return 0 }

// Probe reports that Landlock is unavailable on this operating system.
func Probe() error {
	return errs.Wrap(errs.Unavailable, runtime.ErrUnsupported, "%s: Landlock is only available on Linux", runtime.ErrUnsupported)
}

func closeOnExec(int) {}

func run(Options, []string) error {
	return unsupported("the sandbox needs Linux Landlock")
}

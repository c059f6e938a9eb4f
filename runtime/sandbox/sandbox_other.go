//go:build !linux

package sandbox

import (
	"os"
	"syscall"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/runtime"
)

// KernelABI returns 0: Landlock exists only on Linux.
func KernelABI() int { return 0 }

// Probe reports that Landlock is unavailable on this operating system.
func Probe() error {
	return errs.Wrap(errs.Unavailable, runtime.ErrUnsupported, "%s: Landlock is only available on Linux", runtime.ErrUnsupported)
}

// Isolation is how the processes of a run are contained; outside Linux there is none.
type Isolation struct {
	Namespaces bool
	Reason     string
}

// Attr returns a process group of its own.
func (Isolation) Attr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// Detect reports that runs have no namespaces outside Linux.
func Detect([]string) Isolation { return Isolation{Reason: "namespaces exist only on Linux"} }

func closeOnExec(int) {}

func probeNamespaces(Options) error { return unsupported("namespaces exist only on Linux") }

func run(Options, []string) (int, int, error) {
	return 0, 0, unsupported("the sandbox needs Linux Landlock")
}

// FindInit reports that the init program is not used outside Linux.
func FindInit(string) ([]string, error) {
	return nil, unsupported("the sandbox init runs only on Linux")
}

// ReadRules builds no ruleset outside Linux.
type ReadRules struct{}

// NewReadRules returns rules that build nothing.
func NewReadRules([]string, bool) *ReadRules { return &ReadRules{} }

// Ruleset reports that Landlock is unavailable.
func (*ReadRules) Ruleset([]string, []string, int) (*os.File, uint32, error) {
	return nil, 0, unsupported("the sandbox needs Linux Landlock")
}

// Close does nothing.
func (*ReadRules) Close() error { return nil }

//go:build linux

package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/runtime"
)

// Access rights granted for reading: files may be read and executed, directories also listed.
const (
	fileRead = ll.AccessFSExecute | ll.AccessFSReadFile
	dirRead  = fileRead | ll.AccessFSReadDir
	// devNull is what `>/dev/null` needs: open for writing with O_TRUNC.
	devNull = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate
)

// kernelABI returns the kernel's Landlock ABI version, 0 when Landlock is missing or disabled.
// Tests replace it to exercise the fail-closed path.
var kernelABI = func() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// KernelABI returns the Landlock ABI version the running kernel offers; 0 means none.
func KernelABI() int { return kernelABI() }

// Probe reports whether the read-only and workspace-write policies can be enforced here: nil,
// or an error wrapping runtime.ErrUnsupported that says why. It builds (without enforcing) a
// real ruleset, so a kernel that reports an ABI version but refuses the system calls fails too.
func Probe() error {
	v := kernelABI()
	if v < MinABI {
		return errs.Wrap(errs.Unavailable, runtime.ErrUnsupported, "%s: %s", runtime.ErrUnsupported, abiMessage(v, MinABI))
	}
	fd, _, err := config(v).NewRulesetFD(landlock.PathAccess(dirRead, "/"))
	if err != nil {
		return errs.Wrap(errs.Unavailable, runtime.ErrUnsupported, "%s: landlock ruleset: %v", runtime.ErrUnsupported, err)
	}
	if fd >= 0 {
		_ = unix.Close(fd)
	}
	return nil
}

func abiMessage(have, need int) string {
	if have == 0 {
		return fmt.Sprintf("Landlock is not available (not built into the kernel or not enabled at boot); the sandbox needs Landlock ABI v%d", need)
	}
	return fmt.Sprintf("the kernel offers Landlock ABI v%d; the sandbox needs v%d", have, need)
}

// config is the strict Landlock configuration: the v3 file-system rights always (the policy),
// and on ABI v6+ the signal and abstract-socket scopes too (hardening: the script cannot signal
// or connect to processes outside its sandbox, such as the server).
func config(abi int) landlock.Config {
	c := landlock.Config{HandledAccessFS: landlock.V3.HandledAccessFS}
	if abi >= 6 {
		c.Scoped = landlock.ScopedSet(ll.ScopeSignal | ll.ScopeAbstractUnixSocket)
	}
	return c
}

func closeOnExec(fd int) { syscall.CloseOnExec(fd) }

// run confines the process according to o and execs argv. It returns only on failure.
func run(o Options, argv []string) error {
	if err := os.Chdir(o.Cwd); err != nil {
		return fmt.Errorf("cwd: %w", err)
	}
	if o.Policy != runtime.PolicyFull {
		// Landlock is enforced on this thread only; the same thread then calls execve, and
		// the new program inherits the domain. The thread is never unlocked.
		goruntime.LockOSThread()
		if err := restrictSelf(o); err != nil {
			return err
		}
	}
	err := syscall.Exec(argv[0], argv, os.Environ())
	return fmt.Errorf("exec %s: %w", argv[0], err)
}

func restrictSelf(o Options) error {
	v := kernelABI()
	if need := o.minABI(); v < need {
		return unsupported("%s", abiMessage(v, need))
	}
	rules, err := rulesFor(o)
	if err != nil {
		return err
	}
	// No BestEffort: a configuration the kernel cannot enforce is an error, never a downgrade.
	fd, flags, err := config(v).NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("landlock ruleset: %w", err)
	}
	if fd < 0 {
		return unsupported("landlock produced no ruleset")
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return unsupported("prctl(PR_SET_NO_NEW_PRIVS): %v", err)
	}
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return unsupported("landlock_restrict_self: %v", err)
	}
	return nil
}

// rulesFor lists what o allows; everything else in the handled rights is denied.
func rulesFor(o Options) ([]landlock.Rule, error) {
	hidden, err := canonical(o.Hidden)
	if err != nil {
		return nil, err
	}
	rules, err := readRules(hidden)
	if err != nil {
		return nil, err
	}
	rules = append(rules, landlock.PathAccess(devNull, "/dev/null").IgnoreIfMissing())
	writable := o.Writable
	if o.Policy == runtime.PolicyWorkspaceWrite {
		writable = append([]string{o.Cwd}, writable...)
	}
	if len(writable) > 0 {
		rules = append(rules, landlock.RWDirs(writable...).WithRefer())
	}
	for _, p := range o.Readable {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("readable path: %w", err)
		}
		if st.IsDir() {
			rules = append(rules, landlock.PathAccess(dirRead, p))
		} else {
			rules = append(rules, landlock.PathAccess(fileRead, p))
		}
	}
	return rules, nil
}

// canonical resolves symbolic links in the hidden directories; missing ones are dropped (there
// is nothing to hide).
func canonical(dirs []string) ([]string, error) {
	var out []string
	for _, d := range dirs {
		r, err := filepath.EvalSymlinks(d)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("hidden directory: %w", err)
		}
		if r == "/" {
			return nil, fmt.Errorf("hidden directory %s resolves to the root directory", d)
		}
		out = append(out, r)
	}
	return out, nil
}

// readRules grants read and execute access to the whole file system except the hidden
// directories and the per-process directories of /proc (/proc/<pid>: other processes'
// environments, memory maps and command lines; /proc/self follows, since it points there).
// Landlock only adds rights, so hiding a path means granting its siblings and the siblings of
// each of its ancestors one by one; the ancestors themselves get only the right to be listed
// (inherited by everything below /, so hidden directories can be listed but their files cannot
// be opened). Symbolic links among those siblings get no rule: Landlock checks the place a path
// resolves to, which is covered by its own rule. Entries created after the run starts in an
// ancestor of a hidden path are not readable.
func readRules(hidden []string) ([]landlock.Rule, error) {
	rules := []landlock.Rule{landlock.PathAccess(ll.AccessFSReadDir, "/")}
	var walk func(dir string) error
	walk = func(dir string) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("listing %s: %w", dir, err)
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			switch {
			case isHidden(p, hidden):
			case isAncestor(p, hidden):
				if e.IsDir() {
					if err := walk(p); err != nil {
						return err
					}
				}
			case e.Type()&fs.ModeSymlink != 0:
			case e.IsDir():
				rules = append(rules, landlock.PathAccess(dirRead, p).IgnoreIfMissing())
			default:
				rules = append(rules, landlock.PathAccess(fileRead, p).IgnoreIfMissing())
			}
		}
		return nil
	}
	if err := walk("/"); err != nil {
		return nil, err
	}
	return rules, nil
}

// isHidden reports whether p is a hidden directory or a process directory of /proc.
func isHidden(p string, hidden []string) bool {
	if pid, ok := strings.CutPrefix(p, "/proc/"); ok && pid != "" && strings.Trim(pid, "0123456789") == "" {
		return true
	}
	for _, h := range hidden {
		if p == h {
			return true
		}
	}
	return false
}

// isAncestor reports whether p is a proper ancestor of a hidden path.
func isAncestor(p string, hidden []string) bool {
	if p == "/proc" {
		return true
	}
	for _, h := range hidden {
		if h != p && within(h, p) {
			return true
		}
	}
	return false
}

//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/pixie-dev/pixie/internal/confine"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/runtime"
)

// SignalStop, sent to the verb, makes it kill every process of the run and exit. Without
// namespaces it is also the verb's parent-death signal, so a dying server stops its runs.
const SignalStop = syscall.SIGUSR1

// Access rights granted for reading: files may be read and executed, directories also listed.
const (
	fileRead = ll.AccessFSExecute | ll.AccessFSReadFile
	dirRead  = fileRead | ll.AccessFSReadDir
	// devNull is what `>/dev/null` needs: open for writing with O_TRUNC.
	devNull = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate
	// dirWrite is everything on a writable tree except making device nodes (a block device
	// made there would read the disk beneath every rule).
	dirWrite = landlock.AccessFSSet(ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile |
		ll.AccessFSReadDir | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeDir |
		ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeSym |
		ll.AccessFSRefer | ll.AccessFSTruncate)
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

// Isolation is how the processes of a run are contained on this machine; Detect finds it.
type Isolation struct {
	// Namespaces: each run gets new PID and mount namespaces, so every process it starts dies
	// with it, and the Pixie home can be hidden from a writable cwd that holds it.
	Namespaces bool
	// Reason says why Namespaces is false.
	Reason string

	userNS bool // a user namespace too (the server is not root, or root lacks CAP_SYS_ADMIN)
}

// Attr returns the process attributes that start the verb: a process group of its own, a
// parent-death signal (SIGKILL with namespaces, SignalStop without) and the namespaces. The
// caller must start the verb from a goroutine that stays locked to its OS thread until the run
// ends: Linux sends the parent-death signal when the thread that started the child exits.
func (i Isolation) Attr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: SignalStop}
	if !i.Namespaces {
		return a
	}
	a.Pdeathsig = syscall.SIGKILL
	a.Cloneflags = syscall.CLONE_NEWPID | syscall.CLONE_NEWNS
	if i.userNS {
		a.Cloneflags |= syscall.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Geteuid(), HostID: os.Geteuid(), Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: os.Getegid(), Size: 1}}
		a.GidMappingsEnableSetgroups = false
	}
	return a
}

// Detect finds out whether runs can have their own namespaces here, by starting the verb
// (command is the pixie binary followed by Verb) in them once, as root without and otherwise
// with a user namespace. It takes one start of the binary.
func Detect(command []string) Isolation {
	if len(command) == 0 {
		return Isolation{Reason: "no sandbox command"}
	}
	var reasons []string
	tries := []bool{false, true}
	if os.Geteuid() != 0 {
		tries = []bool{true}
	}
	for _, userNS := range tries {
		iso := Isolation{Namespaces: true, userNS: userNS}
		err := probe(command, iso)
		if err == nil {
			return iso
		}
		reasons = append(reasons, err.Error())
	}
	return Isolation{Reason: "this machine gives runs no PID and mount namespaces (" + strings.Join(reasons, "; ") + ")"}
}

func probe(command []string, iso Isolation) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o := Options{Policy: runtime.PolicyFull, Cwd: "/", Namespaces: true, StatusFD: 3}
	args := append(append(append([]string(nil), command[1:]...), "-probe"), o.Args(command[0])...)
	cmd := exec.CommandContext(ctx, command[0], args...)
	cmd.SysProcAttr = iso.Attr()
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd.ExtraFiles = []*os.File{w}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	err = cmd.Start()
	w.Close()
	if err != nil {
		what := "PID and mount namespaces"
		if iso.userNS {
			what = "user, PID and mount namespaces"
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	status, _ := io.ReadAll(io.LimitReader(r, 4096))
	err = cmd.Wait()
	if s := strings.TrimSpace(string(status)); s != "" {
		return errors.New(strings.TrimPrefix(s, statusError))
	}
	if err != nil {
		return fmt.Errorf("probe: %w %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// probeNamespaces is the verb's side of Detect: set the namespace up as a run would, and mount
// a tmpfs as masking would.
func probeNamespaces(o Options) error {
	if !o.Namespaces || os.Getpid() != 1 {
		return errors.New("the probe must run as PID 1 of new namespaces")
	}
	if err := setupNamespace(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "pixie-probe-")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0555,size=4k"); err != nil {
		return fmt.Errorf("mounting a tmpfs: %w", err)
	}
	return unix.Unmount(dir, unix.MNT_DETACH)
}

// setupNamespace keeps the run's mounts to itself and gives it a /proc of its own PID
// namespace.
func setupNamespace() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the run's mounts private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting the run's /proc: %w", err)
	}
	return nil
}

// run contains and confines the process according to o, starts argv and waits for it as the
// run's init. It returns the program's exit status, or the signal that killed it, or the error
// that kept it from starting.
func run(o Options, argv []string) (code, sig int, err error) {
	// The signal handler is installed while the run is set up, and is in place before the
	// program starts: the runtime starts a thread of its own for it, about 0.3 ms that every
	// bash run waited for (docs/bench.md, "The bash row").
	sigs := make(chan os.Signal, 8)
	notified := make(chan struct{})
	go func() {
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, SignalStop)
		close(notified)
	}()
	if o.Namespaces {
		if os.Getpid() != 1 {
			return 0, 0, errors.New("started with -ns but not as PID 1 of a new PID namespace")
		}
		if err := setupNamespace(); err != nil {
			return 0, 0, err
		}
	}
	cwd, err := confine.Resolve(o.Cwd)
	if err != nil {
		return 0, 0, fmt.Errorf("cwd: %w", err)
	}
	confined := o.Policy != runtime.PolicyFull
	var hidden, writable, readable []string
	if confined {
		if hidden, writable, readable, err = plan(o, cwd); err != nil {
			return 0, 0, err
		}
		if o.Namespaces && len(hidden) > 0 {
			if err := mask(hidden, readable); err != nil {
				return 0, 0, err
			}
		}
	} else if o.Mask {
		if err := maskFull(o, cwd); err != nil {
			return 0, 0, err
		}
	}
	if err := os.Chdir(cwd); err != nil {
		return 0, 0, fmt.Errorf("cwd: %w", err)
	}
	// The cwd was resolved before the chdir; a component swapped for a symbolic link meanwhile
	// would land elsewhere, so check where we are.
	if got, err := os.Getwd(); err != nil || got != cwd {
		return 0, 0, fmt.Errorf("cwd: %s changed while the run was being set up (now %q)", cwd, got)
	}

	<-notified
	if !o.Namespaces {
		// Orphans of the run (double forks, setsid daemons) become our children, not init's.
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return 0, 0, fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", err)
		}
	}
	// Nothing the program starts can read our memory or descriptors through /proc.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)

	type started struct {
		pid int
		err error
	}
	start := make(chan started, 1)
	go func() {
		// Landlock, no_new_privs and the capability bounding set apply to this thread only; the
		// program is forked from it and inherits them. The goroutine ends locked, so the
		// restricted thread ends with it and never runs anything else.
		goruntime.LockOSThread()
		if confined {
			if err := restrictSelf(o, hidden, writable, readable); err != nil {
				start <- started{err: err}
				return
			}
		} else if o.Mask {
			if err := lockMasked(); err != nil {
				start <- started{err: err}
				return
			}
		}
		pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{
			Env:   os.Environ(),
			Files: []uintptr{0, 1, 2},
			Sys:   &syscall.SysProcAttr{Setpgid: true},
		})
		if err != nil {
			err = fmt.Errorf("exec %s: %w", argv[0], err)
		}
		start <- started{pid, err}
	}()
	st := <-start
	if st.err != nil {
		return 0, 0, st.err
	}
	exited := make(chan syscall.WaitStatus, 1)
	go reap(st.pid, exited)
	for {
		select {
		case ws := <-exited:
			stopAll(o)
			if ws.Signaled() {
				return 0, int(ws.Signal()), nil
			}
			return ws.ExitStatus(), 0, nil
		case s := <-sigs:
			if s == SignalStop {
				stopAll(o)
				return 128 + int(syscall.SIGKILL), 0, nil
			}
			signalAll(o, syscall.SIGTERM)
		}
	}
}

// maskFull hides the Hidden directories of a full-policy run (Options.Mask): it refuses a run
// without a mount namespace and a cwd inside a hidden directory, and over-mounts every alias
// (lockMasked then drops what could undo it).
func maskFull(o Options, cwd string) error {
	if !o.Namespaces {
		return unsupported("hiding the Pixie home from this run needs a private mount namespace, which this machine does not give runs")
	}
	var hidden, readable []string
	for _, h := range o.Hidden {
		al, err := confine.Aliases(h)
		if err != nil {
			return fmt.Errorf("hidden directory: %w", err)
		}
		hidden = append(hidden, al...)
	}
	if h, ok := confine.WithinAny(cwd, hidden); ok {
		return unsupported("the session cwd %s lies inside the Pixie home (%s); give the session a cwd outside it", described(o.Cwd, cwd), h)
	}
	for _, p := range o.Readable {
		r, err := confine.Resolve(p)
		if err != nil {
			return fmt.Errorf("readable path: %w", err)
		}
		readable = append(readable, r)
	}
	if len(hidden) > 0 {
		return mask(hidden, readable)
	}
	return nil
}

// lockMasked is the thread-level half of Options.Mask, applied on the thread that starts the
// program (both are per-thread): no CAP_SYS_ADMIN, which could unmount the cover, and no new
// privileges. The rest of the capabilities stay: a root program that builds its own sandbox
// needs them (bubblewrap maps uid 0 into its user namespace with CAP_SETFCAP), and the mounts
// it inherits are locked in that namespace, so nothing inside it can lift the cover.
func lockMasked() error {
	if os.Geteuid() == 0 {
		_ = unix.Prctl(unix.PR_CAPBSET_DROP, unix.CAP_SYS_ADMIN, 0, 0, 0)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return unsupported("prctl(PR_SET_NO_NEW_PRIVS): %v", err)
	}
	return nil
}

// plan resolves what a confined run may reach: every alias of the hidden directories, the
// writable trees and the readable exceptions. It refuses a cwd inside a hidden directory, and a
// writable tree that holds one when there is no mount namespace to hide it in.
func plan(o Options, cwd string) (hidden, writable, readable []string, err error) {
	for _, h := range o.Hidden {
		al, err := confine.Aliases(h)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("hidden directory: %w", err)
		}
		hidden = append(hidden, al...)
	}
	if h, ok := confine.WithinAny(cwd, hidden); ok {
		return nil, nil, nil, unsupported("the session cwd %s lies inside the Pixie home (%s); rules never run there, so give the session a cwd outside it", described(o.Cwd, cwd), h)
	}
	for _, w := range o.Writable {
		r, err := confine.Resolve(w)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("writable directory: %w", err)
		}
		if h, ok := confine.WithinAny(r, hidden); ok {
			return nil, nil, nil, fmt.Errorf("the writable directory %s lies inside the hidden directory %s", described(w, r), h)
		}
		writable = append(writable, r)
	}
	if o.Policy == runtime.PolicyWorkspaceWrite {
		writable = append(writable, cwd)
	}
	if !o.Namespaces {
		for _, w := range writable {
			for _, h := range hidden {
				if confine.Within(h, w) {
					return nil, nil, nil, unsupported("the writable tree %s holds the Pixie home (%s), which Landlock cannot leave out of a writable tree, and this machine gives runs no private mount namespace to hide it in; give the session a cwd that does not contain the home, or move the home (PIXIE_HOME) out of it", w, h)
				}
			}
		}
	}
	for _, p := range o.Readable {
		r, err := confine.Resolve(p)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("readable path: %w", err)
		}
		readable = append(readable, r)
	}
	return hidden, writable, readable, nil
}

func described(given, resolved string) string {
	if given == resolved {
		return given
	}
	return given + " (resolving to " + resolved + ")"
}

// mask over-mounts every hidden alias with an empty read-only tmpfs (a file alias with
// /dev/null), binding back, read-only, the readable paths that live inside it.
func mask(hidden, readable []string) error {
	sorted := append([]string(nil), hidden...)
	sort.Strings(sorted) // a directory before what lies inside it
	var done []string
	for _, h := range sorted {
		if _, ok := confine.WithinAny(h, done); ok {
			continue
		}
		done = append(done, h)
		var keep []string
		for _, r := range readable {
			if confine.Within(r, h) {
				keep = append(keep, r)
			}
		}
		if err := maskOne(h, keep); err != nil {
			return fmt.Errorf("hiding %s: %w", h, err)
		}
	}
	return nil
}

func maskOne(h string, keep []string) error {
	info, err := os.Lstat(h)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !info.IsDir() {
		if len(keep) > 0 {
			return nil // the script itself: Landlock still keeps it read-only
		}
		if err := unix.Mount("/dev/null", h, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/null: %w", err)
		}
		return unix.Mount("", h, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, "")
	}
	// Hold what must stay reachable before the tmpfs covers it.
	fds := make([]int, len(keep))
	for i, k := range keep {
		fd, err := unix.Open(k, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening %s: %w", k, err)
		}
		defer unix.Close(fd)
		fds[i] = fd
	}
	if err := unix.Mount("tmpfs", h, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0555,size=64k,nr_inodes=1024"); err != nil {
		return fmt.Errorf("mounting a tmpfs: %w", err)
	}
	for i, k := range keep {
		var st unix.Stat_t
		if err := unix.Fstat(fds[i], &st); err != nil {
			return err
		}
		target := k
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			err = os.MkdirAll(target, 0o555)
		} else if err = os.MkdirAll(filepath.Dir(target), 0o555); err == nil {
			var f *os.File
			if f, err = os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o444); err == nil {
				err = f.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("making room for %s: %w", k, err)
		}
		if err := bindReadOnly(fds[i], target); err != nil {
			return fmt.Errorf("binding %s back: %w", k, err)
		}
	}
	if err := unix.Mount("", h, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("making the tmpfs read-only: %w", err)
	}
	return nil
}

// bindReadOnly bind-mounts the file or directory open as fd onto target, read-only, keeping the
// flags its own mount has (a user namespace may not drop them).
func bindReadOnly(fd int, target string) error {
	src := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return err
	}
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV)
	for st, ms := range map[int64]uintptr{unix.ST_NOEXEC: unix.MS_NOEXEC, unix.ST_NOATIME: unix.MS_NOATIME,
		unix.ST_NODIRATIME: unix.MS_NODIRATIME, unix.ST_RELATIME: unix.MS_RELATIME} {
		if sfs.Flags&st != 0 {
			flags |= ms
		}
	}
	return unix.Mount("", target, "", flags, "")
}

// reap waits for every child of the verb (orphans of the run become its children), reporting
// the program's status once.
func reap(pid int, exited chan<- syscall.WaitStatus) {
	for {
		var ws syscall.WaitStatus
		wpid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			// ECHILD: nothing left to wait for; the program was reaped before.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if wpid == pid && (ws.Exited() || ws.Signaled()) {
			exited <- ws
		}
	}
}

// stopAll kills every process of the run but the verb. In a PID namespace that is one kill;
// otherwise the verb, a subreaper, kills its descendants until none is left.
func stopAll(o Options) {
	if o.Namespaces && os.Getpid() == 1 {
		_ = syscall.Kill(-1, syscall.SIGKILL)
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		left := 0
		for _, p := range descendants(os.Getpid()) {
			left++
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if left == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// signalAll sends sig to every process of the run but the verb.
func signalAll(o Options, sig syscall.Signal) {
	if o.Namespaces && os.Getpid() == 1 {
		_ = syscall.Kill(-1, sig)
		return
	}
	for _, p := range descendants(os.Getpid()) {
		_ = syscall.Kill(p, sig)
	}
}

// descendants lists the processes below pid that are not yet reaped, from /proc.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		s := string(raw)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		children[ppid] = append(children[ppid], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

func restrictSelf(o Options, hidden, writable, readable []string) error {
	v := kernelABI()
	if need := o.minABI(); v < need {
		return unsupported("%s", abiMessage(v, need))
	}
	var fd int
	var flags uint32
	if o.RulesetFD > 0 {
		// The parent built the rest (ReadRules.Ruleset, from the same walk and the same paths).
		fd, flags = o.RulesetFD, o.RulesetFlags
		if err := addOwnRules(fd, o, writable); err != nil {
			return err
		}
	} else {
		rules, err := rulesFor(o, hidden, writable, readable)
		if err != nil {
			return err
		}
		// No BestEffort: a configuration the kernel cannot enforce is an error, never a downgrade.
		if fd, flags, err = config(v).NewRulesetFD(rules...); err != nil {
			return fmt.Errorf("landlock ruleset: %w", err)
		}
		if fd < 0 {
			return unsupported("landlock produced no ruleset")
		}
	}
	defer unix.Close(fd)
	if os.Geteuid() == 0 {
		dropCapabilities()
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return unsupported("prctl(PR_SET_NO_NEW_PRIVS): %v", err)
	}
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return unsupported("landlock_restrict_self: %v", err)
	}
	return nil
}

// dropped are the capabilities a confined program started as root loses (from the bounding set,
// so it never gets them back): those that read files or memory past Landlock's path rules (raw
// devices, file handles, ptrace, BPF and perf), change the mount table or the kernel, or make
// device nodes. CAP_SETPCAP, needed to drop the others, goes last.
var dropped = []uintptr{
	unix.CAP_SYS_RAWIO, unix.CAP_DAC_READ_SEARCH, unix.CAP_SYS_ADMIN, unix.CAP_SYS_PTRACE,
	unix.CAP_SYS_MODULE, unix.CAP_MKNOD, unix.CAP_BPF, unix.CAP_PERFMON, unix.CAP_SYSLOG,
	unix.CAP_MAC_ADMIN, unix.CAP_MAC_OVERRIDE, unix.CAP_CHECKPOINT_RESTORE, unix.CAP_SYS_BOOT,
	unix.CAP_SETFCAP, unix.CAP_SETPCAP,
}

func dropCapabilities() {
	for _, c := range dropped {
		// EINVAL: a capability this kernel does not know.
		_ = unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0)
	}
}

// addOwnRules adds to the parent's ruleset fd what only the verb can reach: the run's own
// /proc (which it mounted) and, under workspace-write, the cwd as "." (it has moved there and
// checked it), as rulesFor does.
func addOwnRules(fd int, o Options, writable []string) error {
	add := func(path string, access landlock.AccessFSSet) error {
		pfd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC|unix.O_DIRECTORY, 0)
		if err != nil {
			return fmt.Errorf("landlock ruleset: %s: %w", path, err)
		}
		defer unix.Close(pfd)
		if err := ll.LandlockAddPathBeneathRule(fd, &ll.PathBeneathAttr{ParentFd: pfd, AllowedAccess: uint64(access)}, 0); err != nil {
			return fmt.Errorf("landlock ruleset: %s: %w", path, err)
		}
		return nil
	}
	if o.Namespaces {
		if err := add("/proc", dirRead); err != nil {
			return err
		}
	}
	cwd, _ := os.Getwd()
	for _, w := range writable {
		if w == cwd {
			if err := add(".", dirWrite); err != nil {
				return err
			}
		}
	}
	return nil
}

// rulesFor lists what o allows; everything else in the handled rights is denied. The cwd rule
// is made on "." (the verb has moved there and checked it), not on a path that could be swapped.
func rulesFor(o Options, hidden, writable, readable []string) ([]landlock.Rule, error) {
	rules, err := readRules(hidden, o.Namespaces)
	if err != nil {
		return nil, err
	}
	rules = append(rules, landlock.PathAccess(devNull, "/dev/null").IgnoreIfMissing())
	cwd, _ := os.Getwd()
	for _, w := range writable {
		if w == cwd {
			w = "."
		}
		rules = append(rules, landlock.PathAccess(dirWrite, w))
	}
	for _, p := range readable {
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

// readRules grants read and execute access to the whole file system except the hidden paths,
// block devices (reading a disk would bypass every path rule) and, without a PID namespace of
// the run's own, the per-process directories of /proc (/proc/<pid>: other processes'
// environments, memory maps and command lines; /proc/self follows, since it points there).
// Landlock only adds rights, so hiding a path means granting its siblings and the siblings of
// each of its ancestors one by one; the ancestors themselves get only the right to be listed
// (inherited by everything below /, so hidden directories can be listed but their files cannot
// be opened). Symbolic links among those siblings get no rule: Landlock checks the place a path
// resolves to, which is covered by its own rule. Entries created after the walk in an ancestor
// of a hidden path are not readable.
func readRules(hidden []string, ownProc bool) ([]landlock.Rule, error) {
	var rules []landlock.Rule
	err := walkRead(hidden, ownProc, nil, func(e readEntry) {
		r := landlock.PathAccess(e.access, e.path)
		if e.path != "/" {
			r = r.IgnoreIfMissing()
		}
		rules = append(rules, r)
	})
	if err != nil {
		return nil, err
	}
	return rules, nil
}

// readEntry is one rule of readRules: access on path.
type readEntry struct {
	path   string
	access landlock.AccessFSSet
	// runProc marks the rule on the run's own /proc (a PID namespace of its own): only the
	// sandbox verb can add it, since the /proc it mounts is not the one its parent sees.
	runProc bool
}

// walkRead is readRules's walk: it calls visit with each rule, the first being the right to
// list / (which every path inherits), and, when not nil, listing with each directory it is
// about to list.
func walkRead(hidden []string, ownProc bool, listing func(dir string), visit func(readEntry)) error {
	visit(readEntry{path: "/", access: ll.AccessFSReadDir})
	var walk func(dir string) error
	walk = func(dir string) error {
		if listing != nil {
			listing(dir)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("listing %s: %w", dir, err)
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			switch {
			case isHidden(p, hidden, ownProc):
			case e.Type()&fs.ModeDevice != 0 && e.Type()&fs.ModeCharDevice == 0:
				// A block device.
			case p == "/proc" && ownProc:
				visit(readEntry{path: p, access: dirRead, runProc: true})
			case isAncestor(p, hidden, ownProc) || p == "/dev":
				if e.IsDir() {
					if err := walk(p); err != nil {
						return err
					}
				}
			case e.Type()&fs.ModeSymlink != 0:
			case e.IsDir():
				visit(readEntry{path: p, access: dirRead})
			default:
				visit(readEntry{path: p, access: fileRead})
			}
		}
		return nil
	}
	return walk("/")
}

// isHidden reports whether p is a hidden path or (without a PID namespace of the run's own) a
// process directory of /proc.
func isHidden(p string, hidden []string, ownProc bool) bool {
	if pid, ok := strings.CutPrefix(p, "/proc/"); ok && !ownProc && pid != "" && strings.Trim(pid, "0123456789") == "" {
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
func isAncestor(p string, hidden []string, ownProc bool) bool {
	if p == "/proc" && !ownProc {
		return true
	}
	for _, h := range hidden {
		if h != p && confine.Within(h, p) {
			return true
		}
	}
	return false
}

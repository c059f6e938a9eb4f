// Package sandbox owns the sandbox verb that every hook script and script Skill runs under: it
// contains the run's processes, confines them according to the session's sandbox policy, starts
// the program (normally bash and a hook script) and stays behind as the run's init process until
// the program ends. Because Landlock restricts the calling thread and what it starts, the server
// never restricts itself: each run starts the verb in a process of its own, in the small sandbox
// init program beside pixie (InitName, cmd/pixie-sandbox, found by FindInit), or in the pixie
// binary itself (`pixie __sandbox`, Verb). The parent builds the run's Landlock ruleset from a
// walk it keeps (ReadRules) and hands it to the verb (Options.RulesetFD).
//
// Processes (docs/sandbox.md, "Processes"). Where the machine allows it (Detect), the parent
// starts the verb in new PID and mount namespaces (and a user namespace when the server is not
// root), with SIGKILL as its parent-death signal: the verb is PID 1 of the run, and when it
// exits, is killed, or the server dies (SIGKILL included), the kernel kills every process of
// the namespace, setsid, double-forked and daemonised children too. Elsewhere the verb is a
// child subreaper whose parent-death signal is SignalStop: it kills every descendant when the
// program ends, when the parent sends SignalStop, and when the server dies, and only a process
// that kills the verb itself with SIGKILL first can leave descendants behind.
//
// Policies (docs/sandbox.md has the full table):
//
//   - read-only: read and execute everywhere except the Hidden directories and every alias of
//     them (internal/confine: resolved paths, bind mounts, second mounts); write only to
//     /dev/null and the run's private temporary directory (Writable).
//   - workspace-write: as read-only, plus write access beneath the session's cwd.
//   - full: no file-system restriction (trusted), but the same process containment. With Mask
//     the Hidden directories are hidden all the same (over-mounted, which needs the run's mount
//     namespace): for a program that confines its own children with a sandbox of its own that
//     cannot start under Landlock (Codex's bubblewrap), yet must never see the Pixie home.
//
// Paths are compared resolved, never as given. A cwd that resolves inside a Hidden directory is
// refused. A writable tree that holds a Hidden directory (workspace-write with the cwd at or
// above the Pixie home, "/" included) cannot be expressed in Landlock, which only adds rights,
// so there the verb over-mounts every alias of the Hidden directory with an empty read-only
// tmpfs in the run's private mount namespace (after binding back the script and the helper if
// they live inside it); without a mount namespace such a run fails closed.
//
// The file-system policy needs Landlock ABI v3 (v1 cannot stop truncate(2) or open(O_TRUNC)),
// configured strictly: no best-effort downgrade. Where the kernel cannot enforce the requested
// policy the verb refuses to run the program and reports "unsupported" on its status pipe, which
// the parent turns into runtime.ErrUnsupported ("hook-script-unsupported: …"). It never runs a
// program unsandboxed in silence.
//
// The parent passes the write end of a pipe as StatusFD. The verb marks it close-on-exec at
// once and keeps it; the program never gets it, so it cannot forge a status. The verb writes one
// line there only when something is to be reported: "unsupported: …" or "error: …" when it
// failed before the program started (and then exits with ExitFailure), or "signal: N" when the
// program was killed by signal N. Otherwise the verb exits with the program's exit status.
package sandbox

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/runtime"
)

// Verb is the hidden command-line verb of the pixie binary that calls Main.
const Verb = "__sandbox"

// ExitFailure is the exit status of the verb when it fails before the program starts. A program
// may exit with the same status, so the status pipe, not the exit status, is authoritative.
const ExitFailure = 125

// MinABI is the lowest Landlock ABI version that can enforce the read-only and workspace-write
// policies (ABI v3 adds LANDLOCK_ACCESS_FS_TRUNCATE).
const MinABI = 3

// maxABI is the newest Landlock ABI version go-landlock v0.11 knows.
const maxABI = 11

// Status line prefixes written to the status pipe.
const (
	statusUnsupported = "unsupported: "
	statusError       = "error: "
	statusSignal      = "signal: "
)

// Options are the arguments of one sandboxed run.
type Options struct {
	// Policy is the session's sandbox policy (required).
	Policy runtime.Policy
	// Cwd is the session's working directory (required, absolute). The program starts there,
	// and under workspace-write it is writable.
	Cwd string
	// Writable are extra directories writable under read-only and workspace-write (the run's
	// private temporary directory).
	Writable []string
	// Readable are files or directories readable (and executable) even when they lie inside a
	// Hidden directory (the script itself, the pixie helper).
	Readable []string
	// Hidden are directories whose contents the program may neither read nor change under
	// read-only and workspace-write (the Pixie home, which holds the admin token, the
	// credentials, the store and the blobs), through any of their aliases. Their names can
	// still be listed. Under those policies a Cwd that resolves inside one is refused.
	Hidden []string
	// MinABI raises the required Landlock ABI version above MinABI; zero means MinABI.
	MinABI int
	// Namespaces tells the verb that its parent started it in new PID and mount namespaces
	// (Isolation.Attr): it is PID 1 of the run and mounts a private /proc.
	Namespaces bool
	// Mask hides the Hidden directories under the full policy too, by over-mounting every alias
	// of them with an empty read-only tmpfs, and drops the capabilities a root run could undo
	// that with. It needs Namespaces: without a mount namespace the verb refuses to run
	// ("unsupported"). The other policies hide them anyway.
	Mask bool
	// StatusFD is the descriptor of the status pipe's write end in the sandbox process
	// (normally 3, the first of exec.Cmd.ExtraFiles); zero means none, and failures are only
	// written to stderr.
	StatusFD int
	// RulesetFD is the descriptor of a Landlock ruleset the parent built for this run
	// (ReadRules.Ruleset: the read rules, /dev/null, Writable and Readable), to which the verb
	// adds what only it can reach (the run's own /proc, the cwd as it moved there) before it
	// restricts itself with it; zero means none, and the verb builds the whole ruleset itself.
	// RulesetFlags are the flags of landlock_restrict_self that go with it.
	RulesetFD    int
	RulesetFlags uint32

	probe bool // Detect's run: set up the namespaces, then exit
}

// Args returns the verb's arguments for o followed by the program and its arguments; the
// caller prefixes them with the pixie binary and Verb.
func (o Options) Args(program string, args ...string) []string {
	var out []string
	if o.StatusFD != 0 {
		out = append(out, "-status-fd", strconv.Itoa(o.StatusFD))
	}
	out = append(out, "-policy", string(o.Policy), "-cwd", o.Cwd)
	for _, d := range o.Writable {
		out = append(out, "-rw", d)
	}
	for _, d := range o.Readable {
		out = append(out, "-ro", d)
	}
	for _, d := range o.Hidden {
		out = append(out, "-hide", d)
	}
	if o.MinABI != 0 {
		out = append(out, "-min-abi", strconv.Itoa(o.MinABI))
	}
	if o.Namespaces {
		out = append(out, "-ns")
	}
	if o.RulesetFD != 0 {
		out = append(out, "-ruleset-fd", strconv.Itoa(o.RulesetFD), "-ruleset-flags", strconv.FormatUint(uint64(o.RulesetFlags), 10))
	}
	if o.Mask {
		out = append(out, "-mask")
	}
	out = append(out, "--", program)
	return append(out, args...)
}

// DecodeStatus turns what the parent read from the status pipe into the program's fate: an
// error wrapping runtime.ErrUnsupported (code unavailable) when the policy cannot be enforced
// here, an internal error when the sandbox failed otherwise (in both cases the program never
// ran), the signal that killed the program (signal > 0), or nothing at all when the program
// exited by itself (its status is the verb's exit status).
func DecodeStatus(status []byte) (signal int, err error) {
	s := strings.TrimSpace(string(status))
	switch {
	case s == "":
		return 0, nil
	case strings.HasPrefix(s, statusUnsupported):
		return 0, errs.Wrap(errs.Unavailable, runtime.ErrUnsupported, "%s: %s", runtime.ErrUnsupported, strings.TrimPrefix(s, statusUnsupported))
	case strings.HasPrefix(s, statusSignal):
		if n, err := strconv.Atoi(strings.TrimPrefix(s, statusSignal)); err == nil && n > 0 {
			return n, nil
		}
	}
	return 0, errs.New(errs.Internal, "sandbox: %s", strings.TrimPrefix(s, statusError))
}

// unsupportedError marks a failure caused by missing kernel support.
type unsupportedError struct{ msg string }

func (e *unsupportedError) Error() string { return e.msg }

func unsupported(format string, args ...any) error {
	return &unsupportedError{msg: fmt.Sprintf(format, args...)}
}

// Main runs the verb with its arguments (those after Verb) and returns its exit status: the
// program's, or ExitFailure when the sandbox failed before the program started.
func Main(args []string) int {
	o, argv, err := parse(args)
	if o.StatusFD > 2 {
		// Never let the status pipe reach the program.
		closeOnExec(o.StatusFD)
	}
	if o.RulesetFD > 2 {
		closeOnExec(o.RulesetFD)
	}
	if err != nil {
		report(o.StatusFD, err)
		return ExitFailure
	}
	if o.probe {
		if err := probeNamespaces(o); err != nil {
			report(o.StatusFD, err)
			return ExitFailure
		}
		return 0
	}
	code, signal, err := run(o, argv)
	switch {
	case err != nil:
		report(o.StatusFD, err)
		return ExitFailure
	case signal > 0:
		writeStatus(o.StatusFD, fmt.Sprintf("%s%d\n", statusSignal, signal))
		return 128 + signal
	}
	return code
}

// report writes err to the status pipe (or to stderr without one).
func report(fd int, err error) {
	var line string
	var ue *unsupportedError
	if errors.As(err, &ue) {
		line = statusUnsupported + err.Error()
	} else {
		line = statusError + err.Error()
	}
	writeStatus(fd, strings.ReplaceAll(line, "\n", " ")+"\n")
}

// writeStatus writes line to the status pipe and closes it (or writes it to stderr).
func writeStatus(fd int, line string) {
	if fd > 2 {
		f := os.NewFile(uintptr(fd), "status")
		_, _ = io.WriteString(f, line)
		_ = f.Close()
		return
	}
	_, _ = fmt.Fprintf(os.Stderr, "pixie %s: %s", Verb, line)
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// parse parses and validates the verb's arguments. It returns the options parsed so far even on
// error, so the status descriptor can still be used.
func parse(args []string) (Options, []string, error) {
	var o Options
	var policy string
	fs := flag.NewFlagSet(Verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&o.StatusFD, "status-fd", 0, "status pipe descriptor")
	fs.StringVar(&policy, "policy", "", "sandbox policy")
	fs.StringVar(&o.Cwd, "cwd", "", "working directory")
	fs.Var((*listFlag)(&o.Writable), "rw", "writable directory")
	fs.Var((*listFlag)(&o.Readable), "ro", "readable path")
	fs.Var((*listFlag)(&o.Hidden), "hide", "hidden directory")
	fs.IntVar(&o.MinABI, "min-abi", 0, "minimum Landlock ABI")
	fs.BoolVar(&o.Namespaces, "ns", false, "started in new PID and mount namespaces")
	fs.IntVar(&o.RulesetFD, "ruleset-fd", 0, "Landlock ruleset descriptor")
	var rulesetFlags uint64
	fs.Uint64Var(&rulesetFlags, "ruleset-flags", 0, "landlock_restrict_self flags")
	fs.BoolVar(&o.Mask, "mask", false, "hide the hidden directories under the full policy too")
	fs.BoolVar(&o.probe, "probe", false, "only check that the namespaces can be set up")
	if err := fs.Parse(args); err != nil {
		return o, nil, fmt.Errorf("usage: %w", err)
	}
	o.Policy = runtime.Policy(policy)
	argv := fs.Args()
	if o.StatusFD != 0 && o.StatusFD < 3 {
		return o, nil, fmt.Errorf("status descriptor %d is not above stderr", o.StatusFD)
	}
	if o.RulesetFD != 0 && (o.RulesetFD < 3 || o.RulesetFD == o.StatusFD) {
		return o, nil, fmt.Errorf("ruleset descriptor %d is not above stderr and apart from the status pipe", o.RulesetFD)
	}
	if rulesetFlags > 1<<31 {
		return o, nil, fmt.Errorf("ruleset flags %d out of range", rulesetFlags)
	}
	o.RulesetFlags = uint32(rulesetFlags)
	if !o.Policy.Valid() {
		return o, nil, fmt.Errorf("unknown sandbox policy %q", policy)
	}
	if o.MinABI != 0 && (o.MinABI < MinABI || o.MinABI > maxABI) {
		return o, nil, fmt.Errorf("minimum Landlock ABI %d is outside %d..%d", o.MinABI, MinABI, maxABI)
	}
	if len(argv) == 0 {
		return o, nil, errors.New("no program to run")
	}
	if !filepath.IsAbs(argv[0]) {
		return o, nil, fmt.Errorf("program %q is not an absolute path", argv[0])
	}
	if !filepath.IsAbs(o.Cwd) {
		return o, nil, fmt.Errorf("cwd %q is not an absolute path", o.Cwd)
	}
	o.Cwd = filepath.Clean(o.Cwd)
	for _, l := range []*[]string{&o.Writable, &o.Readable, &o.Hidden} {
		for i, p := range *l {
			if !filepath.IsAbs(p) {
				return o, nil, fmt.Errorf("path %q is not absolute", p)
			}
			(*l)[i] = filepath.Clean(p)
		}
	}
	for _, h := range o.Hidden {
		if h == "/" {
			return o, nil, errors.New("the root directory cannot be hidden")
		}
	}
	return o, argv, nil
}

// minABI is the ABI version o requires.
func (o Options) minABI() int {
	if o.MinABI > MinABI {
		return o.MinABI
	}
	return MinABI
}

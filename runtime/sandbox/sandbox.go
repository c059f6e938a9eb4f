// Package sandbox owns the re-exec side of the bash executor: the hidden `pixie __sandbox` verb
// that confines itself with Linux Landlock according to a session's sandbox policy and then
// replaces itself (execve) with the program it was asked to run, normally bash and a hook
// script. Because Landlock restricts the calling thread and everything it executes afterwards,
// the server never restricts itself: each run pays one extra exec of the pixie binary.
//
// Policies (docs/sandbox.md has the full table):
//
//   - read-only: read and execute everywhere (except Hidden paths); write only to /dev/null
//     and to the run's private temporary directory (Writable).
//   - workspace-write: as read-only, plus full write access beneath the session's cwd.
//   - full: no Landlock at all.
//
// The file-system policy needs Landlock ABI v3 (v1 cannot stop truncate(2) or open(O_TRUNC)),
// configured strictly: no best-effort downgrade. Where the kernel cannot enforce the requested
// policy the verb refuses to run the program and reports "unsupported" on its status pipe, which
// the parent turns into runtime.ErrUnsupported ("hook-script-unsupported: …"). It never runs a
// program unsandboxed in silence.
//
// The parent passes the write end of a pipe as StatusFD. The verb marks it close-on-exec at
// once, so a successful execve closes it with nothing written; any failure before execve writes
// one status line ("unsupported: …" or "error: …") there and exits with ExitFailure. The program
// that runs afterwards cannot reach the pipe, so it cannot forge a sandbox failure.
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
	// Hidden are directories whose contents the program may not read under read-only and
	// workspace-write (the server's data directory, which holds its tokens). Their names can
	// still be listed. Cwd may not lie inside one.
	Hidden []string
	// MinABI raises the required Landlock ABI version above MinABI; zero means MinABI.
	MinABI int
	// StatusFD is the descriptor of the status pipe's write end in the sandbox process
	// (normally 3, the first of exec.Cmd.ExtraFiles); zero means none, and failures are only
	// written to stderr.
	StatusFD int
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
	out = append(out, "--", program)
	return append(out, args...)
}

// DecodeStatus turns what the parent read from the status pipe into an error: nil when the
// pipe was closed empty (the program started), an error wrapping runtime.ErrUnsupported (code
// unavailable) when the kernel cannot enforce the policy, and an internal error otherwise.
func DecodeStatus(status []byte) error {
	s := strings.TrimSpace(string(status))
	switch {
	case s == "":
		return nil
	case strings.HasPrefix(s, statusUnsupported):
		return errs.Wrap(errs.Unavailable, runtime.ErrUnsupported, "%s: %s", runtime.ErrUnsupported, strings.TrimPrefix(s, statusUnsupported))
	default:
		return errs.New(errs.Internal, "sandbox: %s", strings.TrimPrefix(s, statusError))
	}
}

// unsupportedError marks a failure caused by missing kernel support.
type unsupportedError struct{ msg string }

func (e *unsupportedError) Error() string { return e.msg }

func unsupported(format string, args ...any) error {
	return &unsupportedError{msg: fmt.Sprintf(format, args...)}
}

// Main runs the verb with its arguments (those after Verb) and returns the exit status on
// failure; on success it does not return, because the process becomes the program.
func Main(args []string) int {
	o, argv, err := parse(args)
	if o.StatusFD > 2 {
		// Never let the status pipe reach the program.
		closeOnExec(o.StatusFD)
	}
	if err == nil {
		err = run(o, argv)
	}
	// run returns only on failure.
	report(o.StatusFD, err)
	return ExitFailure
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
	line = strings.ReplaceAll(line, "\n", " ") + "\n"
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
	if err := fs.Parse(args); err != nil {
		return o, nil, fmt.Errorf("usage: %w", err)
	}
	o.Policy = runtime.Policy(policy)
	argv := fs.Args()
	if o.StatusFD != 0 && o.StatusFD < 3 {
		return o, nil, fmt.Errorf("status descriptor %d is not above stderr", o.StatusFD)
	}
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
		if within(o.Cwd, h) {
			return o, nil, fmt.Errorf("cwd %s is inside the hidden directory %s", o.Cwd, h)
		}
	}
	return o, argv, nil
}

// within reports whether p is dir or lies beneath it (both clean and absolute).
func within(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// minABI is the ABI version o requires.
func (o Options) minABI() int {
	if o.MinABI > MinABI {
		return o.MinABI
	}
	return MinABI
}

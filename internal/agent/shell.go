package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/scratch"
	"github.com/pixie-dev/pixie/runtime"
)

// Limits of the shell tool.
const (
	// DefaultShellTimeout bounds one command when ShellOptions.Timeout is zero.
	DefaultShellTimeout = 60 * time.Second
	// MaxCommandSize caps one command, in bytes.
	MaxCommandSize = 64 << 10
	// shellScratchPrefix names the private directory that holds the commands' script files.
	shellScratchPrefix = "pixie-agent-"
)

// ShellOptions configure the shell tool.
type ShellOptions struct {
	// Exec runs the commands: the bash executor (runtime.KindScript), normally through a
	// runtime.Dispatcher.
	Exec runtime.Executor
	// Root is the commands' working directory (absolute); Policy their sandbox policy
	// (read-only, workspace-write or full).
	Root   string
	Policy runtime.Policy
	// Env are variables the commands get (DSH_PET_* values): in their environment only.
	Env map[string]string
	// Timeout bounds one command, within the Run's deadline; zero means DefaultShellTimeout.
	Timeout time.Duration
}

// Shell is the shell tool of one Run: Tool is what the model is offered; Close removes the
// private directory its script files live in.
type Shell struct {
	o    ShellOptions
	mu   sync.Mutex
	dir  *scratch.Dir
	runs int
}

// NewShell returns the shell tool over o. Each command is written to a private script file
// outside the root (the bash executor runs a script path) and run by o.Exec in o.Root under
// o.Policy, with o.Env in its environment.
func NewShell(o ShellOptions) (*Shell, error) {
	if o.Exec == nil {
		return nil, errs.New(errs.Unavailable, "agent: the shell tool needs the bash executor")
	}
	if !filepath.IsAbs(o.Root) {
		return nil, errs.New(errs.Invalid, "agent: the shell's root %q is not absolute", o.Root)
	}
	if !o.Policy.Valid() {
		return nil, errs.New(errs.Invalid, "agent: unknown sandbox policy %q", o.Policy)
	}
	if o.Timeout < 0 {
		return nil, errs.New(errs.Invalid, "agent: negative shell timeout")
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultShellTimeout
	}
	return &Shell{o: o}, nil
}

// Tool is the shell tool as offered to the model.
func (s *Shell) Tool() Tool {
	return Tool{
		Name: "shell",
		Description: fmt.Sprintf("Run a bash command in the root (%s) under the %s sandbox policy and get its exit status, stdout and stderr. "+
			"Each call is a fresh bash; the time limit is %s per command.", s.o.Root, s.o.Policy, s.o.Timeout),
		Schema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string","description":"the bash command or script"},"timeoutSeconds":{"type":"integer","description":"a shorter time limit for this command"}},"required":["command"],"additionalProperties":false}`),
		Run:    s.run,
	}
}

// Close removes the script files.
func (s *Shell) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir == nil {
		return nil
	}
	err := s.dir.Close()
	s.dir = nil
	return err
}

// script writes a command to a new private script file.
func (s *Shell) script(command string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir == nil {
		d, err := scratch.Open("", shellScratchPrefix, nil)
		if err != nil {
			return "", err
		}
		s.dir = d
	}
	s.runs++
	p := filepath.Join(s.dir.Path(), fmt.Sprintf("command-%d.sh", s.runs))
	return p, os.WriteFile(p, []byte(command+"\n"), 0o600)
}

func (s *Shell) run(ctx context.Context, input json.RawMessage) (string, error) {
	var in struct {
		Command        string `json:"command"`
		TimeoutSeconds int    `json:"timeoutSeconds"`
	}
	if err := decode(input, &in); err != nil {
		return "", err
	}
	switch {
	case strings.TrimSpace(in.Command) == "":
		return "", toolError("command is required")
	case len(in.Command) > MaxCommandSize:
		return "", toolError("the command is %d bytes; the limit is %d", len(in.Command), MaxCommandSize)
	case strings.ContainsRune(in.Command, 0):
		return "", toolError("the command holds a NUL byte")
	case in.TimeoutSeconds < 0:
		return "", toolError("timeoutSeconds must not be negative")
	}
	timeout := s.o.Timeout
	if in.TimeoutSeconds > 0 && time.Duration(in.TimeoutSeconds)*time.Second < timeout {
		timeout = time.Duration(in.TimeoutSeconds) * time.Second
	}
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left <= 0 {
			return "", toolError("no time is left in the run for a command")
		}
		if left < timeout {
			timeout = left
		}
	}
	ref, err := s.script(in.Command)
	if err != nil {
		return "", toolError("cannot write the command's script file: %s", errText(err))
	}
	defer os.Remove(ref)
	res, err := s.o.Exec.Run(ctx, runtime.Request{Kind: runtime.KindScript, Ref: ref, Cwd: s.o.Root, Policy: s.o.Policy,
		Vars: s.o.Env, Timeout: timeout})
	if err != nil {
		msg := msgOf(err)
		switch {
		case errors.Is(err, runtime.ErrTimeout):
			msg = fmt.Sprintf("the command ran past its time limit of %s and was killed", timeout)
		case errors.Is(err, runtime.ErrOutputTooLarge):
			msg = "the command wrote more output than the cap and was killed; write less (redirect to a file, use head)"
		case errors.Is(err, runtime.ErrUnsupported):
			msg = "the sandbox cannot run commands here: " + msg
		}
		if res.Stderr != "" {
			msg += "\nstderr:\n" + res.Stderr
		}
		return "", errors.New(msg)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "exit status %d", res.ExitCode)
	if res.Stdout != "" {
		b.WriteString("\nstdout:\n" + res.Stdout)
	}
	if res.Stderr != "" {
		b.WriteString("\nstderr:\n" + strings.TrimRight(res.Stderr, "\n"))
	}
	if res.Stdout == "" && res.Stderr == "" {
		b.WriteString(" (no output)")
	}
	if res.ExitCode != 0 {
		return b.String(), errors.New(b.String())
	}
	return b.String(), nil
}

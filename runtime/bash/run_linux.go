//go:build linux

package bash

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/sandbox"
)

func supported() error { return nil }

// stopReason is why the executor stopped a run.
type stopReason int

const (
	notStopped stopReason = iota
	stopTimeout
	stopCancel
	stopOverflow
)

// stopWait bounds how long a verb without namespaces gets to kill the run's processes after
// sandbox.SignalStop before its process group is killed outright.
const stopWait = 5 * time.Second

// run starts the sandbox verb (argv), feeds it the target, supervises it and turns the outcome
// into a Result or an error.
func (e *Executor) run(ctx context.Context, argv []string, env []string, req runtime.Request, timeout time.Duration, extra []*os.File) (runtime.Result, error) {
	overflow := make(chan struct{})
	var overflowOnce sync.Once
	stdout := &capWriter{max: e.maxOut, onOver: func() { overflowOnce.Do(func() { close(overflow) }) }}
	stderr := &capWriter{max: e.maxErr, note: "\n[stderr truncated]"}

	cmd := &exec.Cmd{
		Path:        argv[0],
		Args:        argv,
		Dir:         req.Cwd,
		Env:         env,
		Stdin:       strings.NewReader(req.Target),
		Stdout:      stdout,
		Stderr:      stderr,
		SysProcAttr: e.iso.Attr(),
		WaitDelay:   waitDelay,
	}
	statusR, w, err := os.Pipe()
	if err != nil {
		return failed, errs.Wrap(errs.Internal, err, "status pipe: %v", err)
	}
	defer statusR.Close()
	cmd.ExtraFiles = append([]*os.File{w}, extra...) // 3: the status pipe; 4: the ruleset
	defer w.Close()

	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The verb's parent-death signal fires when the thread that started it ends, not the
	// process: keep this goroutine on its thread until the run is over.
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return failed, errs.Wrap(errs.Unavailable, err, "starting the script: %v", err)
	}
	pid := cmd.Process.Pid
	// Our copy of the write end must go, or the read below never ends.
	_ = w.Close()
	status := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(statusR, 4096))
		status <- b
	}()

	exited := make(chan struct{})
	go func() {
		sandbox.WaitExited(pid)
		close(exited)
	}()

	reason := notStopped
	select {
	case <-exited:
	case <-runCtx.Done():
		reason = stopTimeout
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			reason = stopCancel
		}
	case <-overflow:
		reason = stopOverflow
	}
	if reason != notStopped {
		e.stop(pid, exited)
	}
	duration := time.Since(start)
	// The verb has exited but is not reaped yet, so its process group id cannot have been
	// reused: kill whatever is left in its group (nothing, normally: the verb has ended every
	// process of the run).
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	waitErr := cmd.Wait()
	statusMsg := <-status

	res := runtime.Result{ExitCode: -1, Stderr: stderr.String(), Duration: duration}
	signal, err := sandbox.DecodeStatus(statusMsg)
	if err != nil {
		return res, err
	}
	// Checked after Wait, when all output has been copied: a script that writes too much and
	// exits at once may end before the overflow is noticed above.
	if stdout.overflowed() {
		return res, errs.Wrap(errs.TooLarge, runtime.ErrOutputTooLarge, "script stdout is over the %d-byte cap", e.maxOut)
	}
	switch reason {
	case stopTimeout:
		return res, errs.Wrap(errs.Timeout, runtime.ErrTimeout, "script timed out after %s", timeout)
	case stopCancel:
		return res, errs.Wrap(errs.Unavailable, ctx.Err(), "script run cancelled")
	}
	if signal > 0 {
		return res, errs.Wrap(errs.Unprocessable, runtime.ErrTrap, "script was killed by signal %s", syscall.Signal(signal))
	}
	ps := cmd.ProcessState
	if ps == nil {
		return res, errs.Wrap(errs.Internal, waitErr, "script: %v", waitErr)
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		// The verb itself was killed, not by us (the kernel's OOM killer, or a script that
		// could signal it).
		return res, errs.Wrap(errs.Unprocessable, runtime.ErrTrap, "the script's sandbox was killed by signal %s", ws.Signal())
	}
	// A non-zero exit is an answer, not an error; ErrWaitDelay only means something still held
	// the output pipes when the verb ended.
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) && !errors.Is(waitErr, exec.ErrWaitDelay) {
		return res, errs.Wrap(errs.Internal, waitErr, "script: %v", waitErr)
	}
	res.ExitCode = ps.ExitCode()
	res.Stdout = trimBoundaryNewlines(stdout.String())
	return res, nil
}

// stop ends the run: SIGTERM to every process first when a grace period is configured (the verb
// passes it on), then every process killed: in namespaces by killing the verb (the kernel
// kills the rest of its PID namespace), otherwise by sandbox.SignalStop, after which the verb
// kills its descendants and exits. It returns once the verb has exited.
func (e *Executor) stop(pid int, exited <-chan struct{}) {
	if e.grace > 0 {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		t := time.NewTimer(e.grace)
		select {
		case <-exited:
		case <-t.C:
		}
		t.Stop()
	}
	sandbox.StopVerb(pid, e.iso, stopWait, exited)
}

// capWriter keeps the first max bytes written to it and drops the rest, calling onOver once
// when something is dropped; String then ends with note.
type capWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	max    int
	over   bool
	onOver func()
	note   string
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - w.buf.Len(); len(p) > room {
		w.buf.Write(p[:max(room, 0)])
		if !w.over {
			w.over = true
			if w.onOver != nil {
				w.onOver()
			}
		}
		return len(p), nil
	}
	w.buf.Write(p)
	return len(p), nil
}

func (w *capWriter) overflowed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.over
}

func (w *capWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.over {
		return w.buf.String() + w.note
	}
	return w.buf.String()
}

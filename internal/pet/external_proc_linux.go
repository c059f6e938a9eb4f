//go:build linux

package pet

import (
	"bufio"
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

// proc is one contained process: the sandbox verb (argv[0] …) starting the CLI. Its whole tree
// ends with it (sandbox.Isolation: the run's PID namespace, or the verb as a child subreaper).
type proc struct {
	argv  []string
	env   []string
	dir   string
	stdin string
	iso   sandbox.Isolation
	// line receives each stdout line (at most maxLine bytes; a longer one is cut there and
	// flagged cut).
	line func(b []byte, cut bool)
}

// procResult is how a contained process ended.
type procResult struct {
	exitCode int
	stderr   string // the tail
	// err wraps runtime.ErrTimeout (the time limit), runtime.ErrOutputTooLarge (stdout past
	// maxStream), runtime.ErrUnsupported (the sandbox cannot be enforced here), or reports a
	// cancelled run or a sandbox failure. The program's own exit status is not an error.
	err error
}

const (
	// procStopWait bounds how long a verb without namespaces gets to kill the run's processes
	// after sandbox.SignalStop before its process group is killed outright.
	procStopWait = 5 * time.Second
	// procWaitDelay bounds the wait for the output pipes once the verb has exited.
	procWaitDelay = 500 * time.Millisecond
)

// run starts the process and supervises it until it ends, ctx ends (its deadline is the time
// limit), or stdout passes maxStream; in the last two cases every process of the run is killed.
func (p proc) run(ctx context.Context) procResult {
	stderr := &tailWriter{max: maxStderrKept}
	cmd := &exec.Cmd{Path: p.argv[0], Args: p.argv, Dir: p.dir, Env: p.env, Stdin: strings.NewReader(p.stdin),
		Stderr: stderr, SysProcAttr: p.iso.Attr(), WaitDelay: procWaitDelay}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return procResult{exitCode: -1, err: errs.Wrap(errs.Internal, err, "stdout pipe: %v", err)}
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return procResult{exitCode: -1, err: errs.Wrap(errs.Internal, err, "status pipe: %v", err)}
	}
	defer statusR.Close()
	defer statusW.Close()
	cmd.ExtraFiles = []*os.File{statusW}
	// The verb's parent-death signal fires when the thread that started it ends: keep this
	// goroutine on its thread until the run is over.
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		return procResult{exitCode: -1, err: errs.Wrap(errs.Unavailable, err, "starting the sandbox: %v", err)}
	}
	pid := cmd.Process.Pid
	_ = statusW.Close()
	status := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(statusR, 4096))
		status <- b
	}()
	overflow := make(chan struct{})
	read := make(chan struct{})
	go func() {
		defer close(read)
		if !p.readLines(stdout) {
			close(overflow)
			_, _ = io.Copy(io.Discard, stdout)
		}
	}()
	exited := make(chan struct{})
	go func() {
		sandbox.WaitExited(pid)
		close(exited)
	}()
	var stopped error
	select {
	case <-exited:
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			stopped = errs.Wrap(errs.Timeout, runtime.ErrTimeout, "the run passed its time limit; every process of it was killed")
		} else {
			stopped = errs.Wrap(errs.Unavailable, ctx.Err(), "the run was cancelled")
		}
	case <-overflow:
		stopped = errs.Wrap(errs.TooLarge, runtime.ErrOutputTooLarge, "the CLI's event stream passed %d bytes; the run was stopped", maxStream)
	}
	if stopped != nil {
		sandbox.StopVerb(pid, p.iso, procStopWait, exited)
	}
	// The verb has exited but is not reaped: its group id cannot have been reused.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-read
	waitErr := cmd.Wait()
	res := procResult{exitCode: -1, stderr: stderr.String()}
	signal, serr := sandbox.DecodeStatus(<-status)
	switch {
	case stopped != nil:
		res.err = stopped
		return res
	case serr != nil:
		res.err = serr
		return res
	case signal > 0:
		res.err = errs.Wrap(errs.Unprocessable, runtime.ErrTrap, "the CLI was killed by signal %s", syscall.Signal(signal))
		return res
	}
	if cmd.ProcessState == nil {
		res.err = errs.Wrap(errs.Internal, waitErr, "the CLI: %v", waitErr)
		return res
	}
	res.exitCode = cmd.ProcessState.ExitCode()
	return res
}

// readLines feeds stdout to p.line line by line; false means stdout passed maxStream.
func (p proc) readLines(r io.Reader) bool {
	br := bufio.NewReaderSize(r, 64<<10)
	total := 0
	var buf []byte
	cut := false
	for {
		chunk, err := br.ReadSlice('\n')
		total += len(chunk)
		if total > maxStream {
			return false
		}
		if len(buf)+len(chunk) > maxLine {
			chunk = chunk[:max(0, maxLine-len(buf))]
			cut = true
		}
		buf = append(buf, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(buf) > 0 && p.line != nil {
			p.line(buf, cut)
		}
		buf, cut = buf[:0], false
		if err != nil {
			return true
		}
	}
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - 2*w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-w.max:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.buf
	if len(b) > w.max {
		b = b[len(b)-w.max:]
	}
	return strings.ToValidUTF8(string(b), "")
}

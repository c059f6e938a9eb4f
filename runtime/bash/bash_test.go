package bash

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/sandbox"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// TestMain lets the test binary play the pixie binary: the default Config re-executes
// os.Executable() with sandbox.Verb, which lands here.
func TestMain(m *testing.M) { testutil.Main(m) }

func newExecutor(t testing.TB, cfg Config) *Executor {
	t.Helper()
	e, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return e
}

// script writes a hook script into a fresh folder and returns its path.
func script(t testing.TB, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hook.sh")
	if err := os.WriteFile(p, []byte("#!/bin/bash\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// landlock reports whether the sandboxed policies can run here.
func landlock(t testing.TB) bool {
	t.Helper()
	err := sandbox.Probe()
	if err != nil {
		t.Logf("Landlock unavailable: %v", err)
	}
	return err == nil
}

// policies are the policies this machine can run scripts under.
func policies(t *testing.T) []runtime.Policy {
	if landlock(t) {
		return []runtime.Policy{runtime.PolicyFull, runtime.PolicyReadOnly, runtime.PolicyWorkspaceWrite}
	}
	return []runtime.Policy{runtime.PolicyFull}
}

func request(ref, cwd string, p runtime.Policy) runtime.Request {
	return runtime.Request{Kind: runtime.KindScript, Ref: ref, Cwd: cwd, Policy: p, Timeout: 20 * time.Second}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("PIXIE_TEST_SERVER_SECRET", "server-secret")
	t.Setenv("OPENAI_API_KEY", "sk-server")
	e := newExecutor(t, Config{})
	ref := script(t, `env; echo "pixie=$(command -v pixie)"; echo "first=${PATH%%:*}"; echo "pwd=$(pwd)"; echo tmp > "$TMPDIR/probe" && echo "tmp-ok"`)
	vars := map[string]string{
		abi.VarPoint:     abi.PointToolBefore,
		abi.VarToolName:  "bash",
		abi.VarToolArgs:  `{"command":"ls -la"}`,
		abi.VarAgent:     "root",
		abi.VarSessionID: "s-1",
		abi.VarTurn:      "3",
		abi.VarGateName:  "risky commands",
	}
	for _, p := range policies(t) {
		t.Run(string(p), func(t *testing.T) {
			cwd := t.TempDir()
			req := request(ref, cwd, p)
			req.Vars = vars
			req.HelperURL, req.HelperToken = "http://127.0.0.1:7777", "run-token"
			res, err := e.Run(context.Background(), req)
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("Run = %+v, %v", res, err)
			}
			env := map[string]string{}
			for _, line := range strings.Split(res.Stdout, "\n") {
				if k, v, ok := strings.Cut(line, "="); ok {
					env[k] = v
				}
			}
			for k, v := range vars {
				if env[k] != v {
					t.Errorf("%s = %q, want %q", k, env[k], v)
				}
			}
			if env[abi.VarURL] != req.HelperURL || env[abi.VarToken] != req.HelperToken {
				t.Errorf("PIXIE_URL/PIXIE_TOKEN = %q/%q", env[abi.VarURL], env[abi.VarToken])
			}
			if want := filepath.Join(e.binDir, "pixie"); env["pixie"] != want || env["first"] != e.binDir {
				t.Errorf("command -v pixie = %q (first PATH entry %q), want %q first", env["pixie"], env["first"], want)
			}
			if env["pwd"] != cwd {
				t.Errorf("pwd = %q, want %q", env["pwd"], cwd)
			}
			if !strings.Contains(res.Stdout, "tmp-ok") {
				t.Errorf("TMPDIR %q is not writable: %s", env["TMPDIR"], res.Stderr)
			}
			if env["TMPDIR"] == "" || env["TMPDIR"] == os.TempDir() {
				t.Errorf("TMPDIR = %q, want a private directory", env["TMPDIR"])
			} else if _, err := os.Stat(env["TMPDIR"]); !os.IsNotExist(err) {
				t.Errorf("the run's TMPDIR survived the run: %v", err)
			}
			for _, leak := range []string{"PIXIE_TEST_SERVER_SECRET", "OPENAI_API_KEY"} {
				if _, ok := env[leak]; ok {
					t.Errorf("the server's %s reached the script", leak)
				}
			}
			if strings.Contains(res.Stdout, "server-secret") || strings.Contains(res.Stdout, "sk-server") {
				t.Error("a server secret reached the script")
			}
		})
	}
}

func TestStdinIsTheTarget(t *testing.T) {
	e := newExecutor(t, Config{})
	big := strings.Repeat("0123456789abcdef", 64*1024) // 1 MiB, more than a pipe buffer
	tests := []struct {
		name, body, target, want string
	}{
		{"echo", "cat", "a tool result — with unicode ✓\nand two lines", "a tool result — with unicode ✓\nand two lines"},
		{"empty", "wc -c", "", "0"},
		{"large", "wc -c", big, strconv.Itoa(len(big))},
		{"not read", "echo ignored", big, "ignored"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := request(script(t, tt.body), t.TempDir(), runtime.PolicyFull)
			req.Target = tt.target
			res, err := e.Run(context.Background(), req)
			if err != nil || res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != tt.want {
				t.Fatalf("Run = %q exit %d, %v; want %q", res.Stdout, res.ExitCode, err, tt.want)
			}
		})
	}
}

func TestExitCodesPassThrough(t *testing.T) {
	e := newExecutor(t, Config{})
	tests := []struct {
		name   string
		body   string
		code   int
		stdout string
	}{
		{"continue", `echo 4100`, abi.ExitContinue, "4100"},
		{"skip", `exit 10`, abi.ExitSkip, ""},
		{"conclude", `printf '{"verdict":"stop","reason":"The form has no title line."}'; exit 11`, abi.ExitConclude, `{"verdict":"stop","reason":"The form has no title line."}`},
		{"error 3", `echo partial; exit 3`, 3, "partial"},
		{"error 1", `false`, 1, ""},
		{"error 255", `exit 255`, 255, ""},
		{"syntax error", `if then fi`, 2, ""},
	}
	for _, p := range policies(t) {
		for _, tt := range tests {
			t.Run(string(p)+"/"+tt.name, func(t *testing.T) {
				res, err := e.Run(context.Background(), request(script(t, tt.body), t.TempDir(), p))
				if err != nil {
					t.Fatalf("a script exit is not an executor error: %v", err)
				}
				if res.ExitCode != tt.code || res.Stdout != tt.stdout {
					t.Fatalf("exit %d stdout %q, want %d %q (stderr %q)", res.ExitCode, res.Stdout, tt.code, tt.stdout, res.Stderr)
				}
			})
		}
	}
}

func TestBoundaryNewlines(t *testing.T) {
	tests := []struct{ name, printf, want string }{
		{"trailing", `hello\n`, "hello"},
		{"both ends", `\n\nhello\n\n`, "hello"},
		{"crlf", `\r\nhi\r\n\r\n`, "hi"},
		{"inner kept", `a\n\nb\n`, "a\n\nb"},
		{"spaces kept", `  a b  \n`, "  a b  "},
		{"tabs kept", `\ta\t`, "\ta\t"},
		{"lone cr kept", `a\r`, "a\r"},
		{"only newlines", `\n\r\n\n`, ""},
		{"nothing", ``, ""},
	}
	e := newExecutor(t, Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := e.Run(context.Background(), request(script(t, "printf '"+tt.printf+"'"), t.TempDir(), runtime.PolicyFull))
			if err != nil || res.Stdout != tt.want {
				t.Fatalf("stdout %q, %v; want %q", res.Stdout, err, tt.want)
			}
		})
	}
}

func TestOutputCap(t *testing.T) {
	e := newExecutor(t, Config{})
	cwd := t.TempDir()
	t.Run("exactly 256 KB", func(t *testing.T) {
		res, err := e.Run(context.Background(), request(script(t, fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a", abi.MaxOutputSize)), cwd, runtime.PolicyFull))
		if err != nil || len(res.Stdout) != abi.MaxOutputSize {
			t.Fatalf("len %d, %v", len(res.Stdout), err)
		}
	})
	for name, body := range map[string]string{
		"one byte over": fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a", abi.MaxOutputSize+1),
		"endless":       "yes",
	} {
		t.Run(name, func(t *testing.T) {
			res, err := e.Run(context.Background(), request(script(t, body), cwd, runtime.PolicyFull))
			if !errors.Is(err, runtime.ErrOutputTooLarge) || errs.CodeOf(err) != errs.TooLarge {
				t.Fatalf("err = %v (code %s), want ErrOutputTooLarge", err, errs.CodeOf(err))
			}
			if res.Stdout != "" {
				t.Errorf("a failed run returned %d bytes of stdout", len(res.Stdout))
			}
		})
	}
	t.Run("configured cap", func(t *testing.T) {
		small := newExecutor(t, Config{MaxOutput: 4})
		if res, err := small.Run(context.Background(), request(script(t, "printf 1234"), cwd, runtime.PolicyFull)); err != nil || res.Stdout != "1234" {
			t.Fatalf("4 bytes under a 4-byte cap: %q, %v", res.Stdout, err)
		}
		if _, err := small.Run(context.Background(), request(script(t, "printf 12345"), cwd, runtime.PolicyFull)); !errors.Is(err, runtime.ErrOutputTooLarge) {
			t.Fatalf("5 bytes under a 4-byte cap: %v", err)
		}
	})
}

func TestStderrCap(t *testing.T) {
	e := newExecutor(t, Config{MaxStderr: 10})
	res, err := e.Run(context.Background(), request(script(t, "printf 0123456789abcdef >&2; echo ok"), t.TempDir(), runtime.PolicyFull))
	if err != nil || res.Stdout != "ok" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if res.Stderr != "0123456789\n[stderr truncated]" {
		t.Errorf("stderr = %q", res.Stderr)
	}
}

// escapes starts one process, named $MARK, in each way a process can try to outlive its
// script: in the background, in a background subshell, both ends of a background pipeline,
// under setsid, double-forked (its parent exits at once), under nohup, and as a daemon (setsid,
// fds closed, double fork). Each touches $TMPDIR/started.N first; the script waits for all of
// them, prints "ready", then runs what follows.
const escapes = `m() { exec bash -c ': > "$TMPDIR/started.$1"; exec -a "$MARK" sleep 1000' x "$1"; }
m 1 &
( m 2 & )
m 3 | m 4 &
setsid bash -c "$(declare -f m); m 5" &
( ( m 6 & ) & )
nohup bash -c "$(declare -f m); m 7" >/dev/null 2>&1 &
setsid bash -c "exec </dev/null >/dev/null 2>&1; $(declare -f m); ( m 8 & ) " &
for i in 1 2 3 4 5 6 7 8; do while [ ! -e "$TMPDIR/started.$i" ]; do sleep 0.01; done; done
echo ready
`

// escapeCount is how many processes escapes starts.
const escapeCount = 8

// mark returns a name no other process has, for $MARK.
func mark(t *testing.T) string {
	return fmt.Sprintf("pixie-escape-%d-%d", os.Getpid(), time.Now().UnixNano())
}

// marked lists the live processes (anywhere on the machine, whatever their namespace) whose
// name is m.
func marked(m string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		if arg0, _, _ := strings.Cut(string(raw), "\x00"); arg0 == m && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// requireNoneLeft fails unless every process named m is gone within a few seconds.
func requireNoneLeft(t *testing.T, m string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := marked(m)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				_ = killPid(pid)
			}
			t.Fatalf("%d processes (%v) still run after the run ended", len(left), left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie waiting for init counts as dead).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// runEscapes runs escapes followed by then, and returns the Run's outcome once it has seen every
// escaped process alive while the run went on (so the test cannot pass by starting nothing).
// release, when set, is called after they were seen (it lets the script end).
func runEscapes(t *testing.T, e *Executor, req runtime.Request, m string, release func()) (runtime.Result, error) {
	t.Helper()
	req.Vars = map[string]string{"MARK": m}
	type ran struct {
		res runtime.Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := e.Run(context.Background(), req)
		done <- ran{res, err}
	}()
	deadline := time.Now().Add(15 * time.Second)
	for len(marked(m)) < escapeCount {
		select {
		case r := <-done:
			t.Fatalf("the run ended before all %d escapes ran (%d seen): %+v, %v", escapeCount, len(marked(m)), r.res, r.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d escaped processes started", len(marked(m)), escapeCount)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if release != nil {
		release()
	}
	r := <-done
	return r.res, r.err
}

// isolations returns executors for each way this machine can contain a run: with namespaces
// (when Detect found them) and, always, without (the verb as a subreaper).
func isolations(t *testing.T, cfg Config) map[string]*Executor {
	e := newExecutor(t, cfg)
	out := map[string]*Executor{}
	if e.Isolation().Namespaces {
		out["namespaces"] = e
	} else {
		t.Logf("no namespaces here: %s", e.Isolation().Reason)
	}
	sub := newExecutor(t, cfg)
	sub.iso = sandbox.Isolation{Reason: "forced by the test"}
	out["subreaper"] = sub
	return out
}

func TestEveryEscapedProcessEndsWithItsScript(t *testing.T) {
	for name, e := range isolations(t, Config{}) {
		for _, p := range policies(t) {
			t.Run(name+"/"+string(p), func(t *testing.T) {
				m, cwd := mark(t), t.TempDir()
				// The script ends (exit 10) once the test has seen the escapes and dropped ./go.
				ref := script(t, escapes+`while [ ! -e go ]; do sleep 0.01; done; exit 10`)
				res, err := runEscapes(t, e, request(ref, cwd, p), m, func() {
					if err := os.WriteFile(filepath.Join(cwd, "go"), nil, 0o644); err != nil {
						t.Error(err)
					}
				})
				if err != nil || res.ExitCode != abi.ExitSkip || res.Stdout != "ready" {
					t.Fatalf("Run = %+v, %v", res, err)
				}
				requireNoneLeft(t, m)
			})
		}
	}
}

func TestTimeoutEndsEveryProcess(t *testing.T) {
	type variant struct {
		policy runtime.Policy
		grace  time.Duration
	}
	// The last policy (workspace-write when Landlock is here) and full, with and without a
	// grace period: each run waits out its time limit, so they run in parallel.
	ps := policies(t)
	variants := []variant{{runtime.PolicyFull, 0}, {runtime.PolicyFull, 50 * time.Millisecond}}
	if last := ps[len(ps)-1]; last != runtime.PolicyFull {
		variants = append(variants, variant{last, 0})
	}
	for _, v := range variants {
		for name, e := range isolations(t, Config{KillGrace: v.grace}) {
			t.Run(fmt.Sprintf("%s/%s/grace %s", name, v.policy, v.grace), func(t *testing.T) {
				t.Parallel()
				m := mark(t)
				req := request(script(t, escapes+"sleep 1000"), t.TempDir(), v.policy)
				// Long enough for a slow (race-instrumented, loaded) machine to start everything.
				req.Timeout = 4 * time.Second
				_, err := runEscapes(t, e, req, m, nil)
				if !errors.Is(err, runtime.ErrTimeout) || errs.CodeOf(err) != errs.Timeout {
					t.Fatalf("err = %v (code %s), want ErrTimeout", err, errs.CodeOf(err))
				}
				requireNoneLeft(t, m)
			})
		}
	}
}

func TestCancelEndsEveryProcess(t *testing.T) {
	e := newExecutor(t, Config{})
	m := mark(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := request(script(t, escapes+"sleep 1000"), t.TempDir(), runtime.PolicyFull)
	req.Vars = map[string]string{"MARK": m}
	go func() {
		for len(marked(m)) < escapeCount {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	_, err := e.Run(ctx, req)
	if !errors.Is(err, context.Canceled) || errors.Is(err, runtime.ErrTimeout) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	requireNoneLeft(t, m)

	// A caller's deadline is a timeout too.
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := e.Run(ctx, request(script(t, "sleep 1000"), t.TempDir(), runtime.PolicyFull)); !errors.Is(err, runtime.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
}

func TestEscapedChildDoesNotHangTheRun(t *testing.T) {
	e := newExecutor(t, Config{})
	// A setsid child that keeps stdout open: the run ends when the script does, and the child
	// with it.
	m := mark(t)
	ref := script(t, `setsid bash -c ': > "$TMPDIR/started"; exec -a "$MARK" sleep 1000' &
while [ ! -e "$TMPDIR/started" ]; do sleep 0.01; done
echo done`)
	req := request(ref, t.TempDir(), runtime.PolicyFull)
	req.Vars = map[string]string{"MARK": m}
	start := time.Now()
	res, err := e.Run(context.Background(), req)
	if err != nil || res.ExitCode != 0 || res.Stdout != "done" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Fatalf("the run waited %s for a pipe held by an escaped child", elapsed)
	}
	requireNoneLeft(t, m)
}

func killPid(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

func TestKilledBySignalIsAnError(t *testing.T) {
	e := newExecutor(t, Config{})
	for _, p := range policies(t) {
		_, err := e.Run(context.Background(), request(script(t, "kill -KILL $$"), t.TempDir(), p))
		if !errors.Is(err, runtime.ErrTrap) || !strings.Contains(err.Error(), "killed by signal killed") {
			t.Fatalf("%s: err = %v, want ErrTrap", p, err)
		}
	}
}

func TestRequestValidation(t *testing.T) {
	e := newExecutor(t, Config{})
	ref, cwd := script(t, "echo ran"), t.TempDir()
	tests := []struct {
		name     string
		mutate   func(*runtime.Request)
		sentinel error
		code     errs.Code
		message  string
	}{
		{"no cwd", func(r *runtime.Request) { r.Cwd = "" }, runtime.ErrPolicyRequired, errs.Invalid, "Session sandbox policy and cwd are required"},
		{"no policy", func(r *runtime.Request) { r.Policy = "" }, runtime.ErrPolicyRequired, errs.Invalid, "Session sandbox policy and cwd are required"},
		{"unknown policy", func(r *runtime.Request) { r.Policy = "danger" }, nil, errs.Invalid, `unknown sandbox policy "danger"`},
		{"relative cwd", func(r *runtime.Request) { r.Cwd = "project" }, nil, errs.Invalid, "not an absolute path"},
		{"missing cwd", func(r *runtime.Request) { r.Cwd = filepath.Join(cwd, "gone") }, nil, errs.Invalid, "is not a directory"},
		{"missing script", func(r *runtime.Request) { r.Ref = filepath.Join(cwd, "nope.sh") }, runtime.ErrNotFound, errs.NotFound, "does not exist"},
		{"relative script", func(r *runtime.Request) { r.Ref = "hook.sh" }, nil, errs.Invalid, "not absolute"},
		{"directory script", func(r *runtime.Request) { r.Ref = cwd }, nil, errs.Invalid, "not a regular file"},
		{"module kind", func(r *runtime.Request) { r.Kind = runtime.KindModule }, nil, errs.Invalid, "runs script rules"},
		{"bad variable name", func(r *runtime.Request) { r.Vars = map[string]string{"A=B": "x"} }, nil, errs.Invalid, "not valid"},
		{"reserved PATH", func(r *runtime.Request) { r.Vars = map[string]string{"PATH": "/evil"} }, nil, errs.Invalid, "set by the executor"},
		{"reserved token", func(r *runtime.Request) { r.Vars = map[string]string{abi.VarToken: "x"} }, nil, errs.Invalid, "set by the executor"},
		{"NUL in value", func(r *runtime.Request) { r.Vars = map[string]string{abi.VarTurn: "1\x002"} }, nil, errs.Invalid, "NUL"},
		{"negative timeout", func(r *runtime.Request) { r.Timeout = -time.Second }, nil, errs.Invalid, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := request(ref, cwd, runtime.PolicyFull)
			tt.mutate(&req)
			res, err := e.Run(context.Background(), req)
			if err == nil {
				t.Fatal("no error")
			}
			if res.ExitCode != -1 {
				t.Errorf("ExitCode = %d with an error, want -1", res.ExitCode)
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Errorf("err = %v, want it to wrap %v", err, tt.sentinel)
			}
			if errs.CodeOf(err) != tt.code || !strings.Contains(err.Error(), tt.message) {
				t.Errorf("err = %q (code %s), want code %s and %q", err, errs.CodeOf(err), tt.code, tt.message)
			}
		})
	}
	// The exact message the spec documents.
	_, err := e.Run(context.Background(), runtime.Request{Ref: ref})
	if err == nil || err.Error() != "Session sandbox policy and cwd are required" {
		t.Fatalf("err = %v", err)
	}
}

func TestReadOnlyDeniesWrites(t *testing.T) {
	e := newExecutor(t, Config{})
	cwd := t.TempDir()
	if err := os.WriteFile(filepath.Join(cwd, "notes.txt"), []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	ref := script(t, `cat notes.txt; echo; echo x > file && echo wrote; echo y > notes.txt; exit 0`)
	res, err := e.Run(context.Background(), request(ref, cwd, runtime.PolicyReadOnly))
	if !landlock(t) {
		// Fail closed: the script did not run, and the error says why.
		t.Log("this machine has no usable Landlock: asserting the fail-closed path")
		if !errors.Is(err, runtime.ErrUnsupported) || !strings.HasPrefix(err.Error(), "hook-script-unsupported") {
			t.Fatalf("err = %v, want hook-script-unsupported", err)
		}
	} else {
		t.Logf("Landlock ABI v%d: asserting the write is denied", sandbox.KernelABI())
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("Run = %+v, %v", res, err)
		}
		if res.Stdout != "original" {
			t.Errorf("stdout %q: the script could not read, or its write was not denied", res.Stdout)
		}
		if !strings.Contains(res.Stderr, "Permission denied") {
			t.Errorf("stderr %q, want the denied writes", res.Stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(cwd, "file")); !os.IsNotExist(err) {
		t.Errorf("file exists after a read-only run (%v)", err)
	}
	if b, _ := os.ReadFile(filepath.Join(cwd, "notes.txt")); string(b) != "original" {
		t.Errorf("notes.txt = %q after a read-only run", b)
	}
}

func TestUnsupportedFailsClosed(t *testing.T) {
	// Require a Landlock ABI newer than go-landlock knows the kernel offers here, so the real
	// sandbox verb meets a kernel that cannot enforce its policy.
	if sandbox.KernelABI() >= 11 {
		t.Skip("the kernel offers Landlock ABI v11; no higher version can be required")
	}
	e := newExecutor(t, Config{MinLandlockABI: 11})
	cwd := t.TempDir()
	for _, p := range []runtime.Policy{runtime.PolicyReadOnly, runtime.PolicyWorkspaceWrite} {
		t.Run(string(p), func(t *testing.T) {
			res, err := e.Run(context.Background(), request(script(t, "echo ran > marker; echo ran"), cwd, p))
			if !errors.Is(err, runtime.ErrUnsupported) || errs.CodeOf(err) != errs.Unavailable || !strings.HasPrefix(err.Error(), "hook-script-unsupported: ") {
				t.Fatalf("err = %v (code %s), want hook-script-unsupported", err, errs.CodeOf(err))
			}
			if res.Stdout != "" {
				t.Errorf("stdout %q", res.Stdout)
			}
			if _, err := os.Stat(filepath.Join(cwd, "marker")); !os.IsNotExist(err) {
				t.Fatal("the script ran although the sandbox could not be enforced")
			}
		})
	}
	// The full policy needs no Landlock and still runs.
	if res, err := e.Run(context.Background(), request(script(t, "echo ran"), cwd, runtime.PolicyFull)); err != nil || res.Stdout != "ran" {
		t.Fatalf("full: %+v, %v", res, err)
	}
}

func TestWorkspaceWrite(t *testing.T) {
	if !landlock(t) {
		t.Skip("no Landlock here; TestReadOnlyDeniesWrites covers the fail-closed path")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	e := newExecutor(t, Config{})
	cwd, outside := t.TempDir(), t.TempDir()
	homeFile := filepath.Join(home, fmt.Sprintf(".pixie-sandbox-test-%d", os.Getpid()))
	t.Cleanup(func() { _ = os.Remove(homeFile) })
	ref := script(t, `
mkdir -p out && echo built > out/result && mv out/result out/final && echo cwd-ok
echo t > "$TMPDIR/scratch" && echo tmp-ok
echo x > `+outside+`/f || echo outside-denied
echo x > `+homeFile+` || echo home-denied
exit 0`)
	res, err := e.Run(context.Background(), request(ref, cwd, runtime.PolicyWorkspaceWrite))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if want := "cwd-ok\ntmp-ok\noutside-denied\nhome-denied"; res.Stdout != want {
		t.Errorf("stdout %q, want %q (stderr %q)", res.Stdout, want, res.Stderr)
	}
	if b, err := os.ReadFile(filepath.Join(cwd, "out", "final")); err != nil || string(b) != "built\n" {
		t.Errorf("out/final = %q, %v", b, err)
	}
	for _, p := range []string{filepath.Join(outside, "f"), homeFile} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s was written by a workspace-write run", p)
		}
	}
}

func TestHiddenDataDirectory(t *testing.T) {
	if !landlock(t) {
		t.Skip("no Landlock here")
	}
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "admin-token"), []byte("tok-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	scripts := filepath.Join(data, "commands")
	if err := os.Mkdir(scripts, 0o755); err != nil {
		t.Fatal(err)
	}
	ref := filepath.Join(scripts, "peek.sh")
	if err := os.WriteFile(ref, []byte("cat "+data+"/admin-token || echo denied\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	e := newExecutor(t, Config{Hidden: []string{data}})
	for _, p := range []runtime.Policy{runtime.PolicyReadOnly, runtime.PolicyWorkspaceWrite} {
		res, err := e.Run(context.Background(), request(ref, t.TempDir(), p))
		if err != nil || res.Stdout != "denied" {
			t.Errorf("%s: Run = %+v, %v; want the token unreadable and the script itself readable", p, res, err)
		}
	}
}

func TestNew(t *testing.T) {
	if _, err := New(context.Background(), Config{Bash: "no-such-bash-here"}); !errors.Is(err, runtime.ErrUnsupported) {
		t.Errorf("missing bash: %v", err)
	}
	if _, err := New(context.Background(), Config{PixieBinDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "pixie") {
		t.Errorf("helper directory without pixie: %v", err)
	}
	if _, err := New(context.Background(), Config{MaxOutput: -1}); errs.CodeOf(err) != errs.Invalid {
		t.Errorf("negative cap: %v", err)
	}
	if _, err := New(context.Background(), Config{Hidden: []string{"data"}}); errs.CodeOf(err) != errs.Invalid {
		t.Errorf("relative hidden directory: %v", err)
	}
	// A configured helper directory is used as given and not removed by Close.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pixie"), []byte("#!/bin/sh\necho helper\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	e, err := New(context.Background(), Config{PixieBinDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Run(context.Background(), request(script(t, "pixie"), t.TempDir(), runtime.PolicyFull))
	if err != nil || res.Stdout != "helper" {
		t.Errorf("Run = %+v, %v", res, err)
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pixie")); err != nil {
		t.Errorf("Close removed a configured helper directory: %v", err)
	}
	// The private one is removed.
	e, err = New(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	priv := e.binDir
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(priv); !os.IsNotExist(err) {
		t.Errorf("Close left %s", priv)
	}
}

// TestRunsStartTheSandboxInit: with the sandbox init program beside the binary (testutil.Main
// builds it beside the test binary, as make build does beside bin/pixie), the executor starts
// it for every run, and bash is its child; told another sandbox command, it starts that one.
func TestRunsStartTheSandboxInit(t *testing.T) {
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		t.Fatal(err)
	}
	init := filepath.Join(filepath.Dir(self), sandbox.InitName)
	parent := script(t, `tr '\0' '\n' < /proc/$PPID/cmdline | head -n 1`)
	for _, tt := range []struct {
		name    string
		sandbox []string
		want    string
	}{
		{"init beside the binary", nil, init},
		{"this binary's verb", []string{self, sandbox.Verb}, self},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newExecutor(t, Config{Sandbox: tt.sandbox})
			command, slow := e.Sandbox()
			if slow != "" || command[0] != tt.want {
				t.Fatalf("Sandbox() = %q, %q; want %s", command, slow, tt.want)
			}
			res, err := e.Run(context.Background(), request(parent, t.TempDir(), runtime.PolicyFull))
			if err != nil || res.Stdout != tt.want {
				t.Fatalf("bash's parent is %q (%v), want %s", res.Stdout, err, tt.want)
			}
		})
	}
}

func TestTrimBoundaryNewlines(t *testing.T) {
	for in, want := range map[string]string{
		"":                "",
		"\n":              "",
		"\r\n":            "",
		"a":               "a",
		"\n\r\na\r\n\n":   "a",
		"a\r":             "a\r",
		"\ra\n":           "\ra",
		"a\n\nb":          "a\n\nb",
		" \n a \n ":       " \n a \n ",
		"{\"k\":1}\r\n":   "{\"k\":1}",
		"\n\n\n\nx\n\n\n": "x",
	} {
		if got := trimBoundaryNewlines(in); got != want {
			t.Errorf("trimBoundaryNewlines(%q) = %q, want %q", in, got, want)
		}
	}
}

func ExampleExecutor_Run() {
	e, err := New(context.Background(), Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close(context.Background())
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	ref := filepath.Join(dir, "conclude.sh")
	_ = os.WriteFile(ref, []byte(`[ "$PIXIE_POINT" = tool-before ] || exit 10
printf '{"verdict":"stop","reason":"%s is not allowed"}\n' "$PIXIE_TOOL_NAME"
exit 11
`), 0o755)
	res, err := e.Run(context.Background(), runtime.Request{
		Kind:   runtime.KindScript,
		Ref:    ref,
		Cwd:    dir,
		Policy: runtime.PolicyFull,
		Vars:   map[string]string{abi.VarPoint: abi.PointToolBefore, abi.VarToolName: "rm"},
	})
	fmt.Println(res.ExitCode, res.Stdout, err)
	// Output:
	// 11 {"verdict":"stop","reason":"rm is not allowed"} <nil>
}

func BenchmarkRunScriptExit11(b *testing.B) {
	e := newExecutor(b, Config{})
	ref := script(b, `printf '{"verdict":"pass","note":"%s"}' "$PIXIE_GATE_NAME"; exit 11`)
	cwd := b.TempDir()
	ps := []runtime.Policy{runtime.PolicyFull}
	if landlock(b) {
		ps = append(ps, runtime.PolicyReadOnly)
	}
	for _, p := range ps {
		b.Run(string(p), func(b *testing.B) {
			req := request(ref, cwd, p)
			req.Target = "rm -rf /"
			req.Vars = map[string]string{abi.VarGateName: "bench", abi.VarPoint: abi.PointToolBefore}
			for b.Loop() {
				res, err := e.Run(context.Background(), req)
				if err != nil || res.ExitCode != abi.ExitConclude {
					b.Fatalf("Run = %+v, %v", res, err)
				}
			}
		})
	}
}

// The spec's example scripts that do not call the helper, unchanged, under read-only.
func TestSpecExamples(t *testing.T) {
	policy := runtime.PolicyFull
	if landlock(t) {
		policy = runtime.PolicyReadOnly
	}
	e := newExecutor(t, Config{})
	long := strings.Repeat("match: x\n", 500)
	subtitles := "1\n00:00:01,000 --> 00:00:02,000\nHi\n\n2\n00:00:03,000 --> 00:00:04,000\nYo\n"
	tests := []struct {
		name, body, tool, target string
		code                     int
		stdout                   string
		git                      bool
	}{
		{"only-search-tools skip", `case "$PIXIE_TOOL_NAME" in grep|glob|web_search) ;; *) exit 10 ;; esac
size=$(wc -c)
[ "$size" -gt 4000 ] || exit 10
echo "$size"`, "bash", long, abi.ExitSkip, "", false},
		{"only-search-tools long", `case "$PIXIE_TOOL_NAME" in grep|glob|web_search) ;; *) exit 10 ;; esac
size=$(wc -c)
[ "$size" -gt 4000 ] || exit 10
echo "$size"`, "grep", long, 0, strconv.Itoa(len(long)), false},
		{"measure-subtitle", `text=$(cat)
lines=$(printf '%s' "$text" | grep -c -- '-->' || true)
printf '{"cues":%d,"bytes":%d}\n' "$lines" "${#text}"`, "", subtitles, 0, fmt.Sprintf(`{"cues":2,"bytes":%d}`, len(subtitles)-1), false},
		{"list-changed-files", `git status --porcelain 2>/dev/null | head -50`, "", "", 0, "?? new.txt", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cwd := t.TempDir()
			if tt.git {
				if _, err := exec.LookPath("git"); err != nil {
					t.Skip("no git")
				}
				if out, err := exec.Command("git", "-C", cwd, "init", "-q").CombinedOutput(); err != nil {
					t.Fatalf("git init: %v %s", err, out)
				}
				if err := os.WriteFile(filepath.Join(cwd, "new.txt"), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			req := request(script(t, tt.body), cwd, policy)
			req.Target = tt.target
			req.Vars = map[string]string{abi.VarToolName: tt.tool}
			res, err := e.Run(context.Background(), req)
			if err != nil || res.ExitCode != tt.code || res.Stdout != tt.stdout {
				t.Fatalf("Run = exit %d stdout %q stderr %q, %v; want %d %q", res.ExitCode, res.Stdout, res.Stderr, err, tt.code, tt.stdout)
			}
		})
	}
}

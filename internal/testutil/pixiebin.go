// Package testutil holds helpers shared by tests across packages: building the real pixie
// binary and the real WASM guests, finding the module root, and starting a real server process.
package testutil

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/runtime/sandbox"
)

// Root returns the module root (the directory holding go.mod).
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// PixieBinary builds ./cmd/pixie once per test process, with the programs that ship beside it
// (BuildCompanions), and returns the binary's path.
func PixieBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pixie-testbin-") // not pixie-bin-: that is the bash executor's
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "pixie")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/pixie")
		cmd.Dir = Root()
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build ./cmd/pixie: %v\n%s", err, out)
			return
		}
		binErr = BuildCompanions(dir)
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// Main is the TestMain of a package whose tests start real servers or executors. It plays the
// pixie binary's sandbox verb when the test binary is started as the sandbox (the bash
// executor re-executes os.Executable() with sandbox.Verb unless told another binary, and
// probes it once at start): without that, the child ran the package's whole test suite until
// the probe's 10 s timeout killed it, leaving its temp folders behind, and the executor ran
// without namespaces. Otherwise it runs the tests, then removes what PixieBinary built for
// them (built once per test process, into a folder no test's cleanup owns), and exits with the
// tests' code.
//
// Before the tests it builds the sandbox init program beside the test binary, so that the bash
// executors the tests make start it (sandbox.FindInit), as pixie serve starts the one make
// build puts beside bin/pixie; the test binary itself then plays the verb only for executors
// told to (bash.Config.Sandbox) and for Detect's probe of them.
func Main(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.Verb {
		os.Exit(sandbox.Main(os.Args[2:]))
	}
	if err := buildInitBesideTest(); err != nil {
		fmt.Fprintln(os.Stderr, "testutil.Main:", err)
		os.Exit(1)
	}
	code := m.Run()
	RemoveBuilt()
	os.Exit(code)
}

// LonePixie returns the test pixie binary (PixieBinary) alone in a folder of its own, without
// the programs that ship beside it: what `go build ./cmd/pixie` makes, which starts the slow
// paths (runs start the pixie binary's sandbox verb; command hooks run pixie hook). It is a
// hard link where the file system allows one, else a copy; the test's cleanup removes it.
func LonePixie(t testing.TB) string {
	t.Helper()
	bin := PixieBinary(t)
	p := filepath.Join(t.TempDir(), "pixie")
	if err := os.Link(bin, p); err != nil {
		raw, err := os.ReadFile(bin)
		if err == nil {
			err = os.WriteFile(p, raw, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// companions are the programs make build puts beside bin/pixie. They are built without cgo
// (as make build does): static binaries start faster, and they need no C.
var companions = []string{"./cmd/" + sandbox.InitName, "./cmd/pixie-hook"}

// BuildCompanions builds the programs that ship beside the pixie binary into dir: the sandbox
// init (cmd/pixie-sandbox) and the command hook adapter (cmd/pixie-hook).
func BuildCompanions(dir string) error { return buildInto(dir, companions...) }

func buildInto(dir string, pkgs ...string) error {
	cmd := exec.Command("go", append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	cmd.Dir = Root()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", strings.Join(pkgs, " "), err, out)
	}
	return nil
}

// buildInitBesideTest builds the sandbox init program into the test binary's folder (go test's
// own, removed after the run).
func buildInitBesideTest() error {
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		return fmt.Errorf("locating the test binary: %w", err)
	}
	return buildInto(filepath.Dir(self), companions[0])
}

// RemoveBuilt removes the binary PixieBinary built, if it did; a TestMain that cannot use Main
// calls it after m.Run.
func RemoveBuilt() {
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
}

// FreeAddr returns a free 127.0.0.1 address.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Proc is a running `pixie serve`.
type Proc struct {
	Cmd    *exec.Cmd
	Addr   string
	Home   string
	URL    string
	Stdout *lockedBuffer
	Stderr *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// StartServer starts `pixie serve --home home --addr <free>` with extra args and env, and waits
// until /healthz answers. The process is killed at test end if still running.
func StartServer(t testing.TB, home string, env []string, args ...string) *Proc {
	t.Helper()
	return StartServerOf(t, PixieBinary(t), home, env, args...)
}

// StartServerOf is StartServer with another pixie binary (LonePixie).
func StartServerOf(t testing.TB, bin, home string, env []string, args ...string) *Proc {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p, taken := startServer(t, bin, FreeAddr(t), home, env, args...)
		if p != nil {
			return p
		}
		// Another process (a test package running beside this one) took the free port between
		// FreeAddr and the server's listen: a new port.
		if !taken || attempt == 3 {
			t.Fatalf("server could not listen (attempt %d)", attempt)
		}
	}
}

// StartServerAt is StartServer on a given address (for servers that must know each other's
// addresses before they start).
func StartServerAt(t testing.TB, addr, home string, env []string, args ...string) *Proc {
	t.Helper()
	p, taken := startServer(t, PixieBinary(t), addr, home, env, args...)
	if p == nil {
		t.Fatalf("server could not listen on %s: the port is taken (%v)", addr, taken)
	}
	return p
}

// listening is what `pixie serve` prints once it listens on addr.
func listening(addr string) string { return "is listening on http://" + addr }

// startServer starts the server and waits until /healthz answers and the server says it
// listens on addr: a /healthz answer alone could be another process's on a port taken in the
// meantime. It answers nil and true when the port was taken (the server has exited).
func startServer(t testing.TB, bin, addr, home string, env []string, args ...string) (*Proc, bool) {
	t.Helper()
	p := &Proc{Addr: addr, Home: home, URL: "http://" + addr, Stdout: &lockedBuffer{}, Stderr: &lockedBuffer{}}
	p.Cmd = exec.Command(bin, append([]string{"serve", "--home", home, "--addr", addr}, args...)...)
	p.Cmd.Env = append(cleanEnv(), env...)
	p.Cmd.Stdout = p.Stdout
	p.Cmd.Stderr = p.Stderr
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.Cmd.ProcessState == nil {
			_ = p.Cmd.Process.Kill()
			_, _ = p.Cmd.Process.Wait()
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(p.Stderr.String(), "the port is already in use") {
			// Let it exit (it holds the home's store until then) before another try.
			done := make(chan struct{})
			go func() { _ = p.Cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("server on a taken port did not exit\nstderr:\n%s", p.Stderr)
			}
			return nil, true
		}
		resp, err := http.Get(p.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.Contains(p.Stdout.String(), listening(addr)) {
				return p, false
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("server did not become healthy\nstdout:\n%s\nstderr:\n%s", p.Stdout, p.Stderr)
	return nil, false
}

// Token reads the admin token from the home.
func (p *Proc) Token(t testing.TB) string {
	raw, err := os.ReadFile(filepath.Join(p.Home, "token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(raw))
}

// Stop sends SIGTERM and waits for exit.
func (p *Proc) Stop(t testing.TB) {
	t.Helper()
	_ = p.Cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- p.Cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = p.Cmd.Process.Kill()
		t.Fatal("server did not stop on SIGINT")
	}
}

// cleanEnv is the environment for child servers: the parent's, minus Pixie and provider
// settings that would change their behaviour.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PIXIE_") || strings.HasSuffix(k, "_API_KEY") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// RunPixie runs the pixie binary with args and returns its combined output and exit code.
func RunPixie(t testing.TB, ctx context.Context, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, PixieBinary(t), args...)
	cmd.Env = append(cleanEnv(), env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

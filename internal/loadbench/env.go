package loadbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/guestbuild"
)

// Env is what rows prepare against: the repository, the pixie binary, a folder for the
// servers' homes, and the servers already started (shared by the rows that name the same one).
// Close stops every server it started.
type Env struct {
	// Root is the repository root (guests/, bin/).
	Root string
	// PixieBin is the `pixie` binary the servers run (make bench builds bin/pixie).
	PixieBin string
	// ToolsDir is the cache folder for tools the bench builds (OPA); empty means
	// $PIXIE_TOOLS_DIR, else ~/.cache/pixie-tools.
	ToolsDir string
	// Work holds the servers' homes and sessions' working directories (a temporary folder).
	Work string
	// Log receives progress lines (nil: discarded).
	Log io.Writer
	// ServerCPUs, when set, pins every server the Env starts to these CPUs (taskset -c).
	ServerCPUs string

	mu      sync.Mutex
	servers map[string]any
	stops   []func()
	guests  map[string][]byte
}

// NewEnv returns an Env with a fresh temporary work folder.
func NewEnv(root, pixieBin string, log io.Writer) (*Env, error) {
	work, err := os.MkdirTemp("", "pixie-loadbench-")
	if err != nil {
		return nil, err
	}
	return &Env{Root: root, PixieBin: pixieBin, Work: work, Log: log}, nil
}

func (e *Env) logf(format string, args ...any) {
	if e.Log != nil {
		fmt.Fprintf(e.Log, format+"\n", args...)
	}
}

// Close stops every server the Env started (SIGTERM, then SIGKILL after 10 s) and removes the
// work folder.
func (e *Env) Close() {
	e.mu.Lock()
	stops := e.stops
	e.stops = nil
	e.mu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
	if e.Work != "" {
		_ = os.RemoveAll(e.Work)
	}
}

// Shared returns the server (or anything) called name, starting it with start the first time:
// the rows that name the same server share it. A failed start is remembered and returned to
// every later caller.
func Shared[T any](e *Env, name string, start func() (T, error)) (T, error) {
	e.mu.Lock()
	if e.servers == nil {
		e.servers = map[string]any{}
	}
	if v, ok := e.servers[name]; ok {
		e.mu.Unlock()
		if err, ok := v.(error); ok {
			var zero T
			return zero, err
		}
		return v.(T), nil
	}
	e.mu.Unlock()
	v, err := start()
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.servers[name] = err
		return v, err
	}
	e.servers[name] = v
	return v, nil
}

// onClose registers f to run at Close (in reverse order).
func (e *Env) onClose(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stops = append(e.stops, f)
}

// Dir returns a new folder under the work folder.
func (e *Env) Dir(name string) (string, error) {
	return os.MkdirTemp(e.Work, name+"-")
}

// Guest returns the WASM module of the guest folder name under guests/ ("block-risky-commands",
// "testdata/fault-loop"): bin/guests/<name>.wasm as `make guests` built it, or, for a test
// fixture or a module not built yet, a build of it made once per Env (the Go build cache makes
// an unchanged guest quick to build).
func (e *Env) Guest(ctx context.Context, name string) ([]byte, error) {
	e.mu.Lock()
	if b, ok := e.guests[name]; ok {
		e.mu.Unlock()
		return b, nil
	}
	e.mu.Unlock()
	built := filepath.Join(e.Root, "bin", "guests", filepath.FromSlash(name)+".wasm")
	if strings.HasPrefix(name, "testdata/") || !exists(built) {
		built = filepath.Join(e.Work, "guests", filepath.FromSlash(name)+".wasm")
		e.logf("building guest %s", name)
		bctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		if err := guestbuild.Build(bctx, filepath.Join(e.Root, "guests", filepath.FromSlash(name)), built); err != nil {
			return nil, err
		}
	}
	b, err := os.ReadFile(built)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.guests == nil {
		e.guests = map[string][]byte{}
	}
	e.guests[name] = b
	return b, nil
}

// WAT returns the module wat2wasm builds from the WebAssembly text file at path (relative to
// the repository root). wat2wasm comes with Debian's wabt package.
func (e *Env) WAT(ctx context.Context, path string) ([]byte, error) {
	tool, err := exec.LookPath("wat2wasm")
	if err != nil {
		return nil, errors.New("wat2wasm is not installed (apt-get install wabt)")
	}
	dir, err := e.Dir("wat")
	if err != nil {
		return nil, err
	}
	out := filepath.Join(dir, strings.TrimSuffix(filepath.Base(path), ".wat")+".wasm")
	if b, err := exec.CommandContext(ctx, tool, filepath.Join(e.Root, path), "-o", out).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("wat2wasm %s: %v: %s", path, err, b)
	}
	return os.ReadFile(out)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// PixieOptions configure a `pixie serve` the bench starts.
type PixieOptions struct {
	// Set are settings passed as --set key=value.
	Set []string
	// Env are extra environment variables (KEY=value).
	Env []string
	// Scripts are files (relative to the repository root) copied into the home's script
	// folder before the start.
	Scripts []string
}

// Pixie is a running `pixie serve` in a home of its own, with a client for its admin API.
// Its gate set is kept here: AddGates adds to it and saves the whole set, so rows sharing a
// server each add their own gates and presets.
type Pixie struct {
	Name, Addr, URL, Home, Token string
	// Cmd is the server process.
	Cmd *exec.Cmd

	stderr *syncBuffer
	done   chan struct{}
	client *http.Client
	mu     sync.Mutex
	gates  gate.Set
}

// StartPixie starts `pixie serve --home <new home> --addr <free port>` and waits until
// /healthz answers. Prefer Shared to start a server that rows share.
func (e *Env) StartPixie(ctx context.Context, name string, o PixieOptions) (*Pixie, error) {
	root, err := e.Dir("pixie-" + name)
	if err != nil {
		return nil, err
	}
	home := filepath.Join(root, "home")
	if err := os.MkdirAll(filepath.Join(home, "commands"), 0o700); err != nil {
		return nil, err
	}
	for _, s := range o.Scripts {
		b, err := os.ReadFile(filepath.Join(e.Root, s))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(home, "commands", filepath.Base(s)), b, 0o755); err != nil {
			return nil, err
		}
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "--home", home, "--addr", addr}
	for _, s := range o.Set {
		args = append(args, "--set", s)
	}
	p := &Pixie{Name: name, Addr: addr, URL: "http://" + addr, Home: home, stderr: &syncBuffer{}, done: make(chan struct{}),
		client: &http.Client{Timeout: 2 * time.Minute}}
	p.Cmd = e.command(e.PixieBin, args...)
	p.Cmd.Env = append(serverEnv(), o.Env...)
	p.Cmd.Stdout, p.Cmd.Stderr = p.stderr, p.stderr
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.Cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = p.Cmd.Wait(); close(p.done) }()
	e.onClose(p.Stop)
	if err := waitHealthy(ctx, p.URL, p.done, 60*time.Second); err != nil {
		p.Stop()
		return nil, fmt.Errorf("pixie serve (%s): %w\n%s", name, err, p.stderr.tail(2000))
	}
	raw, err := os.ReadFile(filepath.Join(home, "token"))
	if err != nil {
		p.Stop()
		return nil, err
	}
	p.Token = strings.TrimSpace(string(raw))
	e.logf("started pixie serve (%s) on %s, pid %d, home %s", name, addr, p.Cmd.Process.Pid, home)
	return p, nil
}

// command returns the command for a server, under taskset when ServerCPUs is set.
func (e *Env) command(name string, args ...string) *exec.Cmd {
	if e.ServerCPUs != "" {
		return exec.Command("taskset", append([]string{"-c", e.ServerCPUs, name}, args...)...)
	}
	return exec.Command(name, args...)
}

// serverEnv is this process's environment without Pixie settings and provider keys, which
// would change what the servers do.
func serverEnv() []string {
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

// Stop ends the server: SIGTERM, then SIGKILL of its process group after 10 s.
func (p *Pixie) Stop() { stopProcess(p.Cmd, p.done) }

// Kill ends the server at once (SIGKILL of its process group): for a server that no longer
// answers.
func (p *Pixie) Kill() {
	if p.Cmd.Process != nil {
		_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	}
	<-p.done
}

// Alive is GET /healthz, for Plan.Alive.
func (p *Pixie) Alive(ctx context.Context) error { return healthz(ctx, p.URL) }

// Auth returns the header of an admin request: the bearer token, and Content-Type when ct is
// not empty.
func (p *Pixie) Auth(ct string) http.Header {
	h := http.Header{"Authorization": {"Bearer " + p.Token}}
	if ct != "" {
		h.Set("Content-Type", ct)
	}
	return h
}

// Call sends an admin request and returns the answer's body; a status other than 2xx is an
// error with the body.
func (p *Pixie) Call(ctx context.Context, method, path, ct string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, p.URL+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = p.Auth(ct)
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return raw, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return raw, nil
}

// PushModule uploads a WASM module as name.
func (p *Pixie) PushModule(ctx context.Context, name string, wasm []byte) error {
	_, err := p.Call(ctx, http.MethodPost, "/v1/modules?name="+name, "application/wasm", wasm)
	return err
}

// AddGates adds gates and presets to the server's gate set (replacing those of the same name)
// and saves the whole set.
func (p *Pixie) AddGates(ctx context.Context, set gate.Set) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	next := gate.Set{}
	for _, g := range p.gates.Gates {
		if !hasGate(set.Gates, g.Name) {
			next.Gates = append(next.Gates, g)
		}
	}
	for _, pr := range p.gates.Presets {
		if !hasPreset(set.Presets, pr.Name) {
			next.Presets = append(next.Presets, pr)
		}
	}
	next.Gates = append(next.Gates, set.Gates...)
	next.Presets = append(next.Presets, set.Presets...)
	raw, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if _, err := p.Call(ctx, http.MethodPut, "/v1/gates", "application/json", raw); err != nil {
		return err
	}
	p.gates = next
	return nil
}

func hasGate(gs []gate.Gate, name string) bool {
	for _, g := range gs {
		if g.Name == name {
			return true
		}
	}
	return false
}

func hasPreset(ps []gate.Preset, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}

// Evaluate sends one POST /v1/gates/evaluate and decodes the result.
func (p *Pixie) Evaluate(ctx context.Context, r gate.EvalRequest) (gate.Result, error) {
	var res gate.Result
	body, err := json.Marshal(r)
	if err != nil {
		return res, err
	}
	raw, err := p.Call(ctx, http.MethodPost, "/v1/gates/evaluate", "application/json", body)
	if err != nil {
		return res, err
	}
	return res, json.Unmarshal(raw, &res)
}

// RSSMiB is the server process's resident set (VmRSS) in MiB.
func (p *Pixie) RSSMiB() (float64, error) { return rssMiB(p.Cmd.Process.Pid) }

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitHealthy polls url/healthz until it answers 200, the process ends (done closes) or the
// time is up.
func waitHealthy(ctx context.Context, url string, done <-chan struct{}, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if err := healthz(ctx, url); err == nil {
			return nil
		}
		select {
		case <-done:
			return errors.New("the server exited")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer from %s/healthz after %s", url, limit)
		}
	}
}

func healthz(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/healthz: %d", resp.StatusCode)
	}
	return nil
}

// stopProcess sends SIGTERM to cmd's process group and SIGKILL after 10 s; done closes when
// the process was reaped.
func stopProcess(cmd *exec.Cmd, done <-chan struct{}) {
	if cmd.Process == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// syncBuffer is a bytes.Buffer safe for a process's stdout and stderr at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 1<<20 { // keep the end: what a failure needs
		s.b.Next(s.b.Len() - 1<<19)
	}
	return s.b.Write(p)
}

// tail returns the last n bytes written.
func (s *syncBuffer) tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.b.Bytes()
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// AddScript copies a file of the repository (relative to its root) into the server's script
// folder.
func (p *Pixie) AddScript(e *Env, rel string) error {
	b, err := os.ReadFile(filepath.Join(e.Root, rel))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(p.Home, "commands", filepath.Base(rel)), b, 0o755)
}

package loadbench

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// OPA, the peer the WASM gate is compared with, is built by the bench from the Go module proxy
// into a cache folder (never a dependency of Pixie's go.mod: TestOPAIsNotADependency).
const (
	OPAModule  = "github.com/open-policy-agent/opa"
	OPAVersion = "v1.22.3"
)

// RegoTwin is the Rego twin of the block-risky-commands guest's clear cases (block_risky.rego);
// OPA serves its decision at OPADecisionPath.
//
//go:embed block_risky.rego
var RegoTwin []byte

// OPADecisionPath is the REST path of the Rego twin's decision.
const OPADecisionPath = "/v1/data/pixie/block_risky/decision"

// ToolsDir is the cache folder for tools the bench builds: dir if not empty, else
// $PIXIE_TOOLS_DIR, else ~/.cache/pixie-tools (the folder .ci/tools.sh uses).
func ToolsDir(dir string) string {
	if dir != "" {
		return dir
	}
	if d := os.Getenv("PIXIE_TOOLS_DIR"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "pixie-tools")
	}
	return filepath.Join(home, ".cache", "pixie-tools")
}

// OPAPath is where the opa binary is kept: <tools dir>/opa-<version>/opa.
func OPAPath(toolsDir string) string {
	return filepath.Join(ToolsDir(toolsDir), "opa-"+OPAVersion, "opa")
}

// BuildOPA returns the opa binary, building it first when the cache has none: `go install
// github.com/open-policy-agent/opa@v1.22.3` with GOBIN in a temporary folder beside the cache,
// renamed into place when complete (a few minutes on a 2-core machine, once).
func BuildOPA(ctx context.Context, toolsDir string, log io.Writer) (string, error) {
	bin := OPAPath(toolsDir)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	dir := filepath.Dir(bin)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".opa-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if log != nil {
		fmt.Fprintf(log, "building OPA %s into %s (go install; once)\n", OPAVersion, dir)
	}
	cmd := exec.CommandContext(ctx, "go", "install", OPAModule+"@"+OPAVersion)
	cmd.Dir = tmp // outside any module: go.mod of the repository plays no part
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s@%s: %v\n%s", OPAModule, OPAVersion, err, out)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(filepath.Join(tmp, "opa"), bin); err != nil {
		return "", err
	}
	return bin, nil
}

// OPA is a running `opa run --server` serving the Rego twin.
type OPA struct {
	Addr, URL string
	Cmd       *exec.Cmd
	out       *syncBuffer
	done      chan struct{}
}

// StartOPA builds OPA if needed and starts `opa run --server` on a free port with the Rego twin,
// waiting until it answers. Prefer Shared to start one that rows share.
func (e *Env) StartOPA(ctx context.Context) (*OPA, error) {
	bin, err := BuildOPA(ctx, e.ToolsDir, e.Log)
	if err != nil {
		return nil, err
	}
	dir, err := e.Dir("opa")
	if err != nil {
		return nil, err
	}
	policy := filepath.Join(dir, "block_risky.rego")
	if err := os.WriteFile(policy, RegoTwin, 0o644); err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	o := &OPA{Addr: addr, URL: "http://" + addr, out: &syncBuffer{}, done: make(chan struct{})}
	o.Cmd = e.command(bin, "run", "--server", "--addr", addr, "--log-level", "error", "--skip-version-check", policy)
	o.Cmd.Dir = dir
	o.Cmd.Stdout, o.Cmd.Stderr = o.out, o.out
	o.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := o.Cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = o.Cmd.Wait(); close(o.done) }()
	e.onClose(func() { stopProcess(o.Cmd, o.done) })
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := o.Decide(ctx, "Bash", json.RawMessage(`{"command":"ls"}`)); err == nil {
			break
		} else if time.Now().After(deadline) {
			return nil, fmt.Errorf("opa run --server: no answer after 60 s: %v\n%s", err, o.out.tail(2000))
		}
		select {
		case <-o.done:
			return nil, fmt.Errorf("opa run --server exited:\n%s", o.out.tail(2000))
		case <-time.After(50 * time.Millisecond):
		}
	}
	e.logf("started opa run --server (OPA %s) on %s, pid %d", OPAVersion, addr, o.Cmd.Process.Pid)
	return o, nil
}

// Decision is the Rego twin's answer: "stop" with the guest's reason, "unclear" (the guest
// would ask the model), or "skip".
type Decision struct {
	Verdict string `json:"verdict"`
	Reason  string `json:"reason,omitempty"`
}

// OPABody is the request body of the Rego twin's decision for a tool call.
func OPABody(tool string, args json.RawMessage) []byte {
	b, _ := json.Marshal(map[string]any{"input": map[string]any{"tool": tool, "args": args}})
	return b
}

// Decide asks OPA's REST API for the Rego twin's decision on a tool call.
func (o *OPA) Decide(ctx context.Context, tool string, args json.RawMessage) (Decision, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.URL+OPADecisionPath, bytes.NewReader(OPABody(tool, args)))
	if err != nil {
		return Decision{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Decision{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return Decision{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return Decision{}, fmt.Errorf("OPA: %d %s", resp.StatusCode, raw)
	}
	var out struct {
		Result *Decision `json:"result"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return Decision{}, fmt.Errorf("OPA: %w: %s", err, raw)
	}
	if out.Result == nil {
		return Decision{}, errors.New("OPA: no decision (is the policy loaded?): " + string(raw))
	}
	return *out.Result, nil
}

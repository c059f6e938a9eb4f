package wasmit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime"
)

// quantile returns the p-quantile of sorted samples in microseconds.
func quantile(sorted []time.Duration, p float64) float64 {
	return float64(sorted[int(p*float64(len(sorted)-1))].Nanoseconds()) / 1e3
}

// wasmP50 is the WASM sub-benchmark's p50, for the speedup the bash one reports.
var wasmP50 float64

// BenchmarkEvaluateBlockRisky measures POST /v1/gates/evaluate over a real HTTP connection
// (keep-alive) for a tool-before gate whose rule is block-risky-commands concluding without
// the model ("rm -rf /" is stopped, exit 11): first the WASM module, then its bash twin, in the
// same run, on the same server (admin auth, JSON, the gate pipeline, the rule, a synced Badger
// commit of the run record). Between requests (timer stopped) the module's pool is refilled,
// as it is between an agent's tool calls. Each reports p50 and p99 in microseconds; the bash
// one also reports speedup-x, its p50 over the WASM p50.
func BenchmarkEvaluateBlockRisky(b *testing.B) {
	s := newStack(b, stackOptions{})
	s.push(b, "block-risky-commands", "block-risky-commands")
	args, _ := json.Marshal(map[string]string{"command": "rm -rf /", "description": "clean up"})
	cwd := b.TempDir()
	for _, kind := range []string{"wasm", "bash"} {
		b.Run(kind, func(b *testing.B) {
			rule := moduleRule("block-risky-commands")
			if kind == "bash" {
				rule = scriptRule("block-risky-commands.sh")
			}
			s.save(b, onePreset("p", gateWith("risky", "tool-before", "unused", rule, "", 0)))
			ctx := context.Background()
			req := gate.EvalRequest{Point: "tool-before", Tool: &gate.Tool{Name: "Bash", Args: args}, Target: string(args),
				Session: gate.Session{ID: "bench-" + kind, Preset: "p", Cwd: cwd, Policy: runtime.PolicyFull}}
			var samples []time.Duration
			turn := 0
			for b.Loop() {
				b.StopTimer()
				if kind == "wasm" {
					if err := s.x.Warm(ctx, "block-risky-commands"); err != nil {
						b.Fatal(err)
					}
				}
				turn++
				req.Turn = turn
				raw, _ := json.Marshal(req)
				hr, _ := http.NewRequest(http.MethodPost, s.ts.URL+"/v1/gates/evaluate", bytes.NewReader(raw))
				hr.Header.Set("Authorization", "Bearer "+token)
				hr.Header.Set("Content-Type", "application/json")
				b.StartTimer()
				start := time.Now()
				resp, err := s.client.Do(hr)
				if err != nil {
					b.Fatal(err)
				}
				var res gate.Result
				err = json.NewDecoder(resp.Body).Decode(&res)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				samples = append(samples, time.Since(start))
				if err != nil || resp.StatusCode != http.StatusOK || res.Action != gate.ActionBlocked || res.ConcludedBy != gate.ByHookScript {
					b.Fatalf("%d %+v %v", resp.StatusCode, res, err)
				}
			}
			slices.Sort(samples)
			p50 := quantile(samples, 0.5)
			b.ReportMetric(p50, "p50-µs")
			b.ReportMetric(quantile(samples, 0.99), "p99-µs")
			if kind == "wasm" {
				wasmP50 = p50
			} else if wasmP50 > 0 {
				b.ReportMetric(p50/wasmP50, "speedup-x")
			}
		})
	}
}

// memoryGuests are the ten modules of BenchmarkServerRSS10Modules: the six example guests and
// four test guests, all exporting gate.
var memoryGuests = []string{"only-search-tools", "measure-subtitle", "translate-check", "claim-check", "list-changed-files",
	"block-risky-commands", "testdata/echo", "testdata/fs-probe", "testdata/fault-badjson", "testdata/fault-calls"}

// BenchmarkServerRSS10Modules starts the real server (`pixie serve`, default configuration),
// uploads ten modules, attaches each to a gate, evaluates each (which compiles it and fills its
// pool), waits until the resident set settles, and reports the server process's VmRSS with
// the ten pools warm (rss-MiB), and before the uploads (rss-idle-MiB).
func BenchmarkServerRSS10Modules(b *testing.B) {
	home := filepath.Join(b.TempDir(), "home")
	p := testutil.StartServer(b, home, nil)
	defer p.Stop(b)
	tok := p.Token(b)
	pid := p.Cmd.Process.Pid
	client := &http.Client{}
	do := func(method, path, ct string, body []byte) []byte {
		b.Helper()
		req, _ := http.NewRequest(method, p.URL+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", ct)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			b.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
		}
		return raw
	}
	idle := settledRSS(b, pid)
	set := gate.Set{}
	for i, g := range memoryGuests {
		name := fmt.Sprintf("m%d-%s", i, filepath.Base(g))
		do(http.MethodPost, "/v1/modules?name="+name, "application/wasm", testutil.Guest(b, g))
		gt := gateWith(name, "tool-before", "unused", moduleRule(name), "", 0)
		set.Gates = append(set.Gates, gt)
		set.Presets = append(set.Presets, gate.Preset{Name: name, Gates: []gate.Attachment{{Gate: name, Enabled: true}}})
	}
	raw, _ := json.Marshal(set)
	do(http.MethodPut, "/v1/gates", "application/json", raw)
	args, _ := json.Marshal(map[string]string{"command": "ls"})
	cwd := b.TempDir()
	turn := 0
	for b.Loop() {
		turn++
		for _, g := range set.Gates {
			req, _ := json.Marshal(gate.EvalRequest{Point: "tool-before", Turn: turn, Tool: &gate.Tool{Name: "Bash", Args: args}, Target: string(args),
				Session: gate.Session{ID: "rss-" + g.Name, Preset: g.Name, Cwd: cwd, Policy: runtime.PolicyReadOnly}})
			var res gate.Result
			if err := json.Unmarshal(do(http.MethodPost, "/v1/gates/evaluate", "application/json", req), &res); err != nil || res.Gate != g.Name {
				b.Fatalf("%+v %v", res, err)
			}
		}
	}
	var info struct {
		WASM struct {
			Modules  int `json:"modules"`
			PoolSize int `json:"poolSize"`
		} `json:"wasm"`
	}
	if err := json.Unmarshal(do(http.MethodGet, "/v1/info", "", nil), &info); err != nil || info.WASM.Modules != len(memoryGuests) {
		b.Fatalf("info %+v %v", info, err)
	}
	b.ReportMetric(float64(info.WASM.Modules), "modules")
	b.ReportMetric(float64(info.WASM.PoolSize), "pool")
	b.ReportMetric(idle, "rss-idle-MiB")
	b.ReportMetric(settledRSS(b, pid), "rss-MiB")
}

// settledRSS waits until the process's VmRSS moves by less than 1 MiB over two seconds (the
// pools refill in the background after each run), at most a minute, and returns it in MiB.
func settledRSS(b *testing.B, pid int) float64 {
	b.Helper()
	last := testutil.RSSMiB(b, pid)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		time.Sleep(2 * time.Second)
		cur := testutil.RSSMiB(b, pid)
		if cur-last < 1 && last-cur < 1 {
			return cur
		}
		last = cur
	}
	return last
}

package wasmit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
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
// same run, on the same server (admin auth, JSON, the gate pipeline, the rule, the run record).
// Requests go back to back and the timer never stops: each meets the module's pool as the
// previous one left it, whatever a refill costs (sustained load; the idle case, a request after
// a pause, is BenchmarkEvaluateAfterIdle's and the load table's wasm-idle row).
//
// Each request is sent twice, by two clients: p50-µs and p99-µs are those of a client that
// writes the request and reads the answer on its own goroutine (connClient, as an event-loop
// client such as Node's does); gohttp-p50-µs and gohttp-p99-µs those of net/http's Client,
// whose Transport hands every request to a writer goroutine and takes every answer from a
// reader goroutine: on this 2-vCPU virtual machine each hand-off may have to wake the other,
// idle, vCPU. The bash one also reports speedup-x, its p50 over the WASM p50 (first client).
// The third, "healthz", is GET /healthz with the same two clients: the floor of any request
// (HTTP, routing, one store read) on the same server.
func BenchmarkEvaluateBlockRisky(b *testing.B) {
	s := newStack(b, stackOptions{})
	s.push(b, "block-risky-commands", "block-risky-commands")
	args, _ := json.Marshal(map[string]string{"command": "rm -rf /", "description": "clean up"})
	cwd := b.TempDir()
	for _, kind := range []string{"wasm", "bash", "healthz"} {
		b.Run(kind, func(b *testing.B) {
			rule := moduleRule("block-risky-commands")
			if kind == "bash" {
				rule = scriptRule("block-risky-commands.sh")
			}
			s.save(b, onePreset("p", gateWith("risky", "tool-before", "unused", rule, "", 0)))
			req := gate.EvalRequest{Point: "tool-before", Tool: &gate.Tool{Name: "Bash", Args: args}, Target: string(args),
				Session: gate.Session{ID: "bench-" + kind, Preset: "p", Cwd: cwd, Policy: runtime.PolicyFull}}
			req.Turn = 1
			raw, _ := json.Marshal(req)
			conn := &connClient{}
			defer conn.close()
			var samples, gohttp []time.Duration
			for b.Loop() {
				for _, viaConn := range []bool{true, false} {
					var hr *http.Request
					if kind == "healthz" {
						hr, _ = http.NewRequest(http.MethodGet, s.ts.URL+"/healthz", nil)
					} else {
						hr, _ = http.NewRequest(http.MethodPost, s.ts.URL+"/v1/gates/evaluate", bytes.NewReader(raw))
						hr.Header.Set("Content-Type", "application/json")
					}
					hr.Header.Set("Authorization", "Bearer "+token)
					start := time.Now()
					var resp *http.Response
					var err error
					if viaConn {
						resp, err = conn.do(hr)
					} else {
						resp, err = s.client.Do(hr)
					}
					if err != nil {
						b.Fatal(err)
					}
					body, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if viaConn {
						samples = append(samples, time.Since(start))
					} else {
						gohttp = append(gohttp, time.Since(start))
					}
					if err != nil || resp.StatusCode != http.StatusOK {
						b.Fatalf("%d %s %v", resp.StatusCode, body, err)
					}
					if kind != "healthz" {
						var res gate.Result
						if err := json.Unmarshal(body, &res); err != nil || res.Action != gate.ActionBlocked || res.ConcludedBy != gate.ByHookScript {
							b.Fatalf("%s %v", body, err)
						}
					}
				}
			}
			slices.Sort(samples)
			slices.Sort(gohttp)
			p50 := quantile(samples, 0.5)
			b.ReportMetric(p50, "p50-µs")
			b.ReportMetric(quantile(samples, 0.99), "p99-µs")
			b.ReportMetric(quantile(gohttp, 0.5), "gohttp-p50-µs")
			b.ReportMetric(quantile(gohttp, 0.99), "gohttp-p99-µs")
			if kind == "wasm" {
				wasmP50 = p50
			} else if kind == "bash" && wasmP50 > 0 {
				b.ReportMetric(p50/wasmP50, "speedup-x")
			}
		})
	}
}

// connClient is an HTTP/1.1 client on one keep-alive connection that writes each request and
// reads its answer on the calling goroutine, with net/http's own wire code (Request.Write,
// ReadResponse): no hand-off to other goroutines. The caller reads and closes each body before
// the next request.
type connClient struct {
	c  net.Conn
	br *bufio.Reader
}

func (cc *connClient) do(req *http.Request) (*http.Response, error) {
	if cc.c == nil {
		c, err := net.Dial("tcp", req.URL.Host)
		if err != nil {
			return nil, err
		}
		cc.c, cc.br = c, bufio.NewReader(c)
	}
	if err := req.Write(cc.c); err != nil {
		return nil, err
	}
	return http.ReadResponse(cc.br, req)
}

func (cc *connClient) close() {
	if cc.c != nil {
		_ = cc.c.Close()
	}
}

// BenchmarkEvaluateAfterIdle measures what an agent sees more often than a warm loop: the
// real server binary (its own process), requests 30 ms apart, so that each one meets a server
// whose threads are asleep and whose caches went cold. "evaluate" is the WASM block-risky
// gate; "healthz" is GET /healthz, the floor any request pays on this machine after the same
// pause. p50 and p99 in microseconds, with connClient.
func BenchmarkEvaluateAfterIdle(b *testing.B) {
	home := filepath.Join(b.TempDir(), "home")
	p := testutil.StartServer(b, home, nil)
	defer p.Stop(b)
	tok := p.Token(b)
	conn := &connClient{}
	defer conn.close()
	do := func(method, path, ct string, body []byte) (*http.Response, []byte) {
		b.Helper()
		req, _ := http.NewRequest(method, p.URL+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := conn.do(req)
		if err != nil {
			b.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			b.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
		}
		return resp, raw
	}
	do(http.MethodPost, "/v1/modules?name=block-risky-commands", "application/wasm", testutil.Guest(b, "block-risky-commands"))
	raw, _ := json.Marshal(onePreset("p", gateWith("risky", "tool-before", "unused", moduleRule("block-risky-commands"), "", 0)))
	do(http.MethodPut, "/v1/gates", "application/json", raw)
	args, _ := json.Marshal(map[string]string{"command": "rm -rf /", "description": "clean up"})
	req := gate.EvalRequest{Point: "tool-before", Tool: &gate.Tool{Name: "Bash", Args: args}, Target: string(args),
		Session: gate.Session{ID: "bench-idle", Preset: "p", Cwd: b.TempDir(), Policy: runtime.PolicyFull}}
	const gap = 30 * time.Millisecond
	for _, route := range []string{"evaluate", "healthz"} {
		b.Run(route, func(b *testing.B) {
			var samples []time.Duration
			for b.Loop() {
				b.StopTimer()
				time.Sleep(gap)
				req.Turn++
				body, _ := json.Marshal(req)
				b.StartTimer()
				start := time.Now()
				if route == "healthz" {
					do(http.MethodGet, "/healthz", "", nil)
				} else {
					_, out := do(http.MethodPost, "/v1/gates/evaluate", "application/json", body)
					samples = append(samples, time.Since(start))
					var res gate.Result
					if err := json.Unmarshal(out, &res); err != nil || res.Action != gate.ActionBlocked {
						b.Fatalf("%s %v", out, err)
					}
					continue
				}
				samples = append(samples, time.Since(start))
			}
			slices.Sort(samples)
			b.ReportMetric(quantile(samples, 0.5), "p50-µs")
			b.ReportMetric(quantile(samples, 0.99), "p99-µs")
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

package scale

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/hint"
	"github.com/pixie-dev/pixie/internal/store/pgstore/pgtest"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime"
)

// The benchmarks of `make bench` for the store drivers, measured as clients meet them: real
// `pixie serve` processes over HTTP, sustained load back to back, with 1 and 8 client
// connections, for Badger (one process, embedded), PostgreSQL with one replica, and PostgreSQL
// with three replicas behind a round-robin client (request i goes to replica i mod 3). Each
// reports req/s (requests answered per second of wall time).
//
//   - BenchmarkStoreEvaluate: POST /v1/gates/evaluate of a WASM gate (block-risky-commands),
//     one request per op.
//   - BenchmarkStoreHints: a put, a take and its confirm (three requests per op) on one session.
//   - BenchmarkHintFanOut: a hint put on one replica until the stream on the next replica shows
//     it, one at a time: p50/p99 of that latency (LISTEN/NOTIFY, and the polling fallback).

type target struct {
	name  string
	urls  []string
	token string
}

// benchTarget starts the servers of one variant: "badger", "postgres-1", "postgres-3".
func benchTarget(b *testing.B, variant string, env []string) target {
	b.Helper()
	cache := testutil.WasmCacheDir(b)
	setup := func(home string) {
		_ = os.MkdirAll(filepath.Join(home, "cache"), 0o700)
		_ = os.Symlink(cache, filepath.Join(home, "cache", "wasm"))
	}
	switch variant {
	case "badger":
		home := filepath.Join(b.TempDir(), "home")
		setup(home)
		p := testutil.StartServer(b, home, env)
		return target{name: variant, urls: []string{p.URL}, token: p.Token(b)}
	case "postgres-1", "postgres-3":
		pgtest.ServerURL(b)
		n := 1
		if variant == "postgres-3" {
			n = 3
		}
		c := startCluster(b, clusterOptions{n: n, env: env, homeSetup: setup})
		t := target{name: variant, token: c.token}
		for _, p := range c.reps {
			t.urls = append(t.urls, p.URL)
		}
		return t
	}
	b.Fatalf("unknown variant %s", variant)
	return target{}
}

// client is one keep-alive connection's worth of HTTP client.
func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}}
}

// do sends one request to replica i mod n.
func (t target) do(cl *http.Client, i int, method, path string, in []byte, out any) error {
	req, _ := http.NewRequest(method, t.urls[i%len(t.urls)]+path, bytes.NewReader(in))
	req.Header.Set("Authorization", "Bearer "+t.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// load runs op b.N times over conns connections, back to back, and reports req/s.
func load(b *testing.B, conns, reqsPerOp int, op func(cl *http.Client, i int) error) {
	clients := make([]*http.Client, conns)
	for i := range clients {
		clients[i] = newClient()
	}
	var next atomic.Int64
	var failed atomic.Pointer[error]
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for c := 0; c < conns; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for failed.Load() == nil {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				if err := op(clients[c], i); err != nil {
					failed.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	b.ReportMetric(float64(b.N*reqsPerOp)/el.Seconds(), "req/s")
}

var variants = []string{"badger", "postgres-1", "postgres-3"}

func BenchmarkStoreEvaluate(b *testing.B) {
	args, _ := json.Marshal(map[string]string{"command": "rm -rf /", "description": "clean up"})
	for _, v := range variants {
		b.Run(v, func(b *testing.B) {
			t := benchTarget(b, v, nil)
			cl := newClient()
			req, _ := http.NewRequest(http.MethodPost, t.urls[0]+"/v1/modules?name=block-risky-commands", bytes.NewReader(testutil.Guest(b, "block-risky-commands")))
			req.Header.Set("Authorization", "Bearer "+t.token)
			req.Header.Set("Content-Type", "application/wasm")
			resp, err := cl.Do(req)
			if err != nil || resp.StatusCode != http.StatusCreated {
				b.Fatalf("upload: %v %v", err, resp)
			}
			resp.Body.Close()
			rule := gate.Rule{Kind: runtime.KindModule, Name: "block-risky-commands"}
			set, _ := json.Marshal(gate.Set{
				Gates: []gate.Gate{{Name: "risky", Enabled: true, Point: "tool-before", Task: "unused", Rule: &rule,
					Advanced: gate.Options{OnError: gate.OnErrorContinue, Targets: gate.TargetsAll, TimeoutSeconds: 60, RedoLimit: 1}}},
				Presets: []gate.Preset{{Name: "p", Gates: []gate.Attachment{{Gate: "risky", Enabled: true}}}},
			})
			if err := t.do(cl, 0, http.MethodPut, "/v1/gates", set, nil); err != nil {
				b.Fatal(err)
			}
			cwd := b.TempDir()
			body := func(i int) []byte {
				raw, _ := json.Marshal(gate.EvalRequest{Point: "tool-before", Tool: &gate.Tool{Name: "Bash", Args: args}, Target: string(args),
					Turn: i + 1, Session: gate.Session{ID: fmt.Sprintf("bench-%d", i%16), Preset: "p", Cwd: cwd, Policy: runtime.PolicyFull}})
				return raw
			}
			// Warm every replica's pool (the first run of a module on a replica compiles it).
			for i := range t.urls {
				if err := t.do(cl, i, http.MethodPost, "/v1/gates/evaluate", body(i), nil); err != nil {
					b.Fatal(err)
				}
			}
			for _, conns := range []int{1, 8} {
				b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
					load(b, conns, 1, func(cl *http.Client, i int) error {
						var res gate.Result
						if err := t.do(cl, i, http.MethodPost, "/v1/gates/evaluate", body(i), &res); err != nil {
							return err
						}
						if res.Action != gate.ActionBlocked {
							return fmt.Errorf("evaluate: %+v", res)
						}
						return nil
					})
				})
			}
		})
	}
}

func BenchmarkStoreHints(b *testing.B) {
	env := []string{"PIXIE_HINTS_MAX_PENDING_PER_SESSION=100000"}
	for _, v := range variants {
		b.Run(v, func(b *testing.B) {
			t := benchTarget(b, v, env)
			for _, conns := range []int{1, 8} {
				b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
					var sess atomic.Int64
					load(b, conns, 3, func(cl *http.Client, i int) error {
						// Each op steps a session of its own, as agents do: what it puts, it takes.
						id := fmt.Sprintf("bench-%d-%d", conns, sess.Add(1))
						put := fmt.Sprintf(`{"sessionId":%q,"text":"hint %d"}`, id, i)
						if err := t.do(cl, i, http.MethodPost, "/v1/hints", []byte(put), nil); err != nil {
							return err
						}
						var tk hint.Take
						if err := t.do(cl, i+1, http.MethodPost, "/v1/hints/take", []byte(fmt.Sprintf(`{"sessionId":%q}`, id)), &tk); err != nil {
							return err
						}
						if tk.ID == "" || len(tk.Hints) != 1 {
							return fmt.Errorf("take after a put: %+v", tk)
						}
						return t.do(cl, i+2, http.MethodPost, "/v1/hints/confirm", []byte(`{"takeId":"`+tk.ID+`"}`), nil)
					})
				})
			}
		})
	}
}

func BenchmarkHintFanOut(b *testing.B) {
	for _, poll := range []bool{false, true} {
		name := "postgres-3/listen"
		var env []string
		if poll {
			name = "postgres-3/poll-1s"
			env = []string{"PIXIE_STORE_POSTGRES_POLL=true", "PIXIE_STORE_POSTGRES_POLL_INTERVAL=1s"}
		}
		b.Run(name, func(b *testing.B) {
			pgtest.ServerURL(b)
			c := startCluster(b, clusterOptions{n: 3, env: append([]string{"PIXIE_HINTS_MAX_PENDING_PER_SESSION=100000"}, env...)})
			streams := []<-chan sseEvent{c.stream(0), c.stream(1), c.stream(2)}
			time.Sleep(300 * time.Millisecond)
			var lat []time.Duration
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				from, to := i%3, (i+1)%3
				var put struct {
					HintID string `json:"hintId"`
				}
				start := time.Now()
				c.must(from, http.MethodPost, "/v1/hints", map[string]string{"sessionId": "fan", "text": fmt.Sprint(i)}, &put)
			wait:
				for {
					select {
					case ev := <-streams[to]:
						var a hint.Action
						if ev.name == hint.EventHint && json.Unmarshal(ev.data, &a) == nil && a.Hint.ID == put.HintID {
							lat = append(lat, ev.at.Sub(start))
							break wait
						}
					case <-time.After(10 * time.Second):
						b.Fatal("the hint never reached the other replica's stream")
					}
				}
				// The other streams' frames are not waited for; drop what they hold.
				for k, s := range streams {
					if k == to {
						continue
					}
				drain:
					for {
						select {
						case <-s:
						default:
							break drain
						}
					}
				}
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			if n := len(lat); n > 0 {
				b.ReportMetric(float64(lat[n/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[(n*99)/100].Microseconds())/1000, "p99-ms")
			}
		})
	}
}

package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/hint"
	"github.com/pixie-dev/pixie/internal/proxy"
	"github.com/pixie-dev/pixie/internal/rewrite"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
)

// BenchmarkProxyTTFB is the model-API proxy's added latency as a client meets it: time to the
// first byte of a streamed answer from a local upstream, through the real server (Host check,
// auth, body read, the session's replacements and hint check on Badger, forwarding) beside the same request sent
// to the upstream directly, interleaved request by request in the same run so both paths see the
// same machine. Back to back, on kept-alive connections, at 1 and 8 concurrent clients. The body
// is a 48 KiB Messages request with Claude Code's session header, and the queue holds a pending
// hint for another session (so the check reads a queue, and nothing is injected). Target: under
// 1 ms added at p50.
func BenchmarkProxyTTFB(b *testing.B) {
	// The upstream: answers an SSE stream, the first event at once.
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\"}\n\n")
		w.(http.Flusher).Flush()
		fmt.Fprint(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	})}
	uln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = up.Serve(uln) }()
	defer up.Close()
	upURL := "http://" + uln.Addr().String()

	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: b.TempDir(), GCInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	q, err := hint.New(context.Background(), hint.Config{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close(context.Background())
	if _, err := q.Put(context.Background(), "another-session", "not for the benchmark's session"); err != nil {
		b.Fatal(err)
	}
	// The session's replacements are read for every request, as in production; another session
	// has some (so the scan reads a store that holds rewrites, and nothing is replaced).
	rw, err := rewrite.New(context.Background(), rewrite.Config{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	if err := rw.ReplaceToolResult(context.Background(), "another-session", "toolu_1", "digest"); err != nil {
		b.Fatal(err)
	}
	p, err := proxy.New(context.Background(), proxy.Config{Store: st, Hints: q, Rewrites: rw, AnthropicURL: upURL})
	if err != nil {
		b.Fatal(err)
	}
	s := serverFor(b, Config{Token: testToken}, Deps{Store: st, Hints: q, Proxy: p})
	sln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Serve(ctx, sln, time.Second) }()
	proxyURL := "http://" + sln.Addr().String() + "/v1/proxy/anthropic/v1/messages"

	body := `{"model":"claude-test","stream":true,"max_tokens":1000,"tools":[{"name":"Bash","input_schema":{"type":"object"}}],` +
		`"messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum ", 48<<10/12) + `"}]}`

	for _, conns := range []int{1, 8} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * conns, DisableCompression: true}}
			ttfb := func(url string, proxied bool) (time.Duration, error) {
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Api-Key", "sk-user")
				req.Header.Set("X-Claude-Code-Session-Id", "bench-session")
				if proxied {
					req.Header.Set("X-Pixie-Token", testToken)
				}
				start := time.Now()
				res, err := client.Do(req)
				if err != nil {
					return 0, err
				}
				defer res.Body.Close()
				br := bufio.NewReader(res.Body)
				if _, err := br.ReadByte(); err != nil {
					return 0, err
				}
				d := time.Since(start)
				_, _ = io.Copy(io.Discard, br)
				if res.StatusCode != http.StatusOK {
					return 0, fmt.Errorf("status %d", res.StatusCode)
				}
				return d, nil
			}
			// Warm the connections (not measured: a client keeps them).
			for range conns {
				if _, err := ttfb(upURL, false); err != nil {
					b.Fatal(err)
				}
				if _, err := ttfb(proxyURL, true); err != nil {
					b.Fatal(err)
				}
			}
			var mu sync.Mutex
			var direct, proxied []time.Duration
			per := (b.N + conns - 1) / conns
			b.ResetTimer()
			var wg sync.WaitGroup
			for c := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var d, pr []time.Duration
					for i := range per {
						// Alternate which path goes first, so neither always follows the other.
						order := []bool{i%2 == 0, i%2 != 0}
						for _, viaProxy := range order {
							u := upURL
							if viaProxy {
								u = proxyURL
							}
							lat, err := ttfb(u, viaProxy)
							if err != nil {
								b.Error(err)
								return
							}
							if viaProxy {
								pr = append(pr, lat)
							} else {
								d = append(d, lat)
							}
						}
					}
					_ = c
					mu.Lock()
					direct = append(direct, d...)
					proxied = append(proxied, pr...)
					mu.Unlock()
				}()
			}
			wg.Wait()
			b.StopTimer()
			if len(direct) == 0 || len(proxied) == 0 {
				return
			}
			pct := func(d []time.Duration, p float64) time.Duration {
				sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
				return d[min(len(d)-1, int(p*float64(len(d))))]
			}
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			d50, d99 := pct(direct, 0.50), pct(direct, 0.99)
			p50, p99 := pct(proxied, 0.50), pct(proxied, 0.99)
			b.ReportMetric(ms(d50), "direct-p50-ms")
			b.ReportMetric(ms(p50), "proxy-p50-ms")
			b.ReportMetric(float64(p50-d50)/float64(time.Microsecond), "added-p50-µs")
			b.ReportMetric(ms(d99), "direct-p99-ms")
			b.ReportMetric(ms(p99), "proxy-p99-ms")
			b.ReportMetric(float64(p99-d99)/float64(time.Microsecond), "added-p99-µs")
		})
	}
}

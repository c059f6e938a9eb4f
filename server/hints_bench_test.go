package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/hint"
)

// benchStreams is the number of connected SSE streams in the delivery benchmark.
const benchStreams = 100

// BenchmarkHintEnqueueToSSE measures enqueue-to-delivery latency: from sending POST /v1/hints
// to each of 100 connected SSE streams having read the hint's "added" frame, through the real
// server, a real Badger store (synced commits) and real HTTP connections. It reports the p50,
// p99 and max over every (hint, stream) pair.
func BenchmarkHintEnqueueToSSE(b *testing.B) {
	// A cap of one keeps the queue at its usual size (each put evicts the previous hint), so the
	// state frames stay small as they are in use.
	e := newHintEnv(b, hint.Config{MaxPendingPerSession: 1, HeartbeatInterval: time.Hour}, Config{})
	type seen struct {
		id string
		at time.Time
	}
	got := make(chan seen, benchStreams*16)
	var ready sync.WaitGroup
	for i := 0; i < benchStreams; i++ {
		req, _ := http.NewRequest("GET", e.url+"/v1/hints/events", nil)
		req.Header.Set("Authorization", "Bearer "+e.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		r := &sseReader{br: bufio.NewReader(resp.Body)}
		ready.Add(1)
		go func() {
			first := true
			for {
				f, err := r.next()
				if err != nil {
					return
				}
				if f.Event == "state" && first {
					first = false
					ready.Done()
				}
				if f.Event != "hint" {
					continue
				}
				var a hint.Action
				if json.Unmarshal([]byte(f.Data), &a) == nil && a.Kind == hint.ActionAdded {
					got <- seen{id: a.Hint.ID, at: time.Now()}
				}
			}
		}()
	}
	ready.Wait()
	if n := e.q.Subscribers(); n != benchStreams {
		b.Fatalf("%d subscribers, want %d", n, benchStreams)
	}
	var lat, puts []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		var r hintPutResponse
		if st, code := e.call(b, "POST", "/v1/hints", map[string]any{"text": fmt.Sprint("bench ", i), "sessionId": "s"}, &r); st != 200 {
			b.Fatalf("put: %d %s", st, code)
		}
		puts = append(puts, time.Since(start))
		for n := 0; n < benchStreams; {
			select {
			case s := <-got:
				if s.id != r.HintID {
					b.Fatalf("stream delivered %s while waiting for %s", s.id, r.HintID)
				}
				lat = append(lat, s.at.Sub(start))
				n++
			case <-time.After(10 * time.Second):
				b.Fatalf("only %d of %d streams delivered the hint within 10s", n, benchStreams)
			}
		}
	}
	b.StopTimer()
	pct := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[min(len(d)-1, int(p*float64(len(d))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(lat, 0.50), "p50-ms")
	b.ReportMetric(pct(lat, 0.99), "p99-ms")
	b.ReportMetric(pct(lat, 1), "max-ms")
	// The put's own answer time (a synced commit): the floor under the delivery latency.
	b.ReportMetric(pct(puts, 0.50), "put-p50-ms")
	b.ReportMetric(benchStreams, "streams")
}

// BenchmarkHintTakeHTTP measures take throughput through the route: each step takes and
// confirms one hint in one transaction (POST /v1/hints/take with confirm).
func BenchmarkHintTakeHTTP(b *testing.B) {
	e := newHintEnv(b, hint.Config{}, Config{})
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		e.put(b, "s", fmt.Sprint("hint ", i))
		b.StartTimer()
		var tk hint.Take
		if st, code := e.call(b, "POST", "/v1/hints/take", map[string]any{"sessionId": "s", "confirm": true}, &tk); st != 200 || len(tk.Hints) != 1 {
			b.Fatalf("take: %d %s %+v", st, code, tk)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "takes/s")
}

// BenchmarkHintIdleStreams proves that idle streams carry nothing but heartbeat pings: 100
// streams stay connected to a queue nobody writes to, one heartbeat (10 ms) per iteration, and
// every frame after the opening must be ": ping" (the benchmark fails otherwise). It reports the
// frames other than pings (0) and the bytes per stream per heartbeat (": ping\n\n" is 8).
func BenchmarkHintIdleStreams(b *testing.B) {
	const beat = 10 * time.Millisecond
	e := newHintEnv(b, hint.Config{HeartbeatInterval: beat}, Config{})
	e.put(b, "s", "a hint from before the streams")
	var mu sync.Mutex
	var other, pings int
	var wg, ready sync.WaitGroup
	var counters []*countingReader
	for i := 0; i < benchStreams; i++ {
		req, _ := http.NewRequest("GET", e.url+"/v1/hints/events", nil)
		req.Header.Set("Authorization", "Bearer "+e.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		cr := &countingReader{r: resp.Body}
		counters = append(counters, cr)
		r := &sseReader{br: bufio.NewReader(cr)}
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				f, err := r.next()
				if err != nil {
					return
				}
				switch {
				case n == 0: // the opening: a comment and the retry
				case n == 1: // the initial state
					ready.Done()
				case f.Event == "" && f.Data == "" && f.Retry == "" && len(f.Comments) == 1 && f.Comments[0] == "ping":
					mu.Lock()
					pings++
					mu.Unlock()
				default:
					mu.Lock()
					other++
					mu.Unlock()
				}
			}
		}()
	}
	ready.Wait()
	before := 0
	for _, c := range counters {
		before += c.count()
	}
	b.ResetTimer()
	for b.Loop() {
		time.Sleep(beat)
	}
	b.StopTimer()
	beats := float64(b.Elapsed()) / float64(beat)
	after := 0
	for _, c := range counters {
		after += c.count()
	}
	mu.Lock()
	defer mu.Unlock()
	if other != 0 {
		b.Fatalf("idle streams carried %d frames other than pings", other)
	}
	if pings == 0 {
		b.Fatal("no pings arrived")
	}
	b.ReportMetric(float64(other), "non-ping-frames")
	b.ReportMetric(float64(after-before)/benchStreams/beats, "bytes/stream/beat")
}

// countingReader counts the bytes read through it.
type countingReader struct {
	mu sync.Mutex
	r  io.Reader
	n  int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.mu.Lock()
	c.n += n
	c.mu.Unlock()
	return n, err
}

func (c *countingReader) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

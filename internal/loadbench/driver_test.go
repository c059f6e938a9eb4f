package loadbench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestMeasureCountsEveryAnswer(t *testing.T) {
	var served, bg atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bg" {
			bg.Add(1)
			time.Sleep(5 * time.Millisecond)
		} else {
			served.Add(1)
		}
		if r.URL.Path == "/bad" {
			_, _ = w.Write([]byte(`{"verdict":"skip"}`))
			return
		}
		_, _ = w.Write([]byte(`{"verdict":"stop"}`))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	want := []string{`"stop"`}
	tests := []struct {
		name       string
		plan       *Plan
		conns      int
		pause      time.Duration
		failed     bool
		background bool
		maxOps     uint64
	}{
		{name: "one-conn", plan: &Plan{Addrs: []string{addr}, Request: func(int) Request { return Request{Method: "GET", Path: "/ok", Want: want} }}, conns: 1},
		{name: "eight-conns", plan: &Plan{Addrs: []string{addr}, Request: func(int) Request { return Request{Method: "GET", Path: "/ok", Want: want} }}, conns: 8},
		{name: "wrong-answer", plan: &Plan{Addrs: []string{addr}, Request: func(int) Request { return Request{Method: "GET", Path: "/bad", Want: want} }}, conns: 2, failed: true},
		{name: "wrong-status", plan: &Plan{Addrs: []string{addr}, Request: func(int) Request { return Request{Method: "GET", Path: "/ok", Status: 201} }}, conns: 1, failed: true},
		{name: "paused", plan: &Plan{Addrs: []string{addr}, Request: func(int) Request { return Request{Method: "GET", Path: "/ok", Want: want} }}, conns: 1, pause: 50 * time.Millisecond, maxOps: 7},
		{name: "custom-op", plan: &Plan{Addrs: []string{addr}, Do: func(_ context.Context, c *Conn, _ int) error {
			for range 2 {
				if _, _, err := c.Do("GET", "/ok", nil, nil); err != nil {
					return err
				}
			}
			return nil
		}}, conns: 1},
		{name: "background", plan: &Plan{Addrs: []string{addr}, Request: func(int) Request { return Request{Method: "GET", Path: "/ok", Want: want} },
			Background: &Background{Conns: 3, Addrs: []string{addr}, Request: func(int) Request { return Request{Method: "GET", Path: "/bg"} }}}, conns: 1, background: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			served.Store(0)
			bg.Store(0)
			m, err := measure(context.Background(), tt.plan, tt.conns, 300*time.Millisecond, tt.pause)
			if err != nil {
				t.Fatal(err)
			}
			perOp := uint64(1)
			if tt.plan.Do != nil {
				perOp = 2
			}
			if m.Ops == 0 || m.Ops*perOp != uint64(served.Load()) || m.Hist.Count() != m.Ops {
				t.Fatalf("%d ops, %d recorded, server answered %d", m.Ops, m.Hist.Count(), served.Load())
			}
			if tt.failed != (m.Errors == m.Ops) || tt.failed != (m.FirstError != "") {
				t.Fatalf("%d of %d failed (%s)", m.Errors, m.Ops, m.FirstError)
			}
			if tt.maxOps > 0 && m.Ops > tt.maxOps {
				t.Fatalf("%d ops in 300 ms with a 50 ms pause", m.Ops)
			}
			if m.Elapsed < 300*time.Millisecond {
				t.Fatalf("elapsed %v", m.Elapsed)
			}
			if tt.background != (m.BackgroundOps > 0) || m.BackgroundOps > uint64(bg.Load()) {
				t.Fatalf("background %d ops, server saw %d", m.BackgroundOps, bg.Load())
			}
		})
	}
}

// A server that stops answering abandons the row (Alive fails) and Abandon runs, well before
// the row's time is up.
func TestMeasureAbandonsAServerThatStopsAnswering(t *testing.T) {
	var hang atomic.Bool
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hang.Load() {
			<-release
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	defer close(release)
	var abandoned atomic.Bool
	plan := &Plan{Addrs: []string{strings.TrimPrefix(srv.URL, "http://")}, Timeout: 200 * time.Millisecond,
		Request: func(int) Request { return Request{Method: "GET", Path: "/"} },
		Alive: func(ctx context.Context) error {
			if hang.Load() {
				return errors.New("no answer")
			}
			return nil
		},
		Abandon: func() { abandoned.Store(true) }}
	time.AfterFunc(100*time.Millisecond, func() { hang.Store(true) })
	start := time.Now()
	_, err := measure(context.Background(), plan, 2, 10*time.Second, 0)
	if !errors.Is(err, errAbandoned) || !strings.Contains(err.Error(), "stopped answering") || !abandoned.Load() {
		t.Fatalf("err %v, abandoned %v", err, abandoned.Load())
	}
	if time.Since(start) > 9*time.Second { // the row had 10 s
		t.Fatalf("abandoning took %v", time.Since(start))
	}
}

func TestScheduleInterleaves(t *testing.T) {
	rows := []Row{{Name: "wasm"}, {Name: "opa"}, {Name: "idle", Conns: []int{1}}, {Name: "wide", Conns: []int{8, 64}}}
	var got []string
	for _, s := range schedule(rows, 2) {
		got = append(got, fmt.Sprintf("%s-%d", rows[s[0]].Name, s[1]))
	}
	want := "wasm-1 opa-1 idle-1 wasm-8 opa-8 wide-8 wide-64 wasm-1 opa-1 idle-1 wasm-8 opa-8 wide-8 wide-64"
	if strings.Join(got, " ") != want {
		t.Fatalf("schedule\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
}

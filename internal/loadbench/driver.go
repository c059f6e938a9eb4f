package loadbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// A Row is one line of the load table per connection count: what is sent, how, and what it
// is compared with. Rows are prepared once (Prepare), then measured in turn.
type Row struct {
	// Name identifies the row ("wasm", "opa"); the table prints it with the connection count
	// ("wasm-8").
	Name string
	// What says in a few words what the row measures (printed under the table).
	What string
	// Conns are the connection counts the row runs at; nil means {1, 8}.
	Conns []int
	// Pause is how long each connection waits after each answer before its next request; zero
	// means back to back (sustained load). A paused row measures the idle case.
	Pause time.Duration
	// Duration overrides the run's duration for this row (a paused row needs fewer seconds
	// than a sustained one for its sample); zero means the run's.
	Duration time.Duration
	// Versus names another row to compare with at the same connection count: the table prints
	// this row's figure over the other's (Metric: ReqPerSec by default).
	Versus *Versus
	// Goals are the targets printed beside the figures (never asserted).
	Goals []Goal
	// Prepare readies the row (starts or reuses its servers through e, uploads what it needs,
	// checks that the server decides as expected) and returns what its connections send. An
	// error skips the row, with the error as the reason.
	Prepare func(ctx context.Context, e *Env) (*Plan, error)
}

// Versus compares a row with another.
type Versus struct {
	Row    string
	Metric Metric
	// Minus compares by difference, this row's figure minus the other's (the Diff metric, in
	// the Metric's unit), rather than by ratio.
	Minus bool
}

// Metric is a figure of a row's result.
type Metric int

// The metrics rows are compared and judged by.
const (
	ReqPerSec Metric = iota // operations per second (higher is better)
	P50                     // median latency, in ms
	P99                     // 99th percentile latency, in ms
	Ratio                   // the row's Versus ratio
	Diff                    // the row's Versus difference (Versus.Minus): its figure minus the other row's
)

func (m Metric) String() string {
	switch m {
	case ReqPerSec:
		return "req/s"
	case P50:
		return "p50"
	case P99:
		return "p99"
	case Diff:
		return "difference"
	}
	return "ratio"
}

// Goal is a target printed beside a row's figures: Metric ≤ Max or ≥ Min (the one set), at
// Conns connections (zero: at each).
type Goal struct {
	Conns    int
	Metric   Metric
	Min, Max float64
}

// String is the goal as printed ("p99 ≤ 10 ms", "≥ 0.5× opa").
func (g Goal) String() string {
	cmp, v := "≤", g.Max
	if g.Min > 0 {
		cmp, v = "≥", g.Min
	}
	switch g.Metric {
	case P50, P99:
		return fmt.Sprintf("%s %s %s ms", g.Metric, cmp, trim(v))
	case Ratio:
		return fmt.Sprintf("%s %s×", cmp, trim(v))
	case Diff:
		return fmt.Sprintf("difference %s %s", cmp, trim(v))
	}
	return fmt.Sprintf("%s %s %s", g.Metric, cmp, trim(v))
}

func (g Goal) met(v float64) bool {
	if g.Min > 0 {
		return v >= g.Min
	}
	return v <= g.Max
}

func trim(v float64) string { return fmt.Sprintf("%g", v) }

// Plan is what a prepared row's connections send. Each connection repeats one operation: the
// fixed request Request gives for it (rendered once, as wrk sends it), or Do for an operation
// that needs more (several requests, a body that changes). Its latency is the operation's.
type Plan struct {
	// Addrs are the servers (host:port); connection i talks to Addrs[i % len(Addrs)].
	Addrs []string
	// Request returns connection conn's request (conn counts from 0).
	Request func(conn int) Request
	// Do performs one operation on c (used when Request is nil); an error counts as a failed
	// operation.
	Do func(ctx context.Context, c *Conn, conn int) error
	// Timeout bounds each operation; zero means DefaultTimeout.
	Timeout time.Duration
	// Background is load sent at the same time as the measured one, not measured itself (the
	// fault storm): nil for none.
	Background *Background
	// Alive reports whether the server still answers; the driver asks it after an operation
	// failed on the connection (a timeout, a refused or reset connection), and abandons the row
	// (printed as skipped, with the reason) when it fails too. Nil: such failures only count.
	Alive func(ctx context.Context) error
	// Abandon, if set, is called once when the row is abandoned (to stop a server that no
	// longer answers, so that it does not burn the CPU the next rows measure with).
	Abandon func()
}

// Background is unmeasured load: Conns connections, each repeating its operation back to back
// while the row is measured. Errors and timeouts only count.
type Background struct {
	Conns   int
	Addrs   []string
	Request func(conn int) Request
	Timeout time.Duration
}

// DefaultTimeout bounds an operation whose plan sets none.
const DefaultTimeout = 30 * time.Second

// Request is one HTTP request and what its answer must be.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
	// Status is the status every answer must have; zero means 200.
	Status int
	// Want are substrings every answer's body must contain.
	Want []string
}

// check returns an error unless status and body are what r wants.
func (r Request) check(status int, body []byte) error {
	want := r.Status
	if want == 0 {
		want = http.StatusOK
	}
	if status != want {
		return fmt.Errorf("status %d, want %d: %.300s", status, want, body)
	}
	for _, w := range r.Want {
		if !bytes.Contains(body, []byte(w)) {
			return fmt.Errorf("answer without %q: %.300s", w, body)
		}
	}
	return nil
}

// Measurement is what one run of a row at one connection count recorded.
type Measurement struct {
	Hist    Histogram
	Ops     uint64
	Errors  uint64
	Elapsed time.Duration
	// FirstError is the first failed operation's error.
	FirstError string
	// Background counts the background operations (and those that failed).
	BackgroundOps, BackgroundErrors uint64
}

// ReqPerSec is completed operations (failed ones included) per second.
func (m *Measurement) ReqPerSec() float64 {
	if m.Elapsed <= 0 {
		return 0
	}
	return float64(m.Ops) / m.Elapsed.Seconds()
}

func (m *Measurement) merge(o *Measurement) {
	m.Hist.Merge(&o.Hist)
	m.Ops += o.Ops
	m.Errors += o.Errors
	m.Elapsed += o.Elapsed
	m.BackgroundOps += o.BackgroundOps
	m.BackgroundErrors += o.BackgroundErrors
	if m.FirstError == "" {
		m.FirstError = o.FirstError
	}
}

// errAbandoned wraps the reason a row was abandoned mid-run.
var errAbandoned = errors.New("abandoned")

// measure runs plan on conns connections for d and returns what they recorded.
func measure(ctx context.Context, p *Plan, conns int, d, pause time.Duration) (*Measurement, error) {
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		abandonOnce sync.Once
		abandonErr  error
		checking    atomic.Bool // one connection at a time asks Alive
	)
	abandon := func(err error) {
		abandonOnce.Do(func() { abandonErr = err; cancel() })
	}

	// Background load first, so that the measured connections meet it from their start.
	var bgOps, bgErrs atomic.Uint64
	var bg sync.WaitGroup
	bgCtx, bgCancel := context.WithCancel(ctx)
	defer bgCancel()
	if b := p.Background; b != nil {
		bt := b.Timeout
		if bt <= 0 {
			bt = DefaultTimeout
		}
		for i := range b.Conns {
			r := b.Request(i)
			c := NewConn(b.Addrs[i%len(b.Addrs)], bt)
			raw := c.Render(r.Method, r.Path, r.Header, r.Body)
			bg.Go(func() {
				defer c.Close()
				stop := context.AfterFunc(bgCtx, c.Interrupt) // unblocks a read in flight
				defer stop()
				for bgCtx.Err() == nil {
					st, body, err := c.Send(raw, r.Method == http.MethodHead)
					if bgCtx.Err() != nil {
						return
					}
					bgOps.Add(1)
					if err != nil || r.check(st, body) != nil {
						bgErrs.Add(1)
					}
					if err != nil && transportError(err) {
						select { // a server that refuses connections is not hammered in a loop
						case <-time.After(10 * time.Millisecond):
						case <-bgCtx.Done():
						}
					}
				}
			})
		}
	}

	ms := make([]Measurement, conns)
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for i := range conns {
		m := &ms[i]
		c := NewConn(p.Addrs[i%len(p.Addrs)], timeout)
		var r Request
		var raw []byte
		if p.Request != nil {
			r = p.Request(i)
			raw = c.Render(r.Method, r.Path, r.Header, r.Body)
		}
		wg.Go(func() {
			defer c.Close()
			stop := context.AfterFunc(ctx, c.Interrupt)
			defer stop()
			for ctx.Err() == nil {
				t0 := time.Now()
				var err error
				if raw != nil {
					var st int
					var body []byte
					st, body, err = c.Send(raw, r.Method == http.MethodHead)
					if err == nil {
						err = r.check(st, body)
					}
				} else {
					err = p.Do(ctx, c, i)
				}
				t1 := time.Now()
				if ctx.Err() != nil {
					return // abandoned: this operation was cut, not completed
				}
				m.Hist.Record(t1.Sub(t0))
				m.Ops++
				if err != nil {
					m.Errors++
					if m.FirstError == "" {
						m.FirstError = err.Error()
					}
					if transportError(err) && p.Alive != nil && checking.CompareAndSwap(false, true) {
						actx, acancel := context.WithTimeout(ctx, 5*time.Second)
						aerr := p.Alive(actx)
						acancel()
						if aerr != nil {
							abandon(fmt.Errorf("%w: the server stopped answering: %v, then %v", errAbandoned, err, aerr))
							return
						}
						checking.Store(false)
					}
				}
				if !t1.Before(end) {
					return
				}
				if pause > 0 {
					select {
					case <-time.After(pause):
					case <-ctx.Done():
						return
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	bgCancel()
	bg.Wait()
	if abandonErr != nil {
		if p.Abandon != nil {
			p.Abandon()
		}
		return nil, abandonErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	total := &Measurement{Elapsed: elapsed, BackgroundOps: bgOps.Load(), BackgroundErrors: bgErrs.Load()}
	for i := range ms {
		total.Hist.Merge(&ms[i].Hist)
		total.Ops += ms[i].Ops
		total.Errors += ms[i].Errors
		if total.FirstError == "" {
			total.FirstError = ms[i].FirstError
		}
	}
	return total, nil
}

// connsOf returns a row's connection counts.
func (r *Row) connsOf() []int {
	if len(r.Conns) == 0 {
		return []int{1, 8}
	}
	return r.Conns
}

// schedule is the order of the runs: in each round, for each connection count in increasing
// order, every row that runs at it, in table order (wasm-1, opa-1, bash-1, healthz-1, wasm-8,
// opa-8, …). Interleaving keeps a drift of the machine's load from favouring one row.
func schedule(rows []Row, rounds int) [][2]int {
	var counts []int
	for _, r := range rows {
		for _, c := range r.connsOf() {
			if !slices.Contains(counts, c) {
				counts = append(counts, c)
			}
		}
	}
	slices.Sort(counts)
	var out [][2]int
	for range max(rounds, 1) {
		for _, c := range counts {
			for i, r := range rows {
				if slices.Contains(r.connsOf(), c) {
					out = append(out, [2]int{i, c})
				}
			}
		}
	}
	return out
}

// transportError reports whether err is the connection's (a timeout, a refused, reset or
// closed connection, a malformed answer) rather than an unexpected answer.
func transportError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, errMalformed)
}

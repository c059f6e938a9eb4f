package loadbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pixie-dev/pixie/internal/clip"
)

// Options configure a run.
type Options struct {
	// Duration is how long each row runs at each connection count, over all rounds; zero means
	// 10 s. A row's own Duration overrides it.
	Duration time.Duration
	// Rounds splits each row's time into this many runs, interleaved with the other rows'
	// (zero: 1, one run of Duration each).
	Rounds int
	// Only, when set, keeps the rows whose name it matches (a row's Versus peer is kept too).
	Only *regexp.Regexp
	// Log receives a line per prepared row and per run (nil: discarded).
	Log io.Writer
}

// Result is one row at one connection count.
type Result struct {
	Row   *Row
	Conns int
	// M is what was measured; nil when the row was skipped (Skipped says why).
	M       *Measurement
	Skipped string
}

// Name is the row's name with the connection count ("wasm-8").
func (r *Result) Name() string { return fmt.Sprintf("%s-%d", r.Row.Name, r.Conns) }

// Report is a run's results and the machine's state around it.
type Report struct {
	Results []Result
	// LoadBefore and LoadAfter are /proc/loadavg's first three fields.
	LoadBefore, LoadAfter string
	Started               time.Time
	Took                  time.Duration
	ServerCPUs            string
	DriverCPUs            string
}

// Run prepares every row, then runs them in turn (interleaved: see schedule), and returns the
// results in table order. A row whose preparation fails, or that is abandoned mid-run, is
// skipped with the reason; the others still run.
func Run(ctx context.Context, e *Env, rows []Row, o Options) *Report {
	rows = filterRows(rows, o.Only)
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	rep := &Report{LoadBefore: loadAvg(), Started: time.Now(), ServerCPUs: e.ServerCPUs, DriverCPUs: driverCPUs()}
	plans := make([]*Plan, len(rows))
	skipped := make([]string, len(rows))
	for i := range rows {
		r := &rows[i]
		logf("%s prepare %s: %s", time.Now().Format("15:04:05"), r.Name, r.What)
		p, err := r.Prepare(ctx, e)
		if err != nil {
			skipped[i] = err.Error()
			logf("  skipped: %v", err)
			continue
		}
		plans[i] = p
	}
	res := map[[2]int]*Measurement{}
	rounds := max(o.Rounds, 1)
	for _, run := range schedule(rows, rounds) {
		i, conns := run[0], run[1]
		if skipped[i] != "" || ctx.Err() != nil {
			continue
		}
		r := &rows[i]
		d := o.Duration
		if d <= 0 {
			d = 10 * time.Second
		}
		if r.Duration > 0 {
			d = r.Duration
		}
		d /= time.Duration(rounds)
		m, err := measure(ctx, plans[i], conns, d, r.Pause)
		if err != nil {
			if errors.Is(err, errAbandoned) {
				skipped[i] = err.Error()
				logf("%s-%d: %v", r.Name, conns, err)
				continue
			}
			skipped[i] = err.Error()
			continue
		}
		logf("%s %s-%d: %.1f s, %d ops (%d failed), %.0f/s, p50 %s ms, p99 %s ms%s", time.Now().Format("15:04:05"), r.Name, conns, m.Elapsed.Seconds(), m.Ops, m.Errors,
			m.ReqPerSec(), ms(m.Hist.Quantile(0.5)), ms(m.Hist.Quantile(0.99)), background(m))
		if prev := res[run]; prev != nil {
			prev.merge(m)
		} else {
			res[run] = m
		}
	}
	for i := range rows {
		for _, c := range rows[i].connsOf() {
			out := Result{Row: &rows[i], Conns: c, M: res[[2]int{i, c}], Skipped: skipped[i]}
			if out.M == nil && out.Skipped == "" {
				out.Skipped = "not run"
			}
			if out.Skipped != "" {
				out.M = nil
			}
			rep.Results = append(rep.Results, out)
		}
	}
	rep.LoadAfter = loadAvg()
	rep.Took = time.Since(rep.Started)
	return rep
}

func background(m *Measurement) string {
	if m.BackgroundOps == 0 {
		return ""
	}
	return fmt.Sprintf("; background %d ops (%d failed)", m.BackgroundOps, m.BackgroundErrors)
}

// filterRows keeps the rows only matches, and the rows they compare with.
func filterRows(rows []Row, only *regexp.Regexp) []Row {
	if only == nil {
		return rows
	}
	keep := map[string]bool{}
	for _, r := range rows {
		if only.MatchString(r.Name) {
			keep[r.Name] = true
			if r.Versus != nil {
				keep[r.Versus.Row] = true
			}
		}
	}
	var out []Row
	for _, r := range rows {
		if keep[r.Name] {
			out = append(out, r)
		}
	}
	return out
}

// find returns the result of row name at conns.
func (rep *Report) find(name string, conns int) *Result {
	for i := range rep.Results {
		if r := &rep.Results[i]; r.Row.Name == name && r.Conns == conns {
			return r
		}
	}
	return nil
}

// Metric returns a result's figure: req/s, p50 or p99 in ms, or its Versus ratio (or
// difference, with Versus.Minus); ok is false when it has none (skipped, no peer).
func (rep *Report) Metric(r *Result, m Metric) (float64, bool) {
	if r.M == nil {
		return 0, false
	}
	switch m {
	case ReqPerSec:
		return r.M.ReqPerSec(), true
	case P50:
		return msf(r.M.Hist.Quantile(0.5)), true
	case P99:
		return msf(r.M.Hist.Quantile(0.99)), true
	}
	if r.Row.Versus == nil || r.Row.Versus.Minus != (m == Diff) {
		return 0, false
	}
	peer := rep.find(r.Row.Versus.Row, r.Conns)
	if peer == nil {
		return 0, false
	}
	a, ok1 := rep.Metric(r, r.Row.Versus.Metric)
	b, ok2 := rep.Metric(peer, r.Row.Versus.Metric)
	if !ok1 || !ok2 || (b == 0 && m == Ratio) {
		return 0, false
	}
	if m == Diff {
		return a - b, true
	}
	return a / b, true
}

// diffAt is a result's difference to its Versus row by metric m rather than the Versus one.
func (rep *Report) diffAt(r *Result, m Metric) (float64, bool) {
	if r.M == nil || r.Row.Versus == nil {
		return 0, false
	}
	peer := rep.find(r.Row.Versus.Row, r.Conns)
	if peer == nil || peer.M == nil {
		return 0, false
	}
	a, _ := rep.Metric(r, m)
	b, _ := rep.Metric(peer, m)
	return a - b, true
}

// Print writes the table: one line per row and connection count, then the comparisons, the
// targets (printed beside the figures, never asserted) and the skipped rows with their reason.
func (rep *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "\n## make bench — sustained load (back to back, kept-alive connections, every latency recorded)\n")
	fmt.Fprintf(w, "load average before %s, after %s; %d CPUs; servers pinned to %s, driver to %s; took %s\n",
		rep.LoadBefore, rep.LoadAfter, runtime.NumCPU(), orAll(rep.ServerCPUs), orAll(rep.DriverCPUs), rep.Took.Round(time.Second))
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "row\tconns\tseconds\tops\tfailed\treq/s\tp50 ms\tp99 ms\tmax ms\tvs\t\n")
	for i := range rep.Results {
		r := &rep.Results[i]
		if r.M == nil {
			fmt.Fprintf(tw, "%s\t%d\t-\t-\t-\t-\t-\t-\t-\tskipped\t\n", r.Row.Name, r.Conns)
			continue
		}
		vs := "-"
		if v, ok := rep.Metric(r, Ratio); ok {
			vs = fmt.Sprintf("%.3g× %s %s", v, r.Row.Versus.Row, r.Row.Versus.Metric)
		} else if v, ok := rep.Metric(r, Diff); ok {
			vs = fmt.Sprintf("%+.3g %s %s", v, r.Row.Versus.Row, r.Row.Versus.Metric)
			if v99, ok := rep.diffAt(r, P99); ok && r.Row.Versus.Metric == P50 {
				vs += fmt.Sprintf(", %+.3g p99", v99)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%d\t%d\t%.0f\t%s\t%s\t%s\t%s\t\n", r.Row.Name, r.Conns, r.M.Elapsed.Seconds(), r.M.Ops, r.M.Errors,
			r.M.ReqPerSec(), ms(r.M.Hist.Quantile(0.5)), ms(r.M.Hist.Quantile(0.99)), ms(r.M.Hist.Max()), vs)
	}
	tw.Flush()

	fmt.Fprintf(w, "\nTargets (printed, not asserted):\n")
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for i := range rep.Results {
		r := &rep.Results[i]
		for _, g := range r.Row.Goals {
			if g.Conns != 0 && g.Conns != r.Conns {
				continue
			}
			label := g.String()
			if g.Metric == Ratio && r.Row.Versus != nil {
				label = fmt.Sprintf("%s %s ≥ %s× %s", r.Row.Versus.Metric, r.Row.Name, trim(g.Min), r.Row.Versus.Row)
				if g.Min == 0 {
					label = fmt.Sprintf("%s %s ≤ %s× %s", r.Row.Versus.Metric, r.Row.Name, trim(g.Max), r.Row.Versus.Row)
				}
			}
			if g.Metric == Diff && r.Row.Versus != nil {
				label = fmt.Sprintf("%s %s − %s ≤ %s ms", r.Row.Versus.Metric, r.Row.Name, r.Row.Versus.Row, trim(g.Max))
			}
			v, ok := rep.Metric(r, g.Metric)
			verdict, fig := "no figure", "-"
			if ok {
				verdict = "MISSED"
				if g.met(v) {
					verdict = "met"
				}
				fig = fmt.Sprintf("%.3g", v)
				if g.Metric == Ratio {
					fig += "×"
				} else if g.Metric == P50 || g.Metric == P99 || g.Metric == Diff {
					fig += " ms"
				}
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", r.Name(), label, fig, verdict)
		}
	}
	tw.Flush()

	first := true
	for i := range rep.Results {
		r := &rep.Results[i]
		if r.M != nil && r.M.FirstError != "" {
			if first {
				fmt.Fprintf(w, "\nFailed operations (first error of each row):\n")
				first = false
			}
			fmt.Fprintf(w, "  %s: %d of %d failed: %s\n", r.Name(), r.M.Errors, r.M.Ops, oneLine(r.M.FirstError))
		}
	}
	seen := map[string]bool{}
	first = true
	for i := range rep.Results {
		r := &rep.Results[i]
		if r.Skipped == "" || seen[r.Row.Name] {
			continue
		}
		seen[r.Row.Name] = true
		if first {
			fmt.Fprintf(w, "\nSkipped rows:\n")
			first = false
		}
		fmt.Fprintf(w, "  %s: SKIPPED: %s\n", r.Row.Name, oneLine(r.Skipped))
	}
	fmt.Fprintf(w, "\nRows:\n")
	seen = map[string]bool{}
	for i := range rep.Results {
		r := rep.Results[i].Row
		if !seen[r.Name] {
			seen[r.Name] = true
			fmt.Fprintf(w, "  %s: %s\n", r.Name, r.What)
		}
	}
}

func oneLine(s string) string {
	return clip.BytesMark(clip.OneLine(s), 600, "…")
}

func orAll(s string) string {
	if s == "" {
		return "any CPU"
	}
	return "CPU " + s
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3g", msf(d)) }

func msf(d time.Duration) float64 { return float64(d) / 1e6 }

// loadAvg is /proc/loadavg's 1, 5 and 15 minute averages ("?" without /proc).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

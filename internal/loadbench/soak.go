package loadbench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/pixie-dev/pixie/internal/gate"
)

// The soak (`make soak`): one `pixie serve` with ten WASM modules warm, the wasm row's gate
// (block-risky-commands stopping `rm -rf /`) sent back to back on SoakOptions.Conns connections
// for a long time, and a line every SoakOptions.Every: req/s, p50, p99 of that interval, the
// server's resident set, its Go heap and the size of its data directory on disk. At the end a
// verdict against SoakTargets. It is what make bench's rows cannot show: memory, disk and tail
// latency that drift over minutes.

// SoakModules are the ten modules warm during the soak (those of internal/wasmit's
// BenchmarkServerRSS10Modules): the six example guests and four test guests. The measured gate's
// module is block-risky-commands.
var SoakModules = []string{"only-search-tools", "measure-subtitle", "translate-check", "claim-check", "list-changed-files",
	"block-risky-commands", "testdata/echo", "testdata/fs-probe", "testdata/fault-badjson", "testdata/fault-calls"}

// SoakOptions configure Soak. The zero value is make soak's: 10 minutes, a line a minute, 8
// connections.
type SoakOptions struct {
	// Duration is the whole soak; zero means 10 minutes.
	Duration time.Duration
	// Every is the interval of a line; zero means a minute.
	Every time.Duration
	// Conns is the number of connections; zero means 8.
	Conns int
	// Set are settings passed to `pixie serve` (--set key=value), e.g. records.maxBytes=64MiB.
	Set []string
	// Profiles, when set, is a folder where the server's heap profile is saved after each line
	// (heap-<n>.pb.gz) and a CPU profile of the last interval's first 10 s (cpu-last.pb.gz);
	// `go tool pprof -sample_index=inuse_space bin/pixie <file>` reads them.
	Profiles string
	// Log receives progress lines (nil: discarded).
	Log io.Writer
}

// SoakTargets are what the verdict checks (issue 32).
type SoakTargets struct {
	// RSSMaxMiB bounds the resident set at every line.
	RSSMaxMiB float64
	// RSSDrift bounds the last line's resident set against the second's (0.2: within 20 %).
	RSSDrift float64
	// P99MaxMs bounds every line's p99.
	P99MaxMs float64
}

// DefaultSoakTargets are issue 32's.
var DefaultSoakTargets = SoakTargets{RSSMaxMiB: 512, RSSDrift: 0.2, P99MaxMs: 10}

// SoakSample is one line of the soak: the interval that ended At after the start.
type SoakSample struct {
	At      time.Duration
	Elapsed time.Duration
	Ops     uint64
	Errors  uint64
	Hist    Histogram
	// RSSMiB is the server's VmRSS at the end of the interval, AnonMiB and FileMiB its
	// anonymous and file-backed parts; HeapMiB its Go heap in use (go_memstats_heap_inuse_bytes)
	// and GoMiB all the memory the Go runtime holds from the system and has not released
	// (go_memstats_sys_bytes − go_memstats_heap_released_bytes: the heap with its free spans,
	// stacks, metadata), -1 when /metrics did not answer.
	RSSMiB, AnonMiB, FileMiB, HeapMiB, GoMiB float64
	// DataBytes is the disk space the data directory takes (allocated blocks, as du counts).
	DataBytes int64
	// Records is the size of the records the server keeps, by its own estimate
	// (pixie_gate_records_bytes), -1 when it reports none.
	Records float64
}

// SoakReport is a soak's lines, and what it ran against.
type SoakReport struct {
	Samples    []SoakSample
	Conns      int
	Modules    int
	Set        []string
	LoadBefore string
	LoadAfter  string
	// MaxBytes is the server's records.maxBytes (what the data directory is judged by), 0 when
	// unknown.
	MaxBytes int64
	// IdleRSSMiB and IdleHeapMiB are the server's resident set and Go heap with the modules
	// warm, before the load.
	IdleRSSMiB, IdleHeapMiB, IdleGoMiB float64
	// FirstError is the first failed operation's error.
	FirstError string
}

// Soak starts a server in e, makes SoakModules warm, and runs the soak (see the package
// comment of this file). It stops early, returning what it has, when ctx ends.
func Soak(ctx context.Context, e *Env, o SoakOptions) (*SoakReport, error) {
	if o.Duration <= 0 {
		o.Duration = 10 * time.Minute
	}
	if o.Every <= 0 {
		o.Every = time.Minute
	}
	if o.Conns <= 0 {
		o.Conns = 8
	}
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	set := append([]string{"server.pprof=true"}, o.Set...)
	p, err := e.StartPixie(ctx, "soak", PixieOptions{Set: set})
	if err != nil {
		return nil, err
	}
	cwd, err := e.Dir("cwd")
	if err != nil {
		return nil, err
	}
	// Ten modules, each the rule of its own gate and preset; each evaluated once so that it is
	// compiled and its pool filled.
	gs := gate.Set{}
	measured := ""
	for i, g := range SoakModules {
		wasm, err := e.Guest(ctx, g)
		if err != nil {
			return nil, fmt.Errorf("guest %s: %w", g, err)
		}
		name := fmt.Sprintf("m%d-%s", i, filepath.Base(g))
		if err := p.PushModule(ctx, name, wasm); err != nil {
			return nil, err
		}
		gs.Gates = append(gs.Gates, toolGate(name, moduleRule(name), 60))
		gs.Presets = append(gs.Presets, gate.Preset{Name: name, Gates: []gate.Attachment{{Gate: name, Enabled: true}}})
		if g == "block-risky-commands" {
			measured = name
		}
	}
	if err := p.AddGates(ctx, gs); err != nil {
		return nil, err
	}
	for _, g := range gs.Gates {
		if _, err := p.Evaluate(ctx, gate.EvalRequest{Point: "tool-before", Turn: 1, Tool: &gate.Tool{Name: "Bash", Args: []byte(`{"command":"ls"}`)},
			Target: `{"command":"ls"}`, Session: gate.Session{ID: "warm-" + g.Name, Preset: g.Name, Cwd: cwd}}); err != nil {
			return nil, fmt.Errorf("warm %s: %w", g.Name, err)
		}
	}
	if err := checkGate(ctx, p, measured, cwd); err != nil {
		return nil, err
	}
	rep := &SoakReport{Conns: o.Conns, Modules: len(SoakModules), Set: o.Set, LoadBefore: loadAvg(), MaxBytes: maxBytesOf(ctx, p)}
	// The resident set with the modules warm, before the load (once the pools have refilled).
	time.Sleep(2 * time.Second)
	rep.IdleRSSMiB, _ = p.RSSMiB()
	rep.IdleHeapMiB, rep.IdleGoMiB, _ = goMemory(serverMetrics(ctx, p))
	if o.Profiles != "" {
		if err := os.MkdirAll(o.Profiles, 0o755); err != nil {
			return nil, err
		}
		if err := saveProfile(ctx, p, "/debug/pprof/heap", filepath.Join(o.Profiles, "heap-0.pb.gz")); err != nil {
			logf("  heap profile: %v", err)
		}
	}
	logf("soak: %d connections for %s, a line every %s, %d modules warm (RSS %.0f MiB, heap %.0f MiB); server pid %d, home %s", o.Conns, o.Duration, o.Every,
		len(SoakModules), rep.IdleRSSMiB, rep.IdleHeapMiB, p.Cmd.Process.Pid, p.Home)

	// Each connection records into the histogram of the current interval; the sampler swaps them.
	type slot struct {
		mu   sync.Mutex
		hist Histogram
		ops  uint64
		errs uint64
	}
	slots := make([]*slot, o.Conns)
	var firstErr sync.Once
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i := range o.Conns {
		s := &slot{}
		slots[i] = s
		r := EvaluateRequest(p, fmt.Sprintf("soak-%d", i), measured, cwd, BenchArgs, []string{`"action":"blocked"`, `"concludedBy":"hook-script"`})
		c := NewConn(p.Addr, DefaultTimeout)
		raw := c.Render(r.Method, r.Path, r.Header, r.Body)
		wg.Go(func() {
			defer c.Close()
			stop := context.AfterFunc(runCtx, c.Interrupt)
			defer stop()
			for runCtx.Err() == nil {
				t0 := time.Now()
				st, body, err := c.Send(raw, false)
				if err == nil {
					err = r.check(st, body)
				}
				d := time.Since(t0)
				if runCtx.Err() != nil {
					return
				}
				s.mu.Lock()
				s.hist.Record(d)
				s.ops++
				if err != nil {
					s.errs++
				}
				s.mu.Unlock()
				if err != nil {
					firstErr.Do(func() { rep.FirstError = err.Error() })
					if transportError(err) {
						if aerr := p.Alive(runCtx); aerr != nil {
							rep.FirstError += "; then the server stopped answering: " + aerr.Error()
							cancel()
							return
						}
					}
				}
			}
		})
	}
	start := time.Now()
	last := start
	tick := time.NewTicker(o.Every)
	defer tick.Stop()
	n := 0
	ending := false
	for done := false; !done; {
		select {
		case <-runCtx.Done():
			done = true
		case <-tick.C:
		}
		now := time.Now()
		if done && now.Sub(last) < o.Every/4 {
			break // a stub of an interval says nothing
		}
		smp := SoakSample{At: now.Sub(start), Elapsed: now.Sub(last)}
		for _, s := range slots {
			s.mu.Lock()
			smp.Hist.Merge(&s.hist)
			smp.Ops += s.ops
			smp.Errors += s.errs
			s.hist, s.ops, s.errs = Histogram{}, 0, 0
			s.mu.Unlock()
		}
		last = now
		smp.RSSMiB, _ = p.RSSMiB()
		smp.AnonMiB, smp.FileMiB, _ = rssPartsMiB(p.Cmd.Process.Pid)
		m := serverMetrics(ctx, p)
		smp.HeapMiB, smp.GoMiB, smp.Records = goMemory(m)
		if v, ok := m["pixie_gate_records_bytes"]; ok {
			smp.Records = v
		}
		smp.DataBytes = diskUsage(filepath.Join(p.Home, "data"))
		rep.Samples = append(rep.Samples, smp)
		n++
		logf("%s", rep.line(len(rep.Samples)-1))
		if o.Profiles != "" && ctx.Err() == nil {
			if err := saveProfile(ctx, p, "/debug/pprof/heap", filepath.Join(o.Profiles, fmt.Sprintf("heap-%d.pb.gz", n))); err != nil {
				logf("  heap profile: %v", err)
			}
		}
		if !done && !ending && now.Sub(start)+o.Every > o.Duration {
			ending = true
			// The last interval: its CPU profile, then the end.
			if o.Profiles != "" {
				sec := min(10, int(o.Every/time.Second))
				go func() {
					if err := saveProfile(ctx, p, fmt.Sprintf("/debug/pprof/profile?seconds=%d", max(sec, 1)), filepath.Join(o.Profiles, "cpu-last.pb.gz")); err != nil {
						logf("  cpu profile: %v", err)
					}
				}()
			}
			time.AfterFunc(o.Duration-now.Sub(start), cancel)
		}
	}
	cancel()
	wg.Wait()
	rep.LoadAfter = loadAvg()
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}
	return rep, nil
}

// line renders sample i as make soak prints it.
func (r *SoakReport) line(i int) string {
	s := &r.Samples[i]
	heap := "-"
	if s.HeapMiB >= 0 {
		heap = fmt.Sprintf("%.0f", s.HeapMiB)
	}
	goMem := "-"
	if s.GoMiB >= 0 {
		goMem = fmt.Sprintf("%.0f", s.GoMiB)
	}
	recs := ""
	if s.Records >= 0 {
		recs = fmt.Sprintf("  records %s", mib(int64(s.Records)))
	}
	return fmt.Sprintf("soak %6s  %5.0f req/s  p50 %5s ms  p99 %5s ms  max %5s ms  RSS %4.0f MiB (anon %.0f, files %.0f; Go %s, heap %s)  data %s%s  failed %d",
		s.At.Round(time.Second), float64(s.Ops)/s.Elapsed.Seconds(), ms(s.Hist.Quantile(0.5)), ms(s.Hist.Quantile(0.99)),
		ms(s.Hist.Max()), s.RSSMiB, s.AnonMiB, s.FileMiB, goMem, heap, mib(s.DataBytes), recs, s.Errors)
}

// goMemory reads the Go heap in use, the Go runtime's unreleased memory (both MiB) and the
// records' size (bytes) from /metrics; -1 for what it does not show.
func goMemory(m map[string]float64) (heap, goMem, records float64) {
	heap, goMem, records = -1, -1, -1
	if v, ok := m["go_memstats_heap_inuse_bytes"]; ok {
		heap = v / (1 << 20)
	}
	sys, ok1 := m["go_memstats_sys_bytes"]
	rel, ok2 := m["go_memstats_heap_released_bytes"]
	if ok1 && ok2 {
		goMem = (sys - rel) / (1 << 20)
	}
	if v, ok := m["pixie_gate_records_bytes"]; ok {
		records = v
	}
	return heap, goMem, records
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// Verdicts are the soak's checks against t, each with its figures and whether it was met.
func (r *SoakReport) Verdicts(t SoakTargets) []Verdict {
	var out []Verdict
	if len(r.Samples) == 0 {
		return []Verdict{{What: "a soak line", Figure: "none", Met: false}}
	}
	worstRSS, worstP99 := 0.0, 0.0
	for _, s := range r.Samples {
		worstRSS = max(worstRSS, s.RSSMiB)
		worstP99 = max(worstP99, msf(s.Hist.Quantile(0.99)))
	}
	out = append(out, Verdict{What: fmt.Sprintf("RSS ≤ %g MiB every line", t.RSSMaxMiB), Figure: fmt.Sprintf("max %.0f MiB", worstRSS), Met: worstRSS <= t.RSSMaxMiB})
	if len(r.Samples) >= 3 {
		second, lastS := r.Samples[1].RSSMiB, r.Samples[len(r.Samples)-1].RSSMiB
		drift := (lastS - second) / second
		out = append(out, Verdict{What: fmt.Sprintf("last line's RSS within %g %% of the second's", t.RSSDrift*100),
			Figure: fmt.Sprintf("%.0f → %.0f MiB (%+.1f %%)", second, lastS, drift*100), Met: drift <= t.RSSDrift && drift >= -t.RSSDrift})
	} else {
		out = append(out, Verdict{What: "last line's RSS against the second's", Figure: "fewer than 3 lines", Met: false})
	}
	out = append(out, Verdict{What: fmt.Sprintf("p99 ≤ %g ms every line", t.P99MaxMs), Figure: fmt.Sprintf("max %.3g ms", worstP99), Met: worstP99 <= t.P99MaxMs})
	if r.MaxBytes > 0 {
		var worst int64
		for _, s := range r.Samples {
			worst = max(worst, s.DataBytes)
		}
		bound := DataDirBound(r.MaxBytes)
		out = append(out, Verdict{What: fmt.Sprintf("data dir ≤ %s (records.maxBytes %s + Badger's slack)", mib(bound), mib(r.MaxBytes)),
			Figure: "max " + mib(worst), Met: worst <= bound})
	} else {
		out = append(out, Verdict{What: "data dir within records.maxBytes", Figure: "no records.maxBytes (unbounded)", Met: false})
	}
	var failed uint64
	for _, s := range r.Samples {
		failed += s.Errors
	}
	out = append(out, Verdict{What: "no failed request", Figure: fmt.Sprint(failed), Met: failed == 0})
	return out
}

// DataDirBound is what the data directory may take on disk with records.maxBytes of records:
// the records themselves, and what Badger keeps beside them: its memtables' logs, and deleted
// records that compaction has not rewritten yet (docs/bench.md).
func DataDirBound(maxBytes int64) int64 { return maxBytes + maxBytes/4 + 64<<20 }

// Verdict is one check of the soak.
type Verdict struct {
	What, Figure string
	Met          bool
}

// Print writes the soak's table and its verdict.
func (r *SoakReport) Print(w io.Writer, t SoakTargets) bool {
	fmt.Fprintf(w, "\n## make soak — %d connections back to back on the WASM gate, %d modules warm", r.Conns, r.Modules)
	if len(r.Set) > 0 {
		fmt.Fprintf(w, ", --set %s", strings.Join(r.Set, " --set "))
	}
	fmt.Fprintf(w, "\nload average before %s, after %s; before the load: RSS %.0f MiB (Go %.0f, heap %.0f)\n", r.LoadBefore, r.LoadAfter, r.IdleRSSMiB, r.IdleGoMiB, r.IdleHeapMiB)
	for i := range r.Samples {
		fmt.Fprintln(w, r.line(i))
	}
	if r.FirstError != "" {
		fmt.Fprintf(w, "first failure: %s\n", oneLine(r.FirstError))
	}
	ok := true
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nTargets:")
	for _, v := range r.Verdicts(t) {
		verdict := "met"
		if !v.Met {
			verdict, ok = "MISSED", false
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", v.What, v.Figure, verdict)
	}
	tw.Flush()
	if ok {
		fmt.Fprintln(w, "soak verdict: every target met")
	} else {
		fmt.Fprintln(w, "soak verdict: MISSED (see above)")
	}
	return ok
}

// diskUsage is the disk space the files under dir take (allocated blocks, as du counts them:
// Badger's logs are sparse files of a larger apparent size).
func diskUsage(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		} else {
			total += info.Size()
		}
		return nil
	})
	return total
}

// serverMetrics reads the server's /metrics (Prometheus text) into name → value, for the
// samples without labels.
func serverMetrics(ctx context.Context, p *Pixie) map[string]float64 {
	out := map[string]float64{}
	raw, err := p.Call(ctx, http.MethodGet, "/metrics", "", nil)
	if err != nil {
		return out
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || strings.Contains(line, "{") {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			out[name] = v
		}
	}
	return out
}

// maxBytesOf is the server's records.maxBytes, from its /metrics (0 when it does not say).
func maxBytesOf(ctx context.Context, p *Pixie) int64 {
	m := serverMetrics(ctx, p)
	if v, ok := m["pixie_gate_records_max_bytes"]; ok {
		return int64(v)
	}
	return 0
}

// saveProfile saves the server's profile at path (a /debug/pprof/ route) to file.
func saveProfile(ctx context.Context, p *Pixie, path, file string) error {
	raw, err := p.Call(ctx, http.MethodGet, path, "", nil)
	if err != nil {
		return err
	}
	if len(raw) == 0 {
		return errors.New("empty profile")
	}
	return os.WriteFile(file, raw, 0o644)
}

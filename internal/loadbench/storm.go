package loadbench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// StormConns is how many fault guests run at a time in the storm (issue 15, point 4).
const StormConns = 40

// stormTimeout is the fault gates' time limit, in seconds: short, so that the loop, log spam and
// recursion guests are cut (and started again) many times in a run.
const stormTimeout = 2

// stormFaults are the storm's fault guests: a guest folder under guests/, or a WebAssembly text
// file of the repository (built with wat2wasm). SetStormFaults narrows them.
var stormFaults = []struct{ name, guest, wat string }{
	{name: "loop", guest: "testdata/fault-loop"},
	{name: "membomb", guest: "testdata/fault-membomb"},
	{name: "output", guest: "testdata/fault-output"},
	{name: "logspam", guest: "testdata/fault-logspam"},
	{name: "recursion", wat: "internal/loadbench/testdata/treerec.wat"},
}

// storm is the storm rows' server: a `pixie serve` of their own (a server that a fault guest
// freezes freezes no other row), with the good gate and one gate per fault guest.
type storm struct {
	p   *Pixie
	cwd string
}

// StormRow is the good gate (block-risky-commands stopping `rm -rf /`) on one connection, back to
// back, on the storm server: quiet (withStorm false: "storm-quiet"), or while StormConns other
// connections, each its own session, send the fault guests' gates back to back ("storm",
// compared with storm-quiet's p99; target ≤ 2×). A server that stops answering abandons the
// row, and is killed.
func StormRow(withStorm bool) Row {
	r := Row{Name: "storm-quiet", Conns: []int{1},
		What: "the good gate (block-risky-commands) on the storm server, alone: the quiet p99"}
	if withStorm {
		r.Name = "storm"
		r.What = fmt.Sprintf("the good gate while %d connections (other sessions) run fault guests back to back (%s; %d s limit)",
			StormConns, strings.Join(StormFaults(), ", "), stormTimeout)
		r.Versus = &Versus{Row: "storm-quiet", Metric: P99}
		r.Goals = []Goal{{Metric: Ratio, Max: 2}}
	}
	r.Prepare = func(ctx context.Context, e *Env) (*Plan, error) {
		s, err := Shared(e, "storm", func() (*storm, error) { return startStorm(ctx, e) })
		if err != nil {
			return nil, err
		}
		good := EvaluateRequest(s.p, "storm-good", "good", s.cwd, BenchArgs, []string{`"action":"blocked"`})
		plan := &Plan{Addrs: []string{s.p.Addr}, Request: func(int) Request { return good }, Timeout: 10 * time.Second,
			Alive: s.p.Alive, Abandon: s.p.Kill}
		if withStorm {
			plan.Background = &Background{Conns: StormConns, Addrs: []string{s.p.Addr}, Timeout: 30 * time.Second,
				Request: func(i int) Request {
					f := stormFaults[i%len(stormFaults)]
					return EvaluateRequest(s.p, fmt.Sprintf("storm-%s-%d", f.name, i), "fault-"+f.name, s.cwd, BenchArgs, nil)
				}}
		}
		return plan, nil
	}
	return r
}

// startStorm starts the storm server, uploads the good guest and the fault guests, attaches each
// to a gate of its own, and runs each once (compiling it, and checking that the fault fails
// under the error policy). A fault run that does not end, or after which the server stops
// answering, kills the server and fails with the reason: the rows are then skipped.
func startStorm(ctx context.Context, e *Env) (*storm, error) {
	p, err := e.StartPixie(ctx, "storm", PixieOptions{})
	if err != nil {
		return nil, err
	}
	cwd, err := SessionCwd(e)
	if err != nil {
		return nil, err
	}
	good, err := e.Guest(ctx, "block-risky-commands")
	if err != nil {
		return nil, err
	}
	if err := p.PushModule(ctx, "good", good); err != nil {
		return nil, err
	}
	if err := p.AddGates(ctx, onePreset("good", toolGate("good", moduleRule("good"), 60))); err != nil {
		return nil, err
	}
	for _, f := range stormFaults {
		var wasm []byte
		if f.wat != "" {
			wasm, err = e.WAT(ctx, f.wat)
		} else {
			wasm, err = e.Guest(ctx, f.guest)
		}
		if err != nil {
			return nil, fmt.Errorf("fault guest %s: %w", f.name, err)
		}
		name := "fault-" + f.name
		if err := p.PushModule(ctx, name, wasm); err != nil {
			return nil, fmt.Errorf("fault guest %s: %w", f.name, err)
		}
		if err := p.AddGates(ctx, onePreset(name, toolGate(name, moduleRule(name), stormTimeout))); err != nil {
			return nil, err
		}
	}
	if _, err := GateDecision(ctx, p, "good", "storm-warm", cwd, "Bash", BenchArgs); err != nil {
		return nil, err
	}
	// The first run of each compiles it (seconds for a Go guest on a loaded machine), hence the
	// generous limit here.
	const warmLimit = 60 * time.Second
	for _, f := range stormFaults {
		rctx, cancel := context.WithTimeout(ctx, warmLimit)
		t0 := time.Now()
		_, err := GateDecision(rctx, p, "fault-"+f.name, "storm-warm-"+f.name, cwd, "Bash", BenchArgs)
		timedOut := rctx.Err() != nil || transportError(err)
		cancel()
		e.logf("  first run of the %s fault guest: %s (%v)", f.name, time.Since(t0).Round(time.Millisecond), err)
		if err == nil || ctx.Err() != nil {
			continue // a fault the guest turned into a decision, or the run was cut: the storm will tell
		}
		if timedOut {
			p.Kill()
			return nil, fmt.Errorf("one run of the %s fault guest did not end within %s (its gate's limit is %d s), so the server was stopped; rerun when the runtime enforces the time limit (issue 15 point 1)", f.name, warmLimit, stormTimeout)
		}
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		aerr := p.Alive(actx)
		cancel()
		if aerr != nil {
			p.Kill()
			return nil, fmt.Errorf("after one run of the %s fault guest the server stopped answering (%v)", f.name, aerr)
		}
	}
	return &storm{p: p, cwd: cwd}, nil
}

// StormFaults lists the storm's fault guests' names.
func StormFaults() []string {
	var out []string
	for _, f := range stormFaults {
		out = append(out, f.name)
	}
	return out
}

// SetStormFaults keeps only the named fault guests in the storm (make bench -storm-faults), to
// measure a storm without a guest that freezes the server.
func SetStormFaults(names []string) error {
	var keep = stormFaults[:0:0]
	for _, n := range names {
		found := false
		for _, f := range stormFaults {
			if f.name == n {
				keep, found = append(keep, f), true
			}
		}
		if !found {
			return fmt.Errorf("no fault guest %q in the storm (there are %v)", n, StormFaults())
		}
	}
	if len(keep) == 0 {
		return errors.New("the storm needs a fault guest")
	}
	stormFaults = keep
	return nil
}

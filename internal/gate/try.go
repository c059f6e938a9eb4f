package gate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// Sample is the input of a trial.
type Sample struct {
	Target     string `json:"target"`
	Agent      string `json:"agent,omitempty"`
	Turn       int    `json:"turn,omitempty"`
	Tool       *Tool  `json:"tool,omitempty"`
	Structured bool   `json:"structured,omitempty"`
}

// TryRequest runs a draft gate on a sample ("Try it").
type TryRequest struct {
	Gate   Gate   `json:"gate"`
	Sample Sample `json:"sample"`
}

// TryResult is a trial's answer: what the point would apply, and Pixie's output.
type TryResult struct {
	Result
	// Output is Pixie's parsed answer; ModelAnswer its raw text.
	Output      abi.GateOutput `json:"output"`
	ModelAnswer string         `json:"modelAnswer,omitempty"`
	// ScriptNotRun is set when the gate's rule is a script: trials do not run scripts, because
	// no session sandbox policy is known; {{hooks.…}} variables are empty.
	ScriptNotRun bool `json:"scriptNotRun,omitempty"`
	// RuleRan is set when the gate's rule (a WASM module) ran in the trial, without a mount;
	// Rule is what it did.
	RuleRan bool     `json:"ruleRan,omitempty"`
	Rule    *RuleRun `json:"rule,omitempty"`
}

// Try runs a draft gate on a sample: its module rule (WASM, with no mount: a trial has no working
// directory) and its task with the real Pixie model. A script rule is not run (it needs a
// session's sandbox policy). Nothing is recorded, no session is touched, and the redo limit is
// not counted.
func (s *Service) Try(ctx context.Context, tr TryRequest) (TryResult, error) {
	g := tr.Gate
	g.normalize()
	if g.Name == "" {
		g.Name = "draft"
	}
	var ps []Problem
	add := func(f, format string, args ...any) {
		ps = append(ps, Problem{Field: f, Message: fmt.Sprintf(format, args...)})
	}
	validateGateFields("gate", &g, add)
	runsRule := g.Rule != nil && g.Rule.Kind == runtime.KindModule
	if strings.TrimSpace(g.Task) == "" && !runsRule {
		add("gate.task", "a trial runs the task and a module rule, and this gate has neither (its script is not run in trials)")
	}
	if len(ps) > 0 {
		return TryResult{}, errs.New(errs.Invalid, "the draft cannot be tried: %s: %s", ps[0].Field, ps[0].Message).WithDetails(ps)
	}
	req := EvalRequest{
		Point: g.Point, Session: Session{ID: "trial", Preset: "trial"}, Agent: tr.Sample.Agent, Turn: tr.Sample.Turn,
		Tool: tr.Sample.Tool, Target: tr.Sample.Target, Structured: tr.Sample.Structured,
	}
	if err := req.validate(); err != nil {
		return TryResult{}, sampleErr(err)
	}
	st := s.execute(ctx, g, req, true)
	res, err := s.finish(ctx, st)
	if err != nil {
		return TryResult{}, err
	}
	return TryResult{Result: res, Output: st.out, ModelAnswer: st.modelText,
		ScriptNotRun: g.Rule != nil && !runsRule, RuleRan: runsRule && st.rule != nil, Rule: st.rule}, nil
}

// sampleErr points a sample's validation problems at the sample's fields.
func sampleErr(err error) error {
	var ce *errs.Error
	if !errors.As(err, &ce) {
		return err
	}
	ps, ok := ce.Details.([]Problem)
	if !ok {
		return err
	}
	out := make([]Problem, len(ps))
	for i, p := range ps {
		out[i] = Problem{Field: "sample." + p.Field, Message: p.Message}
	}
	return errs.New(ce.Code, "the sample cannot be tried: %s: %s", out[0].Field, out[0].Message).WithDetails(out)
}

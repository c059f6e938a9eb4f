package gate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pixie-dev/pixie/internal/errs"
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
	// ScriptNotRun is set when the gate has a rule: trials do not run it, because no session
	// sandbox policy is known; {{hooks.…}} variables are empty.
	ScriptNotRun bool `json:"scriptNotRun,omitempty"`
}

// Try runs a draft gate's task on a sample with the real Pixie model. Nothing is recorded,
// no session is touched, the redo limit is not counted, and the rule is not run.
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
	if strings.TrimSpace(g.Task) == "" {
		add("gate.task", "a trial runs the task, and this gate has none (its script is not run in trials)")
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
	return TryResult{Result: res, Output: st.out, ModelAnswer: st.modelText, ScriptNotRun: g.Rule != nil}, nil
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

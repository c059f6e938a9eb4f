package sdk

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/pixie-dev/pixie/sdk/abi"
)

// HostError is a failed ask or judge call, with the same codes as the HTTP helper:
// "rate_limited" past abi.MaxHelperCalls calls in a run, "too_large" past
// abi.MaxHelperRequestSize bytes, "unavailable" when no model or engine is configured,
// "timeout", "upstream", "invalid", "internal".
type HostError struct {
	Func    string // pixie_ask or pixie_judge
	Code    string
	Message string
}

func (e *HostError) Error() string { return e.Func + ": " + e.Code + ": " + e.Message }

// call sends req to the host function fn and decodes its Ok payload into resp.
func call(fn string, req, resp any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return &HostError{Func: fn, Code: "invalid", Message: "encode request: " + err.Error()}
	}
	if len(b) > abi.MaxHelperRequestSize {
		return &HostError{Func: fn, Code: "too_large", Message: fmt.Sprintf("request is %d bytes; the limit is %d", len(b), abi.MaxHelperRequestSize)}
	}
	raw := current().call(fn, b)
	var res abi.HostResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return &HostError{Func: fn, Code: "internal", Message: "malformed host result: " + err.Error()}
	}
	if res.Error != nil {
		return &HostError{Func: fn, Code: res.Error.Code, Message: res.Error.Message}
	}
	if err := json.Unmarshal(res.Ok, resp); err != nil {
		return &HostError{Func: fn, Code: "internal", Message: "malformed host answer: " + err.Error()}
	}
	return nil
}

// Ask asks the Pixie model to apply instruction to input, and returns its answer. It is the
// WASM form of `pixie ask "<instruction>" --input`; pass Target() as input to work on the gate
// target. Calls count against the run's budget (abi.MaxHelperCalls calls, abi.MaxHelperRequestSize
// bytes per request); a failure is a *HostError.
func Ask(instruction, input string) (string, error) {
	var resp abi.AskResponse
	if err := call(abi.FnAsk, abi.AskRequest{Instruction: instruction, Input: input}, &resp); err != nil {
		return "", err
	}
	return resp.Text, nil
}

// Judgment is the common part of a judge result.
type Judgment struct {
	// Type is the command-line type: "bool", "select" or "score".
	Type string
	// Label is "yes"/"no" (bool), the option name (select) or the nearest level number (score).
	Label  string
	Answer Answer
	// Engine is "llm" or "jev".
	Engine string
	Usage  Usage
}

// JSON renders the judgment exactly as the one line `pixie judge --json` prints it:
// {"type","label","answer","engine"}, where answer holds the probabilities and the confidence
// (and "yes" for bool, "score" for score), so a guest and its bash twin hand the same text on.
func (j Judgment) JSON() string {
	type answer struct {
		Probabilities map[string]float64 `json:"probabilities"`
		Confidence    float64            `json:"confidence"`
		Yes           *float64           `json:"yes,omitempty"`
		Score         *float64           `json:"score,omitempty"`
	}
	a := answer{Probabilities: j.Answer.Probabilities, Confidence: j.Answer.Confidence}
	if a.Probabilities == nil {
		a.Probabilities = map[string]float64{}
	}
	switch j.Type {
	case "bool":
		a.Yes = j.Answer.Yes
	case "score":
		a.Score = j.Answer.Score
	}
	b, _ := json.Marshal(struct {
		Type   string `json:"type"`
		Label  string `json:"label"`
		Answer answer `json:"answer"`
		Engine string `json:"engine"`
	}{j.Type, j.Label, a, j.Engine})
	return string(b)
}

// BoolResult is a bool judgment.
type BoolResult struct {
	Judgment
	// Yes is the "yes" probability.
	Yes float64
	// Pass reports Yes >= the threshold (default 0.5): exit 0 of `pixie judge`.
	Pass bool
}

// SelectResult is a select judgment; Label is the chosen option.
type SelectResult struct{ Judgment }

// ScoreResult is a score judgment.
type ScoreResult struct {
	Judgment
	// Score is the probability-weighted level, from 0 (may be fractional).
	Score float64
}

// BoolOption configures JudgeBool.
type BoolOption func(*boolOptions)

type boolOptions struct {
	threshold   float64
	true, false string
}

// Threshold sets the "yes" probability at or above which BoolResult.Pass is true (default
// 0.5; `--threshold`).
func Threshold(t float64) BoolOption { return func(o *boolOptions) { o.threshold = t } }

// TrueMeans says what "yes" means (`--true`).
func TrueMeans(s string) BoolOption { return func(o *boolOptions) { o.true = s } }

// FalseMeans says what "no" means (`--false`).
func FalseMeans(s string) BoolOption { return func(o *boolOptions) { o.false = s } }

const questionID = "q"

func judge(typ string, question, state string, c abi.Criteria) (Judgment, error) {
	if question == "" {
		return Judgment{}, &HostError{Func: abi.FnJudge, Code: "invalid", Message: "the question is empty"}
	}
	req := abi.JudgeRequest{State: state, Questions: map[string]abi.Question{
		questionID: {Type: typ, Instructions: question, Criteria: c},
	}}
	var resp abi.JudgeResponse
	if err := call(abi.FnJudge, req, &resp); err != nil {
		return Judgment{}, err
	}
	a, ok := resp.Answers[questionID]
	if !ok {
		return Judgment{}, &HostError{Func: abi.FnJudge, Code: "internal", Message: "the answer is missing"}
	}
	return Judgment{Label: a.Label, Answer: a, Engine: resp.Engine, Usage: resp.Usage}, nil
}

// JudgeBool asks the decision engine a yes/no question about state (`pixie judge --type bool`).
// A judgment error stays an error: it never becomes "no".
func JudgeBool(question, state string, opts ...BoolOption) (BoolResult, error) {
	o := boolOptions{threshold: 0.5}
	for _, f := range opts {
		f(&o)
	}
	if o.threshold < 0 || o.threshold > 1 {
		return BoolResult{}, &HostError{Func: abi.FnJudge, Code: "invalid", Message: fmt.Sprintf("threshold %v is outside [0,1]", o.threshold)}
	}
	j, err := judge(abi.JudgeBool, question, state, abi.Criteria{True: o.true, False: o.false})
	if err != nil {
		return BoolResult{}, err
	}
	j.Type = "bool"
	yes := j.Answer.Probabilities["yes"]
	if j.Answer.Yes != nil {
		yes = *j.Answer.Yes
	}
	return BoolResult{Judgment: j, Yes: yes, Pass: yes >= o.threshold}, nil
}

// JudgeSelect asks the decision engine to choose one of two or more options for state
// (`pixie judge --type select --option name="description" …`).
func JudgeSelect(question, state string, options ...Option) (SelectResult, error) {
	if len(options) < 2 {
		return SelectResult{}, &HostError{Func: abi.FnJudge, Code: "invalid", Message: fmt.Sprintf("select needs two or more options, got %d", len(options))}
	}
	j, err := judge(abi.JudgeSelect, question, state, abi.Criteria{Options: options})
	if err != nil {
		return SelectResult{}, err
	}
	j.Type = "select"
	return SelectResult{Judgment: j}, nil
}

// JudgeScore asks the decision engine to place state on a scale of 2–10 levels, lowest first
// (`pixie judge --type score --level "…" …`).
func JudgeScore(question, state string, levels ...string) (ScoreResult, error) {
	if len(levels) < 2 || len(levels) > 10 {
		return ScoreResult{}, &HostError{Func: abi.FnJudge, Code: "invalid", Message: fmt.Sprintf("score needs 2 to 10 levels, got %d", len(levels))}
	}
	j, err := judge(abi.JudgeScore, question, state, abi.Criteria{Levels: levels})
	if err != nil {
		return ScoreResult{}, err
	}
	j.Type = "score"
	score := 0.0
	if j.Answer.Score != nil {
		score = *j.Answer.Score
	} else if n, err := strconv.ParseFloat(j.Label, 64); err == nil {
		score = n
	}
	return ScoreResult{Judgment: j, Score: score}, nil
}

package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/pixie-dev/pixie/sdk/abi"
)

var (
	fakeMu     sync.Mutex // held while a Fake runs a rule
	activeFake *Fake
)

func activeHost() host {
	if f := activeFake; f != nil {
		return f
	}
	return platformHost()
}

// Fake runs rules on the host, for unit tests of guest logic with plain `go test`. Set the
// target and context, and the answers of the model and the decision engine; Run then calls the
// rule as the WASM host would and reports what it did. It enforces the same budget as the real
// host: abi.MaxHelperCalls ask/judge calls per run ("rate_limited" after that) and
// abi.MaxHelperRequestSize bytes per request ("too_large").
//
// Runs of different Fakes are serialised (the SDK's functions are package-level), so tests
// using a Fake must not run the rule in parallel with another.
type Fake struct {
	Target string
	// Vars are the PIXIE_* values (Extism config).
	Vars map[string]string
	// Ask answers sdk.Ask; nil makes every ask fail as "unavailable". A returned *HostError
	// keeps its code; any other error becomes "upstream".
	Ask func(req AskRequest) (string, error)
	// Judge answers the judge calls; nil makes every judgment fail as "unavailable".
	Judge func(req JudgeRequest) (JudgeResponse, error)
	// PetContext is what sdk.PetContext returns.
	PetContext []byte

	calls int
	res   *Result
}

// LogLine is one Log call.
type LogLine struct{ Level, Message string }

// Result is what a rule did in one Fake run.
type Result struct {
	// Code is the exit code the rule returned.
	Code int32
	// Output is the output it set (Continue, ContinueData, Conclude).
	Output string
	// Error is the message of Fail, or "".
	Error string
	Logs  []LogLine
	// Asks and Judges are the requests the rule sent, in order, including refused ones.
	Asks   []AskRequest
	Judges []JudgeRequest
}

// GateOutput decodes Output as the gate output of an exit 11.
func (r Result) GateOutput() (Output, error) {
	var o Output
	dec := json.NewDecoder(strings.NewReader(r.Output))
	dec.DisallowUnknownFields()
	err := dec.Decode(&o)
	return o, err
}

// Run runs rule through sdk.Run against the fake host and returns what it did.
func (f *Fake) Run(rule func() int32) Result {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	f.calls = 0
	f.res = &Result{}
	activeFake = f
	defer func() { activeFake = nil }()
	code := Run(rule)
	res := *f.res
	res.Code = code
	f.res = nil
	return res
}

func (f *Fake) input() []byte { return []byte(f.Target) }

func (f *Fake) config(key string) (string, bool) {
	v, ok := f.Vars[key]
	return v, ok
}

func (f *Fake) log(level, message string) {
	f.res.Logs = append(f.res.Logs, LogLine{level, message})
}

func (f *Fake) petContext() []byte { return f.PetContext }
func (f *Fake) setOutput(b []byte) { f.res.Output = string(b) }
func (f *Fake) setError(m string)  { f.res.Error = m }

func (f *Fake) call(fn string, req []byte) []byte {
	var res abi.HostResult
	ok, err := f.serve(fn, req)
	if err != nil {
		var he *HostError
		if !errors.As(err, &he) {
			he = &HostError{Code: "upstream", Message: err.Error()}
		}
		res.Error = &abi.Error{Code: he.Code, Message: he.Message}
	} else {
		res.Ok, _ = json.Marshal(ok)
	}
	b, _ := json.Marshal(res)
	return b
}

func (f *Fake) serve(fn string, req []byte) (any, error) {
	switch fn {
	case abi.FnAsk:
		var r abi.AskRequest
		if err := json.Unmarshal(req, &r); err != nil {
			return nil, &HostError{Code: "invalid", Message: err.Error()}
		}
		f.res.Asks = append(f.res.Asks, r)
		if err := f.budget(len(req)); err != nil {
			return nil, err
		}
		if f.Ask == nil {
			return nil, &HostError{Code: "unavailable", Message: "no model is configured"}
		}
		text, err := f.Ask(r)
		return abi.AskResponse{Text: text}, err
	case abi.FnJudge:
		var r abi.JudgeRequest
		if err := json.Unmarshal(req, &r); err != nil {
			return nil, &HostError{Code: "invalid", Message: err.Error()}
		}
		f.res.Judges = append(f.res.Judges, r)
		if err := f.budget(len(req)); err != nil {
			return nil, err
		}
		if f.Judge == nil {
			return nil, &HostError{Code: "unavailable", Message: "no decision engine is configured"}
		}
		return f.Judge(r)
	}
	return nil, &HostError{Code: "invalid", Message: "unknown host function " + fn}
}

func (f *Fake) budget(size int) error {
	if size > abi.MaxHelperRequestSize {
		return &HostError{Code: "too_large", Message: fmt.Sprintf("request is %d bytes; the limit is %d", size, abi.MaxHelperRequestSize)}
	}
	if f.calls >= abi.MaxHelperCalls {
		return &HostError{Code: "rate_limited", Message: fmt.Sprintf("the run used its %d helper calls", abi.MaxHelperCalls)}
	}
	f.calls++
	return nil
}

// BoolAnswer builds the judge response of a bool question with the given "yes" probability, for
// Fake.Judge functions.
func BoolAnswer(req JudgeRequest, yes float64) JudgeResponse {
	label := "no"
	if yes >= 0.5 {
		label = "yes"
	}
	y := yes
	return answerAll(req, abi.Answer{Type: abi.JudgeBool, Label: label, Yes: &y,
		Probabilities: map[string]float64{"yes": yes, "no": 1 - yes}, Confidence: confidence(yes)})
}

// SelectAnswer builds the judge response choosing option with probability p.
func SelectAnswer(req JudgeRequest, option string, p float64) JudgeResponse {
	return answerAll(req, abi.Answer{Type: abi.JudgeSelect, Label: option,
		Probabilities: map[string]float64{option: p}, Confidence: p})
}

func confidence(p float64) float64 {
	if p < 0.5 {
		return 1 - p
	}
	return p
}

func answerAll(req abi.JudgeRequest, a abi.Answer) abi.JudgeResponse {
	resp := abi.JudgeResponse{Answers: map[string]abi.Answer{}, Engine: "llm"}
	for id := range req.Questions {
		resp.Answers[id] = a
	}
	return resp
}

// Package hostfuncs owns the host functions that Pixie's WASM guests import from
// abi.Namespace ("extism:host/user"): pixie_ask, pixie_judge, pixie_log, pet_context and
// pixie_context. It decodes and encodes guest memory, enforces the per-run limits that belong to the boundary
// (request size before decoding, log lines, a total host-call cap), and turns a Helper's errors
// into the abi.Error codes the HTTP helper uses, so a guest sees exactly what a bash script
// sees. The ABI is written down in docs/abi.md.
//
// The package is engine-neutral: a host function is a Func working on a Memory, and the engine
// (runtime/wasm) adapts each Func to its own host-function type; extism's *CurrentPlugin
// satisfies Memory as it is. Per-run state (the run's Helper, its counters, the Pet context,
// the target and variables for pixie_context) travels in the call's context (WithRun), because
// host functions are defined once per compiled module and shared by every instance.
package hostfuncs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/pixie-dev/pixie/internal/clip"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// Helper serves one run's ask and judge calls and its log lines. It has the method set of
// runtime.Helper (this package must not import runtime) and enforces the run's helper budget:
// abi.MaxHelperCalls calls and abi.MaxHelperRequestSize bytes per request, returning errs-coded
// errors (errs.RateLimited, errs.TooLarge, errs.Unavailable, …).
type Helper interface {
	Ask(ctx context.Context, req abi.AskRequest) (abi.AskResponse, error)
	Judge(ctx context.Context, req abi.JudgeRequest) (abi.JudgeResponse, error)
	Log(level, message string)
}

// Memory is a guest's Extism memory as the engine exposes it. Offsets are Extism memory
// blocks; *extism.CurrentPlugin implements it.
type Memory interface {
	// Length is the size of the block at offset.
	Length(offset uint64) (uint64, error)
	// ReadBytes copies the block at offset.
	ReadBytes(offset uint64) ([]byte, error)
	// WriteBytes allocates a block holding b and returns its offset.
	WriteBytes(b []byte) (uint64, error)
}

// Limits are the boundary's per-run limits. The zero value means the defaults.
type Limits struct {
	// MaxHostCalls caps every pixie_* host call of one run together (ask, judge, log,
	// pet_context, pixie_context): defence in depth behind the Helper's budget. The call past it traps the
	// guest. Zero means DefaultMaxHostCalls.
	MaxHostCalls int
	// MaxRequest is the largest ask/judge request, in bytes, checked against the memory block's
	// length before anything is read. Zero means abi.MaxHelperRequestSize.
	MaxRequest int
	// MaxLogLine is the longest log message kept, in bytes; longer ones are cut at a rune
	// boundary and marked. Zero means DefaultMaxLogLine.
	MaxLogLine int
	// MaxLogLines is how many log lines one run keeps; one more line says that the rest were
	// dropped. Zero means DefaultMaxLogLines.
	MaxLogLines int
}

// Defaults.
const (
	DefaultMaxHostCalls = 200
	DefaultMaxLogLine   = abi.MaxLogLine
	DefaultMaxLogLines  = abi.MaxLogLines
)

func (l Limits) withDefaults() Limits {
	if l.MaxHostCalls <= 0 {
		l.MaxHostCalls = DefaultMaxHostCalls
	}
	if l.MaxRequest <= 0 {
		l.MaxRequest = abi.MaxHelperRequestSize
	}
	if l.MaxLogLine <= 0 {
		l.MaxLogLine = DefaultMaxLogLine
	}
	if l.MaxLogLines <= 0 {
		l.MaxLogLines = DefaultMaxLogLines
	}
	return l
}

// ErrHostCallLimit is the panic value (and so the trap cause) of the host call past
// Limits.MaxHostCalls.
var ErrHostCallLimit = errors.New("host call limit reached")

// Run is the host side of one guest run. It is safe for concurrent use, although a guest
// calls its host functions one at a time.
type Run struct {
	helper     Helper
	petContext []byte
	lim        Limits

	// The run's context for pixie_context (SetContext); unset, pixie_context answers an
	// empty one.
	target     string
	vars       map[string]string
	contextSet bool

	mu       sync.Mutex
	calls    int
	logLines int
	dropped  bool
}

// NewRun returns the state of one run. helper may be nil (ask and judge then fail as
// "unavailable", and log lines are dropped); petContext is what pet_context returns (nil in
// gate runs).
func NewRun(helper Helper, petContext []byte, lim Limits) *Run {
	return &Run{helper: helper, petContext: petContext, lim: lim.withDefaults()}
}

// SetContext sets what pixie_context answers in this run: the gate target (the plug-in's
// input) and the run's variables (the same map the engine passes as Extism config). vars is
// read when the guest asks, not copied: the caller must not change it during the run.
func (r *Run) SetContext(target string, vars map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.target, r.vars, r.contextSet = target, vars, true
}

// Calls returns how many host calls the run made so far.
func (r *Run) Calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

type runKey struct{}

// WithRun returns ctx carrying r, for the engine to pass to the guest call. The run travels in
// the context because that is the only per-call value the WASM engine hands a host function
// (its signature is ctx, memory, stack): there is no argument or field to carry it instead.
func WithRun(ctx context.Context, r *Run) context.Context { return context.WithValue(ctx, runKey{}, r) }

func runFrom(ctx context.Context) *Run {
	r, _ := ctx.Value(runKey{}).(*Run)
	if r == nil {
		// Outside a run (for example while an instance is being pre-initialised) there is no
		// helper and a fresh budget; nothing is recorded.
		return NewRun(nil, nil, Limits{})
	}
	return r
}

// enter counts one host call, trapping the guest past the limit.
func (r *Run) enter(fn string) {
	r.mu.Lock()
	r.calls++
	over := r.calls > r.lim.MaxHostCalls
	r.mu.Unlock()
	if over {
		panic(fmt.Errorf("%s: %w (%d per run)", fn, ErrHostCallLimit, r.lim.MaxHostCalls))
	}
}

// Func is one host function, independent of the engine. Its parameters and results are all
// i64 (Extism memory offsets).
type Func struct {
	Name    string
	Params  int
	Results int
	// Call runs the function. It panics on a guest fault (a bad offset, the host-call limit);
	// the engine turns the panic into a trap.
	Call func(ctx context.Context, mem Memory, stack []uint64)
}

// Funcs returns the host functions, all in namespace abi.Namespace.
func Funcs() []Func {
	return []Func{
		{Name: abi.FnAsk, Params: 1, Results: 1, Call: askFunc},
		{Name: abi.FnJudge, Params: 1, Results: 1, Call: judgeFunc},
		{Name: abi.FnLog, Params: 1, Results: 0, Call: logFunc},
		{Name: abi.FnPetContext, Params: 0, Results: 1, Call: petContextFunc},
		{Name: abi.FnContext, Params: 0, Results: 1, Call: contextFunc},
	}
}

// Names lists the host function names, for import validation.
func Names() []string {
	fs := Funcs()
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

func askFunc(ctx context.Context, mem Memory, stack []uint64) {
	r := runFrom(ctx)
	r.enter(abi.FnAsk)
	stack[0] = r.serve(ctx, mem, abi.FnAsk, stack[0], func(raw []byte) (any, error) {
		var req abi.AskRequest
		if err := abi.DecodeStrict(raw, &req); err != nil {
			return nil, errs.Wrap(errs.Invalid, err, "malformed ask request: %v", err)
		}
		if strings.TrimSpace(req.Instruction) == "" {
			return nil, errs.New(errs.Invalid, "the instruction is empty")
		}
		if r.helper == nil {
			return nil, errs.New(errs.Unavailable, "pixie: helper is not available")
		}
		return r.helper.Ask(ctx, req)
	})
}

func judgeFunc(ctx context.Context, mem Memory, stack []uint64) {
	r := runFrom(ctx)
	r.enter(abi.FnJudge)
	stack[0] = r.serve(ctx, mem, abi.FnJudge, stack[0], func(raw []byte) (any, error) {
		var req abi.JudgeRequest
		if err := abi.DecodeStrict(raw, &req); err != nil {
			return nil, errs.Wrap(errs.Invalid, err, "malformed judge request: %v", err)
		}
		if len(req.Questions) == 0 {
			return nil, errs.New(errs.Invalid, "the judge request has no questions")
		}
		if r.helper == nil {
			return nil, errs.New(errs.Unavailable, "pixie: helper is not available")
		}
		return r.helper.Judge(ctx, req)
	})
}

// serve reads the request block at off (refusing it by length first), calls do, and writes the
// abi.HostResult, returning its offset.
func (r *Run) serve(ctx context.Context, mem Memory, fn string, off uint64, do func([]byte) (any, error)) uint64 {
	var (
		ok  any
		err error
	)
	n, lerr := mem.Length(off)
	switch {
	case lerr != nil:
		panic(fmt.Errorf("%s: bad request pointer: %w", fn, lerr))
	case n > uint64(r.lim.MaxRequest):
		err = errs.New(errs.TooLarge, "request is %d bytes; the limit is %d", n, r.lim.MaxRequest)
	default:
		raw, rerr := mem.ReadBytes(off)
		if rerr != nil {
			panic(fmt.Errorf("%s: read request: %w", fn, rerr))
		}
		ok, err = do(raw)
	}
	var res abi.HostResult
	if err != nil {
		res.Error = ABIError(ctx, err)
	} else if res.Ok, err = json.Marshal(ok); err != nil {
		res.Ok, res.Error = nil, &abi.Error{Code: string(errs.Internal), Message: "encode answer"}
	}
	b, _ := json.Marshal(res)
	out, werr := mem.WriteBytes(abi.PadJSON(b))
	if werr != nil {
		panic(fmt.Errorf("%s: write result: %w", fn, werr))
	}
	return out
}

func logFunc(ctx context.Context, mem Memory, stack []uint64) {
	r := runFrom(ctx)
	r.enter(abi.FnLog)
	r.mu.Lock()
	if r.logLines >= r.lim.MaxLogLines {
		first := !r.dropped
		r.dropped = true
		r.mu.Unlock()
		if first && r.helper != nil {
			r.helper.Log("warn", fmt.Sprintf("pixie_log: %d lines reached; later lines are dropped", r.lim.MaxLogLines))
		}
		return
	}
	r.logLines++
	r.mu.Unlock()
	if r.helper == nil {
		return
	}
	n, err := mem.Length(stack[0])
	if err != nil {
		panic(fmt.Errorf("%s: bad request pointer: %w", abi.FnLog, err))
	}
	// JSON escaping can at most grow a message sixfold; anything bigger is not worth decoding.
	if n > uint64(6*r.lim.MaxLogLine+1024) {
		r.helper.Log("warn", fmt.Sprintf("pixie_log: a %d-byte line was dropped (the limit is %d bytes)", n, r.lim.MaxLogLine))
		return
	}
	raw, err := mem.ReadBytes(stack[0])
	if err != nil {
		panic(fmt.Errorf("%s: read request: %w", abi.FnLog, err))
	}
	var req abi.LogRequest
	if err := abi.DecodeStrict(raw, &req); err != nil {
		r.helper.Log("warn", "pixie_log: a malformed line was dropped")
		return
	}
	r.helper.Log(LogLevel(req.Level), clip.BytesWithin(req.Message, r.lim.MaxLogLine, truncMark))
}

func petContextFunc(ctx context.Context, mem Memory, stack []uint64) {
	r := runFrom(ctx)
	r.enter(abi.FnPetContext)
	if len(r.petContext) == 0 {
		stack[0] = 0
		return
	}
	off, err := mem.WriteBytes(abi.PadJSON(r.petContext))
	if err != nil {
		panic(fmt.Errorf("%s: write result: %w", abi.FnPetContext, err))
	}
	stack[0] = off
}

// emptyContext is pixie_context's answer outside a run, or in a run without SetContext (an
// instance being pre-initialised through abi.EntryInit), so that a guest can warm its path.
var emptyContext = func() []byte {
	b, err := abi.EncodeContext("", nil)
	if err != nil {
		panic(err)
	}
	return b
}()

// contextFunc answers pixie_context: the run's context block (abi.EncodeContext), encoded
// when asked, so that a run whose guest does not ask pays nothing.
func contextFunc(ctx context.Context, mem Memory, stack []uint64) {
	r := runFrom(ctx)
	r.enter(abi.FnContext)
	r.mu.Lock()
	target, vars, set := r.target, r.vars, r.contextSet
	r.mu.Unlock()
	b := emptyContext
	if set {
		var err error
		if b, err = abi.EncodeContext(target, vars); err != nil {
			panic(fmt.Errorf("%s: %w", abi.FnContext, err))
		}
	}
	off, err := mem.WriteBytes(b)
	if err != nil {
		panic(fmt.Errorf("%s: write result: %w", abi.FnContext, err))
	}
	stack[0] = off
}

// LogLevel normalises a guest log level: debug, info, warn or error; anything else is info.
func LogLevel(level string) string {
	switch l := strings.ToLower(level); l {
	case "debug", "info", "warn", "error":
		return l
	case "warning":
		return "warn"
	}
	return "info"
}

// truncMark ends a log message cut to Limits.MaxLogLine (the mark counts within the limit).
const truncMark = "…[truncated]"

// ABIError turns a Helper error into the error shape guests and HTTP clients see: the errs
// code and its client-safe message; a deadline is "timeout"; anything uncoded is "internal"
// without its text.
func ABIError(ctx context.Context, err error) *abi.Error {
	var e *errs.Error
	switch {
	case errors.As(err, &e):
		msg := e.Message
		if msg == "" {
			msg = string(e.Code)
		}
		return &abi.Error{Code: string(e.Code), Message: msg}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &abi.Error{Code: string(errs.Timeout), Message: "the run's time limit was reached"}
	case errors.Is(err, context.Canceled):
		return &abi.Error{Code: string(errs.Timeout), Message: "the run was cancelled"}
	}
	return &abi.Error{Code: string(errs.Internal), Message: "internal error"}
}

package hooks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/hint"
	"github.com/pixie-dev/pixie/internal/hookwire"
	"github.com/pixie-dev/pixie/internal/later"
	"github.com/pixie-dev/pixie/internal/rewrite"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// Evaluator is the gate pipeline as the adapter uses it; *gate.Service implements it.
type Evaluator interface {
	Evaluate(ctx context.Context, req gate.EvalRequest) (gate.Result, error)
}

// Hints is the hint queue as the adapter uses it; *hint.Queue implements it.
type Hints interface {
	Take(ctx context.Context, session string) (hint.Take, error)
	Confirm(ctx context.Context, takeID string) (int, error)
	Rollback(ctx context.Context, takeID string) (int, error)
	TurnStart(session string) error
	TurnEnd(session string) error
}

// Rewrites keeps the replacements a hook cannot make, for the model-API proxy to make in the
// session's requests; *rewrite.Rules implements it.
type Rewrites interface {
	ReplaceMessage(ctx context.Context, session, original, replacement string) error
	ReplaceToolResult(ctx context.Context, session, callID, replacement string) error
}

var (
	_ Evaluator = (*gate.Service)(nil)
	_ Hints     = (*hint.Queue)(nil)
	_ Rewrites  = (*rewrite.Rules)(nil)
)

// Config configures a Service. The zero value works.
type Config struct {
	// Store keeps the sessions' turn records. Every event Pixie handles needs it; the events it
	// does not handle (answered {} at once) touch nothing.
	Store *store.Store
	// Gates runs the gates; nil means no gate ever runs.
	Gates Evaluator
	// Hints delivers the sessions' hints; nil means no hints are delivered and turns are not
	// reported.
	Hints Hints
	// DefaultPreset is the preset of a call that names none; empty means "default".
	DefaultPreset string
	// TurnTTL is how long a session's turn record is kept after its last event; zero means 30
	// days.
	TurnTTL time.Duration
	// Logger receives warnings (hints that could not be taken or confirmed); nil discards them.
	Logger *slog.Logger
	// HintsElsewhere reports whether another path delivers session's hints (the model-API proxy,
	// which keeps them out of the chat history; hints.delivery): the hook answers then carry none,
	// so no hint reaches the model twice or lands in the transcript. Nil means hooks deliver hints.
	HintsElsewhere func(ctx context.Context, session string) bool
	// ProxyDeliversHints is set when the model-API proxy injects hints (hints.delivery is not
	// hooks): a call whose host goes through the proxy (Call.ViaProxy) then never carries hints,
	// from the session's first prompt on, whatever HintsElsewhere says (the proxy has not seen a
	// new session before its first prompt, but it will carry that prompt's model request).
	ProxyDeliversHints bool
	// Rewrites keeps, for a call whose host goes through the proxy (Call.ViaProxy), the
	// replacements the host cannot make: a replaced user message (the main agent's), and a
	// replaced structured tool result (a built-in tool's object). The proxy then makes them in
	// the requests the model gets, and the answer carries none of them. Nil means such
	// replacements are handled as without a proxy (additional context, a note).
	Rewrites Rewrites
}

// Service answers hook calls: it maps the input, keeps the session's turn, evaluates the gate,
// takes the session's pending hints where the answer can carry them, and renders the output.
// It is safe for concurrent use.
type Service struct {
	st       *store.Store
	gates    Evaluator
	hints    Hints
	rewrites Rewrites
	cfg      Config
	log      *slog.Logger
}

// New returns a Service. It returns no error.
func New(_ context.Context, cfg Config) (*Service, error) {
	st, gates, hints := cfg.Store, cfg.Gates, cfg.Hints
	if cfg.DefaultPreset == "" {
		cfg.DefaultPreset = "default"
	}
	if cfg.TurnTTL <= 0 {
		cfg.TurnTTL = 30 * 24 * time.Hour
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Service{st: st, gates: gates, hints: hints, rewrites: cfg.Rewrites, cfg: cfg, log: log}, nil
}

// Close releases nothing; it is there so that every component closes alike.
func (s *Service) Close(context.Context) error { return nil }

// DefaultPreset is the preset of a call that names none (hooks.defaultPreset).
func (s *Service) DefaultPreset() string { return s.cfg.DefaultPreset }

// CheckPreset validates a preset name from a hook call (empty means the default preset).
func CheckPreset(p string) error { return hookwire.CheckPreset(p) }

// Call is what a hook call says besides its input.
type Call struct {
	// Preset is the session's preset; empty means Config.DefaultPreset.
	Preset string
	// Host is HostClaudeCode or HostCodex (also "claude"); empty means inferred from the
	// input (see the package comment).
	Host string
	// HoldHints, when set, leaves open the take of the hints the answer carries: it is told
	// the take's id before deliver runs, and the caller confirms or rolls the take back itself
	// once the answer reached the host (the command adapter, whose write to the host can still
	// fail after the server answered). A take it never closes returns after the lease. A
	// deliver that fails still rolls the take back.
	HoldHints func(takeID string)
	// After, when set, holds the work the gate's evaluation sets off until the caller's answer
	// is sent (gate.EvalRequest.After, internal/later); nil starts it at once.
	After *later.Queue
	// ViaProxy says the host's model requests go through Pixie's model-API proxy (the hooks
	// `pixie init` writes with the proxy say so: ?proxy=1, `pixie hook … --proxy`). Hints are
	// then left to the proxy (Config.ProxyDeliversHints), and the replacements a hook cannot
	// make (a user's message, a built-in tool's structured result) are left for the proxy to
	// make in the request the model gets (Config.Rewrites).
	ViaProxy bool
	// NoHints serves the call without the hint queue: no hint is taken and no turn is marked.
	// Pet's external executors (a CLI running a Skill) set it: a person's hints are for their
	// own sessions, never for a Pet run, and a global hint must not end up there.
	NoHints bool
	// Session, when set, is asked first whether the call's session may be served (a Pet run's
	// hook credential serves the one session its CLI runs); its error refuses the call.
	Session func(id string) error
	// Observe, when set, is told what the gates did to a tool call (by the host's tool_use_id,
	// in Describe's words) when they did something; stopped means the call did not run or its
	// result was withheld. Pet keeps it in the Run record of the CLI that made the call.
	Observe func(toolUseID, gate string, stopped bool)
}

// Handle answers one hook call: input is the hook input JSON. It calls deliver with the output,
// in the fields the host accepts; hints the output carries are confirmed when deliver returns
// nil and returned to the queue when it fails, so a hint is consumed exactly when an answer
// carrying it went out. An event Pixie does not handle is answered {} at once, without touching
// the store. A preset that does not exist runs no gate and says so to the user (systemMessage)
// at every event. Errors are coded (errs).
func (s *Service) Handle(ctx context.Context, call Call, input []byte, deliver func(Output) error) error {
	preset := call.Preset
	if err := CheckPreset(preset); err != nil {
		return err
	}
	host, err := CheckHost(call.Host)
	if err != nil {
		return err
	}
	ev, err := Map(input)
	if err != nil {
		return err
	}
	if host != "" {
		ev.Host = host
	}
	if call.Session != nil {
		if err := call.Session(ev.SessionID); err != nil {
			return err
		}
	}
	if !ev.Handled {
		return deliver(Output{})
	}
	hints := s.hints
	if call.NoHints {
		hints = nil
	}
	if preset == "" {
		preset = s.cfg.DefaultPreset
	}
	turn, err := s.turn(ctx, ev)
	if err != nil {
		return err
	}
	if ev.Name == EventUserPromptSubmit && ev.Agent == AgentRoot && hints != nil {
		if err := hints.TurnStart(ev.SessionID); err != nil {
			return err
		}
	}
	// Through the proxy a structured tool result can be replaced as a whole (by call id).
	proxied := call.ViaProxy && s.rewrites != nil
	replaceStructured := proxied && ev.Point == abi.PointToolAfter && ev.Structured && validRef(ev.ToolUseID)
	o, err := s.evaluate(ctx, ev, preset, turn, call.After, replaceStructured)
	if err != nil {
		return err
	}
	if proxied && o.Action == ActionReplaced {
		o.ByProxy = s.leaveToProxy(ctx, ev, o, replaceStructured)
	}
	if hints != nil && ev.Agent == AgentRoot &&
		((ev.Name == EventStop && o.Action != ActionSteered) || (ev.Name == EventUserPromptSubmit && o.Action == ActionRejected)) {
		if err := hints.TurnEnd(ev.SessionID); err != nil {
			return err
		}
	}
	var take hint.Take
	if hints != nil && DeliversHints(ev, o) && !(call.ViaProxy && s.cfg.ProxyDeliversHints) &&
		(s.cfg.HintsElsewhere == nil || !s.cfg.HintsElsewhere(ctx, ev.SessionID)) {
		take, err = hints.Take(ctx, ev.SessionID)
		if err != nil {
			// The step goes on without hints; they stay pending for the next one.
			s.log.Warn("hooks: taking hints failed", "session", ev.SessionID, "err", err)
			take = hint.Take{}
		}
	}
	if call.Observe != nil && ev.ToolUseID != "" {
		if d, stopped := Describe(ev, o); d != "" {
			call.Observe(ev.ToolUseID, d, stopped)
		}
	}
	out := Render(ev, o, take.Message)
	if aerr := Accepts(ev, out); aerr != nil {
		// Cannot happen with Render's answers; if it did, the host would drop the answer, so
		// send what it takes and keep the hints for the next step.
		s.log.Error("hooks: an answer the host would not apply", "host", ev.Host, "event", ev.Name, "err", aerr)
		out = Output{SystemMessage: capString("Pixie: this step's answer was not in a form " + hostName(ev.Host) + " applies (" + aerr.Error() + "); the step went on unchecked.")}
		if take.ID != "" {
			s.finishTake(ctx, take.ID, false)
			take = hint.Take{}
		}
	}
	held := take.ID != "" && call.HoldHints != nil
	if held {
		call.HoldHints(take.ID)
	}
	derr := deliver(out)
	if take.ID != "" && (!held || derr != nil) {
		s.finishTake(ctx, take.ID, derr == nil)
	}
	return derr
}

// leaveToProxy keeps a replacement the host cannot make for the proxy, and reports whether it
// did: a main agent's replaced prompt, or a replaced structured tool result. It is written
// before the answer goes out, so the proxy has it for the model request that follows. When it
// cannot be kept, the answer handles the replacement as without a proxy.
func (s *Service) leaveToProxy(ctx context.Context, ev Event, o Outcome, structuredResult bool) bool {
	var err error
	switch {
	case ev.Point == abi.PointUserMessage && ev.Agent == AgentRoot:
		err = s.rewrites.ReplaceMessage(ctx, ev.SessionID, ev.Target, o.Text)
	case ev.Point == abi.PointToolAfter && structuredResult:
		err = s.rewrites.ReplaceToolResult(ctx, ev.SessionID, ev.ToolUseID, o.Text)
	default:
		return false
	}
	if err != nil {
		s.log.Warn("hooks: a replacement could not be left to the model-API proxy; the answer carries it as without the proxy",
			"session", ev.SessionID, "point", ev.Point, "err", err)
		return false
	}
	return true
}

// finishTake confirms or rolls back a take; it runs even when ctx ended (the answer is out).
func (s *Service) finishTake(ctx context.Context, id string, delivered bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var err error
	if delivered {
		_, err = s.hints.Confirm(ctx, id)
	} else {
		_, err = s.hints.Rollback(ctx, id)
	}
	if err != nil {
		s.log.Warn("hooks: closing a hint take failed", "take", id, "confirm", delivered, "err", err)
	}
}

// evaluate runs the gate for ev and converts its result.
func (s *Service) evaluate(ctx context.Context, ev Event, preset string, turn int, after *later.Queue, replaceStructured bool) (Outcome, error) {
	if s.gates == nil {
		return Outcome{Action: ActionNone}, nil
	}
	req := gate.EvalRequest{
		Point:      ev.Point,
		Session:    gate.Session{ID: ev.SessionID, Preset: preset, Cwd: ev.Cwd, Policy: ev.Policy},
		Agent:      ev.Agent,
		Turn:       turn,
		Target:     ev.Target,
		Structured: ev.Structured,
		Host:       ev.Host,
		After:      after,

		ReplaceStructured: replaceStructured,
	}
	if ev.ToolName != "" {
		req.Tool = &gate.Tool{Name: ev.ToolName, Args: ev.ToolInput}
		if validRef(ev.ToolUseID) {
			req.Tool.CallID = ev.ToolUseID
		}
	}
	if ev.Point == abi.PointUserMessage && validRef(ev.PromptID) {
		req.MessageID = ev.PromptID
	}
	res, err := s.gates.Evaluate(ctx, req)
	if errs.Is(err, errs.TooLarge) {
		// The gate cannot check a target this large; say so rather than fail the hook (a
		// failed http hook decides nothing and would also drop the step's hints).
		var e *errs.Error
		errors.As(err, &e)
		return Outcome{Action: ActionNone, Notes: []string{"Pixie did not check this " + pointNoun(ev.Point) + ": " + e.Message}}, nil
	}
	if err != nil {
		return Outcome{}, err
	}
	if res.Skipped == gate.SkipNoPreset {
		return Outcome{Action: ActionNone, Notes: []string{fmt.Sprintf("the preset %q does not exist on this Pixie server, so no gate checks this session. "+
			"Create it (pixie gate apply -f gates.yaml), or point the hooks at an existing preset (pixie init … --preset P); pixie doctor checks the whole set-up.", preset)}}, nil
	}
	return Outcome{Action: res.Action, Gate: res.Gate, Text: res.Text, Addition: res.Addition,
		Reason: res.Reason, Suggestion: res.Suggestion, Notes: res.Notes, Error: res.Error,
		Quiet: res.ConcludedBy != "" && !res.ShowInChat}, nil
}

func pointNoun(p string) string {
	switch p {
	case abi.PointUserMessage:
		return "message"
	case abi.PointAgentMessage:
		return "message to the subagent"
	case abi.PointToolBefore:
		return "tool call"
	case abi.PointToolAfter:
		return "tool result"
	}
	return "answer"
}

// validRef reports whether an id can serve as a gate call or message id.
func validRef(id string) bool {
	if id == "" || len(id) > 256 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] == '/' || id[i] < 0x20 {
			return false
		}
	}
	return true
}

// turnState is a session's turn record.
type turnState struct {
	Turn      int       `json:"turn"`
	Key       string    `json:"key,omitempty"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// turns holds hook-turn/<session> (see the key layout in internal/store).
var turns = store.NewCollection[turnState]("hook-turn")

// turn returns ev's turn number, advancing the session's turn as the package comment says. It
// writes only when the turn changes. Most events do not change it, so it reads first: a read
// is a view, where even an update that writes nothing syncs the store's logs (an msync per
// hook call, a third of the route's time in BenchmarkServiceHandle).
func (s *Service) turn(ctx context.Context, ev Event) (int, error) {
	var n int
	changed := false
	err := s.st.View(ctx, func(tx *store.Tx) error {
		cur, found, err := currentTurn(tx, ev.SessionID)
		if err != nil {
			return err
		}
		next := nextTurn(cur, found, ev)
		n, changed = next.Turn, !found || next != cur
		return nil
	})
	if err == nil && changed {
		err = s.st.Update(ctx, func(tx *store.Tx) error {
			cur, found, err := currentTurn(tx, ev.SessionID)
			if err != nil {
				return err
			}
			next := nextTurn(cur, found, ev)
			n = next.Turn
			if found && next == cur {
				return nil // another event of the session made the same change meanwhile
			}
			next.UpdatedAt = time.Now().UTC()
			return turns.PutTTL(tx, ev.SessionID, next, s.cfg.TurnTTL)
		})
	}
	if err != nil {
		return 0, errs.Wrap(errs.Internal, err, "hooks: keep the session's turn")
	}
	return n, nil
}

// currentTurn reads the session's turn record (found false when it has none).
func currentTurn(tx *store.Tx, session string) (turnState, bool, error) {
	cur, err := turns.Get(tx, session)
	if errors.Is(err, store.ErrNotFound) {
		return turnState{}, false, nil
	}
	return cur, err == nil, err
}

// nextTurn is the session's turn after ev (cur itself when ev does not change it).
func nextTurn(cur turnState, found bool, ev Event) turnState {
	next := cur
	switch {
	case ev.Agent == AgentChild && found && cur.Turn > 0:
		// A subagent's events (Codex gives its prompts a turn_id of their own) belong to the
		// main agent's current turn.
	case ev.Name == EventUserPromptSubmit:
		if !found || ev.TurnKey == "" || ev.TurnKey != cur.Key || cur.Turn == 0 {
			next.Turn, next.Key = cur.Turn+1, ev.TurnKey
		}
	case !found || cur.Turn == 0:
		next.Turn, next.Key = 1, ev.TurnKey
	case ev.TurnKey != "" && ev.TurnKey != cur.Key && !ev.StopHookActive:
		// A turn that began without a UserPromptSubmit Pixie saw. A Stop with stop_hook_active
		// continues the current turn whatever its key.
		next.Turn, next.Key = cur.Turn+1, ev.TurnKey
	}
	return next
}

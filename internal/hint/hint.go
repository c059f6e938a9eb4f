// Package hint owns the hint queue: a side channel through which a person drops a line while an
// agent task runs, and the agent sees it at its next step, exactly once (spec: hint.md). Whether
// it then stays in the chat history is the delivery path's doing: hosts keep what hooks inject
// (docs/hints.md, "What each host does with a hint").
//
// The queue lives in the portable store (internal/store): hint/<id> holds each hint,
// hint-lease/<take id> each open take, and hint-meta/revision the revision counter. Every
// operation is one store transaction; one that changes the queue also reads and bumps the
// revision, so changes are serialised by the store's conflict detection itself: two takes can
// never hand out the same hint, even from two Queue values over one store, and the revision of a
// snapshot names exactly the state it shows. A take that finds nothing writes nothing.
//
// # Exactly once
//
// Take marks the hints consumed and records a lease in the same transaction. The caller then
// injects the rendered message and calls Confirm (the model saw it) or Rollback (the injection
// failed, or a later hook rejected the step): rollback returns the hints that are still consumed
// under that take to pending, and the next step takes them. A take that is neither confirmed nor
// rolled back within Config.Lease is rolled back by a background sweep. TakeAndConfirm does both
// steps in one transaction for callers that cannot fail after taking. Because the store syncs
// every commit, a restart neither re-delivers a consumed hint nor loses a pending one; an open
// take survives a restart as its lease record and is confirmed, rolled back or expired as usual.
//
// # Lease
//
// The default lease is two minutes. Between take and confirm there is only the host assembling
// one step's request and running the hooks of that step, which takes milliseconds to a few
// seconds, or up to a gate's time limit when a model is asked. The lease must outlast that by a
// wide margin, because an expired take whose caller confirms late has let the model see hints
// that are now pending again (the confirm then fails with not_found and the hints are delivered a
// second time). It must also be short enough that hints held by a caller that died come back
// while the task is still running; two minutes is a few agent steps.
//
// # Running sessions
//
// The set of sessions running a turn (TurnStart/TurnEnd) is kept in memory, as in the spec: after
// a restart it is empty until the next turn event, so Put reports running=false for a session
// that is in fact mid-turn. The hint is queued all the same and is taken at that session's next
// step; only the wording a client picks from the flag is affected. Over a store shared by
// several replicas the set lives in the store instead (shared.go), so every replica agrees.
//
// # Events
//
// Subscribe returns a subscription that receives a state frame (the full snapshot) after every
// change and an action frame per added, consumed or cancelled hint. Delivery never blocks the
// writer: a slow subscriber keeps only the latest state and a bounded backlog of action frames.
package hint

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pixie-dev/pixie/internal/clip"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/hint/locale"
	"github.com/pixie-dev/pixie/internal/store"
)

// Defaults of Config; the spec's values.
const (
	DefaultMaxPerStep           = 20
	DefaultMaxContentChars      = 2000
	DefaultMaxPendingPerSession = 20
	DefaultKeepConsumed         = 20
	DefaultHeartbeatInterval    = 25 * time.Second
	DefaultLease                = 2 * time.Minute
)

// DisplayChars is how many code points of one hint the injected message shows; the queue keeps
// the full text (up to MaxContentChars).
const DisplayChars = 600

// MaxSessionIDLen caps a session id, in bytes.
const MaxSessionIDLen = 256

// AllSessions is the hint_status argument that asks about every session.
const AllSessions = "*"

// Config configures a Queue. Store is required; every other zero field takes its default.
type Config struct {
	// Store holds the hints, takes and turn marks; required.
	Store *store.Store
	// MaxPerStep is the most hints one take hands out; zero means 20.
	MaxPerStep int
	// MaxContentChars caps a hint's text in code points (longer text is truncated); zero means
	// 2000.
	MaxContentChars int
	// MaxPendingPerSession caps pending hints per session (the global queue counts as one
	// session); a put past the cap evicts that session's oldest pending hint. Zero means 20.
	MaxPendingPerSession int
	// KeepConsumed is how many consumed hints are kept for the snapshot (and how many cancelled
	// ones for cancel answers); older ones are deleted. Zero means 20.
	KeepConsumed int
	// HeartbeatInterval is the SSE comment heartbeat; zero means 25s. The queue does not use it
	// itself; the server reads it with Config.
	HeartbeatInterval time.Duration
	// Lease is how long a take may stay unconfirmed before its hints return to pending; zero
	// means 2 minutes (see the package comment).
	Lease time.Duration
	// Locale is the language of the injected message and of refusal reasons: "en" (default) or
	// "zh".
	Locale string
	// Logger receives warnings (expired leases, unreadable records); nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now. Tests set it to move leases forward.
	Now func() time.Time
}

func (c Config) withDefaults() (Config, error) {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MaxPerStep", int64(c.MaxPerStep)}, {"MaxContentChars", int64(c.MaxContentChars)},
		{"MaxPendingPerSession", int64(c.MaxPendingPerSession)}, {"KeepConsumed", int64(c.KeepConsumed)},
		{"HeartbeatInterval", int64(c.HeartbeatInterval)}, {"Lease", int64(c.Lease)},
	} {
		if f.v < 0 {
			return c, errs.New(errs.Invalid, "hint: %s must not be negative", f.name)
		}
	}
	if c.MaxPerStep == 0 {
		c.MaxPerStep = DefaultMaxPerStep
	}
	if c.MaxContentChars == 0 {
		c.MaxContentChars = DefaultMaxContentChars
	}
	if c.MaxPendingPerSession == 0 {
		c.MaxPendingPerSession = DefaultMaxPendingPerSession
	}
	if c.KeepConsumed == 0 {
		c.KeepConsumed = DefaultKeepConsumed
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.Locale == "" {
		c.Locale = locale.Default
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// State is where a hint is in its life.
type State string

// The states.
const (
	Pending   State = "pending"
	Consumed  State = "consumed"
	Cancelled State = "cancelled"
)

// Hint is one queued line.
type Hint struct {
	// ID is time-ordered: sorting ids sorts hints oldest first.
	ID string `json:"id"`
	// Text is the full text (at most MaxContentChars code points).
	Text string `json:"text"`
	// SessionID is the session the hint is for; empty means global (any session's next step).
	SessionID string    `json:"sessionId"`
	CreatedAt time.Time `json:"createdAt"`
	State     State     `json:"state"`
	// ConsumedAt is when a take handed the hint out (zero unless consumed).
	ConsumedAt time.Time `json:"consumedAt,omitzero"`
	// CancelledAt is when the hint was cancelled or evicted (zero unless cancelled).
	CancelledAt time.Time `json:"cancelledAt,omitzero"`
	// TakeID names the open take holding a consumed hint until it is confirmed or rolled back;
	// empty once confirmed.
	TakeID string `json:"takeId,omitempty"`
	// Dropped marks a hint cancelled by the per-session cap rather than by a person.
	Dropped bool `json:"dropped,omitempty"`
}

// Snapshot is the queue as clients see it.
type Snapshot struct {
	// Revision increases with every change and survives restarts.
	Revision uint64 `json:"revision"`
	// Pending are the pending hints of every session, oldest first.
	Pending []Hint `json:"pending"`
	// Consumed are the most recently consumed hints, newest first, at most KeepConsumed.
	Consumed []Hint `json:"consumed"`
}

// ActionKind is the kind of an action frame.
type ActionKind string

// The action kinds.
const (
	ActionAdded     ActionKind = "added"
	ActionConsumed  ActionKind = "consumed"
	ActionCancelled ActionKind = "cancelled"
)

// Action is one hint's change, pushed to subscribers as a "hint" frame. Consumed actions are
// pushed when the take is confirmed (the receipt that the model saw the hint).
type Action struct {
	Kind ActionKind `json:"kind"`
	Hint Hint       `json:"hint"`
	// Reason is "dropped" when a cancel was the per-session cap evicting the hint.
	Reason string `json:"reason,omitempty"`
	// Revision is the revision of the change.
	Revision uint64 `json:"revision"`
}

// PutResult is what Put reports.
type PutResult struct {
	Hint Hint
	// Dropped are the hints evicted to respect the per-session cap (usually none, at most one
	// unless the cap was lowered).
	Dropped []Hint
	// Running tells whether the target session is running a turn now (for a global hint: whether
	// any session is).
	Running  bool
	Revision uint64
}

// Take is the result of a take.
type Take struct {
	// ID names the open take to Confirm or Rollback; empty when nothing was taken or when the
	// take was confirmed in the same step.
	ID        string `json:"takeId"`
	SessionID string `json:"sessionId"`
	// Hints are the taken hints, oldest first, at most MaxPerStep.
	Hints []Hint `json:"hints"`
	// Message is the rendered user-role message; empty when nothing was taken.
	Message string `json:"message"`
	// ExpiresAt is when an unconfirmed take returns its hints to pending.
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// Confirmed is true when the take needs no Confirm.
	Confirmed bool   `json:"confirmed"`
	Revision  uint64 `json:"revision"`
}

// The store collections of the queue (see the key layout in internal/store).
var (
	hints  = store.NewCollection[Hint]("hint")
	leases = store.NewCollection[lease]("hint-lease")
	meta   = store.NewCollection[uint64]("hint-meta")
)

const revisionID = "revision"

// lease is an open take.
type lease struct {
	ID        string    `json:"id"`
	SessionID string    `json:"sessionId"`
	HintIDs   []string  `json:"hintIds"`
	TakenAt   time.Time `json:"takenAt"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// Queue is the hint queue. It is safe for concurrent use.
type Queue struct {
	st  *store.Store
	cfg Config
	msg locale.Messages
	log *slog.Logger
	bc  *broadcaster

	runMu   sync.Mutex
	running map[string]struct{}

	idMu   sync.Mutex
	lastID int64

	badKeys sync.Map

	decMu   sync.Mutex
	decoded map[string]decodedHint

	// rl relays every replica's changes to this process's subscribers over a shared store
	// (shared.go); nil over an embedded one.
	rl *relay

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// New returns a queue over cfg.Store and starts its lease sweep; Close stops it. New fails with
// an errs.Invalid error without a store, on a negative limit or an unknown locale.
func New(_ context.Context, cfg Config) (*Queue, error) {
	st := cfg.Store
	if st == nil {
		return nil, errs.New(errs.Invalid, "hint: no store")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	msg, err := locale.Lookup(cfg.Locale)
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "hint: %s", err.Error())
	}
	q := &Queue{
		st: st, cfg: cfg, msg: msg, log: cfg.Logger,
		bc:      newBroadcaster(),
		running: map[string]struct{}{},
		decoded: map[string]decodedHint{},
		stop:    make(chan struct{}),
	}
	if st.Shared() {
		q.startRelay()
	}
	q.wg.Add(1)
	go q.sweepLoop()
	return q, nil
}

// Close stops the lease sweep and ends every subscription. It does not close the store. It may
// be called more than once.
func (q *Queue) Close(context.Context) error {
	q.closeOnce.Do(func() {
		close(q.stop)
		q.wg.Wait()
		q.bc.close()
	})
	return nil
}

// Config returns the effective configuration (defaults applied).
func (q *Queue) Config() Config { return q.cfg }

// Messages returns the texts of the configured locale.
func (q *Queue) Messages() locale.Messages { return q.msg }

// newID returns a time-ordered id: prefix, the fixed-width creation time, a random suffix. The
// time part is strictly increasing within the process.
func (q *Queue) newID(prefix string, now time.Time) string {
	q.idMu.Lock()
	t := now.UnixNano()
	if t <= q.lastID {
		t = q.lastID + 1
	}
	q.lastID = t
	q.idMu.Unlock()
	return fmt.Sprintf("%s%s%08x", prefix, store.SortableTime(time.Unix(0, t)), rand.Uint32())
}

// validID reports whether id looks like an id newID made with prefix.
func validID(prefix, id string) bool {
	if len(id) != len(prefix)+28 || !strings.HasPrefix(id, prefix) {
		return false
	}
	for _, r := range id[len(prefix):] {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// checkSession validates a session id; empty is allowed (global) when allowGlobal.
func checkSession(s string, allowGlobal bool) error {
	switch {
	case s == "" && !allowGlobal:
		return errs.New(errs.Invalid, "sessionId is required")
	case s == "":
		return nil
	case s == AllSessions:
		return errs.New(errs.Invalid, "sessionId %q is reserved (it means every session in hint_status)", AllSessions)
	case len(s) > MaxSessionIDLen:
		return errs.New(errs.Invalid, "sessionId is over %d bytes", MaxSessionIDLen)
	case !utf8.ValidString(s):
		return errs.New(errs.Invalid, "sessionId is not valid UTF-8")
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return errs.New(errs.Invalid, "sessionId must not contain control characters")
	}
	return nil
}

// cleanText cleans a hint's text and refuses it when nothing visible is left. Invalid UTF-8 is
// replaced, control characters other than newline and tab are removed (a NUL or a terminal
// escape has no place in a line for a model, nor in `pixie hint ls`), CRLF and lone CRs become
// newlines (terminal escape sequences go whole), the ends are trimmed, and the text is truncated to max code points. Text whose
// characters are all whitespace, controls, format characters (zero-width spaces and joiners,
// bidi marks, tags, the BOM), combining marks with nothing to combine with, variation
// selectors, blank letters (the Hangul fillers, the braille blank), private-use or unassigned
// code points, or replacement characters is blank: it would inject an empty-looking hint.
func (q *Queue) cleanText(text string) (string, error) {
	text = strings.ToValidUTF8(text, "\uFFFD")
	text = terminalEscapes.ReplaceAllString(text, "")
	text = strings.ReplaceAll(text, "\r\n", "\n")
	text = strings.Map(func(r rune) rune {
		switch {
		case r == '\r':
			return '\n'
		case r == '\n' || r == '\t':
			return r
		case unicode.IsControl(r):
			return -1
		}
		return r
	}, text)
	text = strings.TrimSpace(text)
	if !hasVisible(text) {
		return "", errs.New(errs.Invalid, "%s", q.msg.ErrBlank)
	}
	return clip.Runes(text, q.cfg.MaxContentChars), nil
}

// terminalEscapes are ANSI control sequences (CSI, as ESC [ or the 8-bit CSI, and OSC ended by
// BEL or ST), removed whole so that text pasted from a coloured terminal keeps only its words.
var terminalEscapes = regexp.MustCompile("(?:\x1b\\[|\u009b)[0-?]*[ -/]*[@-~]|\x1b\\][^\x07\x1b]*(?:\x07|\x1b\\\\)")

// blankLetters are letters and symbols that render as nothing.
var blankLetters = map[rune]bool{
	0x115F: true, 0x1160: true, 0x3164: true, 0xFFA0: true, // Hangul fillers
	0x2800: true, // braille pattern blank
	0xFFFD: true, // the replacement character (what invalid bytes became)
	0xFFFC: true, // object replacement
}

// hasVisible reports whether s has a character that shows: a letter, digit, punctuation mark
// or symbol that is not blank.
func hasVisible(s string) bool {
	for _, r := range s {
		if unicode.In(r, unicode.L, unicode.N, unicode.P, unicode.S) && !blankLetters[r] {
			return true
		}
	}
	return false
}

// TurnStart records that session is running a turn.
func (q *Queue) TurnStart(session string) error {
	if err := checkSession(session, false); err != nil {
		return err
	}
	if q.rl != nil {
		return q.sharedTurn(session, true)
	}
	q.runMu.Lock()
	q.running[session] = struct{}{}
	q.runMu.Unlock()
	return nil
}

// TurnEnd records that session's turn ended. Ending a session that is not running is not an
// error (the start may predate a restart).
func (q *Queue) TurnEnd(session string) error {
	if err := checkSession(session, false); err != nil {
		return err
	}
	if q.rl != nil {
		return q.sharedTurn(session, false)
	}
	q.runMu.Lock()
	delete(q.running, session)
	q.runMu.Unlock()
	return nil
}

// Running reports whether session is running a turn; for the empty (global) session, whether
// any session is, since any session's next step takes a global hint.
func (q *Queue) Running(session string) bool {
	if q.rl != nil {
		return q.sharedRunning(session)
	}
	q.runMu.Lock()
	defer q.runMu.Unlock()
	if session == "" || session == AllSessions {
		return len(q.running) > 0
	}
	_, ok := q.running[session]
	return ok
}

// RunningSessions lists the sessions running a turn, sorted.
func (q *Queue) RunningSessions() []string {
	if q.rl != nil {
		return q.sharedRunningSessions()
	}
	q.runMu.Lock()
	out := make([]string, 0, len(q.running))
	for s := range q.running {
		out = append(out, s)
	}
	q.runMu.Unlock()
	slices.Sort(out)
	return out
}

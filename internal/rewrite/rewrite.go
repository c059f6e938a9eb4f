// Package rewrite owns the per-session rewrite rules: the replacements a gate decided that the
// agent host cannot make itself, kept for the model-API proxy (internal/proxy) to make in every
// request of the session it forwards. Claude Code and Codex cannot replace a user's prompt
// (their hooks only add context beside it), and neither replaces a built-in tool's structured
// result (Claude Code's Bash answers {stdout, stderr, …}; Codex takes replacements only for MCP
// tools). When the hooks of a session whose host goes through the proxy decide such a
// replacement, the hook adapter (internal/hooks) adds a rule here before it answers, and the
// proxy applies it to the next model request and to every later one that still holds the
// original, so the model never sees the original and its prompt cache sees one stable history.
//
// Two kinds of rule:
//
//   - A message rule replaces a user message's text. It holds the original's SHA-256 and length
//     (not the text) and the replacement. Until it is first applied it is pending: the proxy
//     applies it to the latest user message of the session's next step when one of that
//     message's text parts is exactly the original, and binds it to that message's position in
//     the request's message list (Bind); from then on it applies to that position only, and
//     only while the text there is still the original. A rule that finds no such message
//     within PendingTTL expires.
//   - A tool-result rule replaces the result of one tool call (its call id: Anthropic's
//     tool_use_id, OpenAI's call_id), wherever that result appears in the session's requests.
//     A second rule for the same call replaces the first: one replacement per call.
//
// A rule belongs to one session and is never applied to another. Applied rules are kept for
// KeepTTL after they were last written (as long as a session's turn records by default).
//
// # Key layout
//
//	rewrite/<session>/m-<time-ordered id>   a message rule
//	rewrite/<session>/t-<call id>           a tool-result rule
//
// Pending rules are written with the store's TTL PendingTTL, and rewritten with KeepTTL when
// they are first applied, so an expired rule is simply gone.
package rewrite

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// Limits.
const (
	// MaxTextSize caps a replacement (and the original of a message rule), in bytes: the gate's
	// own cap on a target.
	MaxTextSize = 1 << 20
	// DefaultMaxPerSession caps a session's rules.
	DefaultMaxPerSession = 1000
	// DefaultPendingTTL is how long a rule waits for its first application.
	DefaultPendingTTL = 10 * time.Minute
	// DefaultKeepTTL is how long an applied rule is kept.
	DefaultKeepTTL = 30 * 24 * time.Hour
	// maxSessionLen and maxCallIDLen cap ids, in bytes.
	maxSessionLen = 256
	maxCallIDLen  = 256
)

// Kinds of rule.
const (
	KindMessage    = "message"
	KindToolResult = "tool-result"
)

// Rule is one replacement for one session.
type Rule struct {
	// ID is the rule's id within its session ("m-…" or "t-<call id>").
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// OriginalSum and OriginalLen identify a message rule's original text (SHA-256, hex; bytes).
	OriginalSum string `json:"originalSum,omitempty"`
	OriginalLen int    `json:"originalLen,omitempty"`
	// Bound is set once a message rule was applied; Index is then the position of its message in
	// the request's message list (Anthropic messages, OpenAI input or messages).
	Bound bool `json:"bound,omitempty"`
	Index int  `json:"index,omitempty"`
	// CallID is a tool-result rule's call.
	CallID string `json:"callId,omitempty"`
	// Text is the replacement.
	Text      string    `json:"text"`
	CreatedAt time.Time `json:"createdAt"`
	// AppliedAt is when the rule was first applied (zero while pending).
	AppliedAt time.Time `json:"appliedAt,omitzero"`
}

// Matches reports whether text is a message rule's original.
func (r Rule) Matches(text string) bool {
	return r.Kind == KindMessage && len(text) == r.OriginalLen && sum(text) == r.OriginalSum
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

var rules = store.NewCollection[Rule]("rewrite")

// Config configures Rules. The zero value works once Store is set.
type Config struct {
	// Store keeps the rules (shared by every replica on a shared store).
	Store *store.Store
	// PendingTTL is how long a rule waits for its first application; zero means
	// DefaultPendingTTL.
	PendingTTL time.Duration
	// KeepTTL is how long an applied rule is kept; zero means DefaultKeepTTL.
	KeepTTL time.Duration
	// MaxPerSession caps a session's rules; zero means DefaultMaxPerSession. Past it a new rule
	// is refused (errs.TooLarge): the caller then handles the replacement as if there were no
	// proxy.
	MaxPerSession int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Rules is the rule store. It is safe for concurrent use.
type Rules struct {
	st  *store.Store
	cfg Config
}

// New returns Rules over cfg.Store. It fails with errs.Invalid without a store.
func New(_ context.Context, cfg Config) (*Rules, error) {
	if cfg.Store == nil {
		return nil, errs.New(errs.Invalid, "rewrite: a store is required")
	}
	if cfg.PendingTTL <= 0 {
		cfg.PendingTTL = DefaultPendingTTL
	}
	if cfg.KeepTTL <= 0 {
		cfg.KeepTTL = DefaultKeepTTL
	}
	if cfg.MaxPerSession <= 0 {
		cfg.MaxPerSession = DefaultMaxPerSession
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Rules{st: cfg.Store, cfg: cfg}, nil
}

// Close releases nothing; it is there so that every component closes alike.
func (r *Rules) Close(context.Context) error { return nil }

// checkSession validates a session id (the hint queue's rule, and no '/': it is a key segment).
func checkSession(s string) error {
	switch {
	case s == "":
		return errs.New(errs.Invalid, "rewrite: the session id is required")
	case len(s) > maxSessionLen || !utf8.ValidString(s) || strings.ContainsRune(s, '/') || strings.IndexFunc(s, unicode.IsControl) >= 0:
		return errs.New(errs.Invalid, "rewrite: the session id must be at most %d bytes of UTF-8 without '/' or control characters", maxSessionLen)
	}
	return nil
}

// CheckCallID reports whether id can name a tool-result rule: 1 to 256 bytes of UTF-8 without
// '/' or control characters.
func CheckCallID(id string) error {
	if id == "" || len(id) > maxCallIDLen || !utf8.ValidString(id) || strings.ContainsRune(id, '/') || strings.IndexFunc(id, unicode.IsControl) >= 0 {
		return errs.New(errs.Invalid, "rewrite: a call id is 1 to %d bytes of UTF-8 without '/' or control characters", maxCallIDLen)
	}
	return nil
}

func checkText(what, s string) error {
	if len(s) > MaxTextSize {
		return errs.New(errs.TooLarge, "rewrite: the %s is %d bytes; at most %d are kept", what, len(s), MaxTextSize)
	}
	if !utf8.ValidString(s) {
		return errs.New(errs.Invalid, "rewrite: the %s is not UTF-8 text", what)
	}
	return nil
}

// ReplaceMessage adds a pending message rule: in session's next step, the latest user message's
// text part that is exactly original becomes replacement (and stays so in later requests).
func (r *Rules) ReplaceMessage(ctx context.Context, session, original, replacement string) error {
	if err := checkSession(session); err != nil {
		return err
	}
	if original == "" {
		return errs.New(errs.Invalid, "rewrite: the original message is empty")
	}
	if err := checkText("original message", original); err != nil {
		return err
	}
	if err := checkText("replacement", replacement); err != nil {
		return err
	}
	now := r.cfg.Now().UTC()
	rule := Rule{ID: "m-" + store.SortableTime(now) + "-" + randHex(), Kind: KindMessage, OriginalSum: sum(original), OriginalLen: len(original),
		Text: replacement, CreatedAt: now}
	return r.add(ctx, session, rule)
}

// ReplaceToolResult adds a pending tool-result rule: the result of call callID becomes
// replacement in the session's requests. It replaces an earlier rule for the same call.
func (r *Rules) ReplaceToolResult(ctx context.Context, session, callID, replacement string) error {
	if err := checkSession(session); err != nil {
		return err
	}
	if err := CheckCallID(callID); err != nil {
		return err
	}
	if err := checkText("replacement", replacement); err != nil {
		return err
	}
	now := r.cfg.Now().UTC()
	return r.add(ctx, session, Rule{ID: "t-" + callID, Kind: KindToolResult, CallID: callID, Text: replacement, CreatedAt: now})
}

// add writes a pending rule, within the session's cap (a rule that replaces one of the same id
// does not count twice).
func (r *Rules) add(ctx context.Context, session string, rule Rule) error {
	err := r.st.Update(ctx, func(tx *store.Tx) error {
		n, replacing := 0, false
		if err := tx.ScanRaw(rules.Key(session+"/"), store.ScanOptions{}, func(key string, _ []byte) error {
			n++
			if key == rules.Key(session+"/"+rule.ID) {
				replacing = true
			}
			return nil
		}); err != nil {
			return err
		}
		if !replacing && n >= r.cfg.MaxPerSession {
			return errs.New(errs.TooLarge, "rewrite: the session has %d replacements, the most kept", n)
		}
		return rules.PutTTL(tx, session+"/"+rule.ID, rule, r.cfg.PendingTTL)
	})
	var ce *errs.Error
	if errors.As(err, &ce) {
		return err
	}
	if err != nil {
		return errs.Wrap(errs.Internal, err, "rewrite: cannot keep the replacement")
	}
	return nil
}

// For returns session's rules (pending and applied), oldest message rule first, then the
// tool-result rules by call id. A session without rules costs one prefix scan.
func (r *Rules) For(ctx context.Context, session string) ([]Rule, error) {
	if checkSession(session) != nil {
		return nil, nil // such a session can have no rule
	}
	var out []Rule
	err := r.st.View(ctx, func(tx *store.Tx) error {
		return rules.Each(tx, session+"/", store.ScanOptions{Limit: r.cfg.MaxPerSession}, func(_ string, v Rule) error {
			out = append(out, v)
			return nil
		})
	})
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "rewrite: cannot read the session's replacements")
	}
	return out, nil
}

// Applied records the first application of session's rule id (a message rule with the position
// it was applied at, index; a tool-result rule with index ignored), and keeps the rule for
// KeepTTL. A rule already applied keeps its first position (a repeated call is a no-op); a rule
// that expired meanwhile is not brought back (errs.NotFound).
func (r *Rules) Applied(ctx context.Context, session, id string, index int) error {
	if err := checkSession(session); err != nil {
		return err
	}
	err := r.st.Update(ctx, func(tx *store.Tx) error {
		rule, err := rules.Get(tx, session+"/"+id)
		if errors.Is(err, store.ErrNotFound) {
			return errs.New(errs.NotFound, "rewrite: no replacement %q in the session", id)
		}
		if err != nil {
			return err
		}
		if !rule.AppliedAt.IsZero() {
			return nil
		}
		rule.AppliedAt = r.cfg.Now().UTC()
		if rule.Kind == KindMessage {
			rule.Bound, rule.Index = true, index
		}
		return rules.PutTTL(tx, session+"/"+id, rule, r.cfg.KeepTTL)
	})
	var ce *errs.Error
	if errors.As(err, &ce) {
		return err
	}
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "rewrite: cannot record the replacement's place")
	}
	return nil
}

func randHex() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("rewrite: %v", err)) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b[:])
}

package gate

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/clip"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/helper"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// Record caps.
const (
	maxRecordedStdout = 16 * 1024
	maxRecordedModel  = 16 * 1024
	// DefaultRecordPage and MaxRecordPage bound a records page.
	DefaultRecordPage = 50
	MaxRecordPage     = 200
	// maxNoteScan bounds the records read to derive a session's chat notes.
	maxNoteScan = 2000
)

// RuleRun is what the rule did in a run.
type RuleRun struct {
	Kind runtime.Kind `json:"kind"`
	Name string       `json:"name"`
	// ExitCode is the exit status, or -1 when the rule did not finish.
	ExitCode int `json:"exitCode"`
	// Stdout is the rule's output (at most 16 KB kept).
	Stdout     string `json:"stdout,omitempty"`
	DurationMs int64  `json:"durationMs"`
}

// Record is one gate run.
type Record struct {
	ID        string    `json:"id"`
	Gate      string    `json:"gate"`
	Point     string    `json:"point"`
	Session   string    `json:"session"`
	Preset    string    `json:"preset"`
	Turn      int       `json:"turn"`
	Agent     string    `json:"agent"`
	Tool      *Tool     `json:"tool,omitempty"`
	MessageID string    `json:"messageId,omitempty"`
	StartedAt time.Time `json:"startedAt"`
	// DurationMs is the whole run.
	DurationMs int64 `json:"durationMs"`
	// Action is what was applied; ConcludedBy who concluded (pixie, hook-script,
	// skipped-by-hook).
	Action      string `json:"action"`
	ConcludedBy string `json:"concludedBy"`
	// Output holds the five fields answered by Pixie or by the script (exit 11).
	Output abi.GateOutput `json:"output"`
	// Original is the target; Final the text after the action.
	Original   string   `json:"original"`
	Final      string   `json:"final"`
	Addition   string   `json:"addition,omitempty"`
	Reason     string   `json:"reason,omitempty"`
	Suggestion string   `json:"suggestion,omitempty"`
	Notes      []string `json:"notes"`
	Structured bool     `json:"structured,omitempty"`
	// Usage sums the model's and the helper calls' token usage.
	Usage       abi.Usage        `json:"usage"`
	HelperCalls []helper.Call    `json:"helperCalls"`
	Logs        []helper.LogLine `json:"logs,omitempty"`
	Rule        *RuleRun         `json:"rule,omitempty"`
	// ModelAnswer is Pixie's raw answer (at most 16 KB kept).
	ModelAnswer string `json:"modelAnswer,omitempty"`
	// Error is the failure the error policy applied to; ErrorDetail adds detail.
	Error       string `json:"error,omitempty"`
	ErrorDetail string `json:"errorDetail,omitempty"`
	OnError     string `json:"onError"`
	Cancelled   bool   `json:"cancelled,omitempty"`
	// ShowInChat is the gate's setting when the run started.
	ShowInChat bool `json:"showInChat"`
}

// RecordSummary is a record in a list.
type RecordSummary struct {
	ID          string    `json:"id"`
	Gate        string    `json:"gate"`
	Point       string    `json:"point"`
	Turn        int       `json:"turn"`
	Agent       string    `json:"agent"`
	StartedAt   time.Time `json:"startedAt"`
	DurationMs  int64     `json:"durationMs"`
	Action      string    `json:"action"`
	ConcludedBy string    `json:"concludedBy"`
	Verdict     string    `json:"verdict,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	Error       string    `json:"error,omitempty"`
	Usage       abi.Usage `json:"usage"`
	HelperCalls int       `json:"helperCalls"`
}

// RecordPage is one page of a session's records, newest first.
type RecordPage struct {
	Records []RecordSummary `json:"records"`
	// Next is the cursor of the next page; empty on the last page.
	Next string `json:"next,omitempty"`
}

// newRunID is a run id: "run_", the run's start (Unix nanoseconds, 16 hex digits) and 8 random
// hex digits, so that ids sort by start (recordcodec.go, the run id index).
func newRunID(start time.Time) string {
	var b [12]byte
	binary.BigEndian.PutUint64(b[:8], uint64(max(start.UnixNano(), 0)))
	if _, err := rand.Read(b[8:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return "run_" + hex.EncodeToString(b[:])
}

// capText is s cut to n bytes for a record, marked when cut.
func capText(s string, n int) string {
	return clip.BytesMark(s, n, "\n[… truncated]")
}

func redoKey(session string, turn int, gate string) string {
	return fmt.Sprintf("%s/%010d/%s", session, turn, gate)
}

// record writes the run record (and the redo counter) in one transaction, applying the redo
// limit, and returns the record and the final decision. A run that asks for no redo decides
// nothing from the store: its record goes to the background recorder, and record returns
// without waiting for the commit.
func (s *Service) record(ctx context.Context, st *runState, d decision, out abi.GateOutput) (Record, decision, error) {
	req := st.req
	rec := Record{
		ID: st.id, Gate: st.g.Name, Point: req.Point, Session: req.Session.ID, Preset: req.Session.Preset,
		Turn: req.Turn, Agent: req.Agent, Tool: req.Tool, MessageID: req.MessageID, StartedAt: st.start.UTC(),
		DurationMs: s.cfg.Now().Sub(st.start).Milliseconds(), ConcludedBy: st.by, Output: out,
		Original: req.Target, Structured: req.Structured, Usage: st.usage, HelperCalls: []helper.Call{},
		Rule: st.rule, ModelAnswer: capText(st.modelText, maxRecordedModel), ErrorDetail: st.errDetail,
		OnError: st.g.Advanced.OnError, Cancelled: st.cancelled, ShowInChat: st.g.Advanced.ShowInChat,
	}
	if st.err != nil {
		rec.Error = st.err.Error()
	}
	if st.helper != nil {
		rep := st.helper.Close()
		rec.HelperCalls = rep.Calls
		rec.Logs = rep.Logs
		rec.Usage.InputTokens += rep.Usage.InputTokens
		rec.Usage.OutputTokens += rep.Usage.OutputTokens
	}
	ttl := s.cfg.RecordTTL
	if !d.redo {
		r := rec
		r.Action, r.Final, r.Addition, r.Reason, r.Suggestion = d.Action, d.Text, d.Addition, d.Reason, d.Suggestion
		r.Notes = append([]string{}, d.Notes...)
		s.rec.add(req.After, &r)
		return r, d, nil
	}
	var final decision
	// A cancelled request still leaves its record. Its session's entry is written as the
	// recorder writes it: one commit at a time (sessionCache).
	s.sessions.commit.Lock()
	defer s.sessions.commit.Unlock()
	err := s.store.Update(context.WithoutCancel(ctx), func(tx *store.Tx) error {
		dd := d
		dd.Notes = append([]string{}, d.Notes...)
		if dd.redo {
			key := redoKey(req.Session.ID, req.Turn, st.g.Name)
			n, err := redoCol.Get(tx, key)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			if n >= st.g.Advanced.RedoLimit {
				dd = redoLimitReached(dd, st.g.Advanced.RedoLimit)
			} else if err := redoCol.PutTTL(tx, key, n+1, ttl); err != nil {
				return err
			}
		}
		r := rec
		r.Action, r.Final, r.Addition, r.Reason, r.Suggestion, r.Notes = dd.Action, dd.Text, dd.Addition, dd.Reason, dd.Suggestion, dd.Notes
		if err := s.writeRecords(tx, []*Record{&r}); err != nil {
			return err
		}
		rec, final = r, dd
		return nil
	})
	if err != nil {
		return Record{}, decision{}, errs.Wrap(errs.Internal, err, "cannot record the gate run")
	}
	return rec, final, nil
}

// writeRecords writes run records (each with its id index), the sessions' newest run and last
// preset, and adds their size to this process's count (retention.go). Records carry no TTL:
// the retention sweep deletes them (records.maxAge, records.maxBytes), and keeps the count
// exact by doing so.
func (s *Service) writeRecords(tx *store.Tx, recs []*Record) error {
	var bytes int64
	// Per session: its newest record of the batch, and the preset of its last one (in the
	// order the runs were recorded), written once for the batch.
	type sess struct {
		newestKey string
		newestAt  time.Time
		preset    string
	}
	var sessions map[string]*sess
	var one sess // a batch of one record (the redo path, a quiet server) needs no map
	for _, r := range recs {
		val, err := encodeRecord(r)
		if err != nil {
			return fmt.Errorf("encode the record of %s: %w", r.ID, err)
		}
		key := r.Session + "/" + store.ReverseSortableTime(r.StartedAt) + "/" + r.ID
		rk, ik := runsCol.Key(key), runIDCol.Key(r.ID)
		size := recordSize(len(rk), len(val), len(ik), len(r.Session))
		if err := tx.SetRaw(rk, val, 0); err != nil {
			return err
		}
		if err := tx.SetRaw(ik, encodeIndex(size, r.Session), 0); err != nil {
			return err
		}
		bytes += size
		var ss *sess
		if len(recs) == 1 {
			ss = &one
		} else {
			if sessions == nil {
				sessions = map[string]*sess{}
			}
			if ss = sessions[r.Session]; ss == nil {
				ss = &sess{}
				sessions[r.Session] = ss
			}
		}
		if ss.newestKey == "" || r.StartedAt.After(ss.newestAt) {
			ss.newestKey, ss.newestAt = key, r.StartedAt
		}
		ss.preset = r.Preset
	}
	sttl := s.sessionTTL()
	note := func(session string, ss *sess) error {
		info, ok := s.sessions.get(session, s.cfg.Now())
		if !ok {
			var err error
			if info, err = sessionCol.Get(tx, session); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		newest, err := noteSessionRun(tx, &info, session, ss.newestKey, ss.newestAt, sttl)
		if err != nil {
			return err
		}
		if newest || info.Preset != ss.preset {
			info.Preset = ss.preset
			if err := sessionCol.PutTTL(tx, session, info, sttl); err != nil {
				return err
			}
		}
		if s.sessions.on {
			tx.AfterCommit(func() { s.sessions.put(session, info, s.cfg.Now()) })
		}
		return nil
	}
	if len(recs) == 1 {
		if err := note(recs[0].Session, &one); err != nil {
			return err
		}
	}
	for id, ss := range sessions {
		if err := note(id, ss); err != nil {
			return err
		}
	}
	return s.ret.add(tx, bytes, int64(len(recs)))
}

// sessionCache keeps the sessions' entries (gate-session/<session>) this process wrote, so that
// a batch of records need not read them back: a read through every level of Badger and a JSON
// decode per session and batch, 2.7 % of the server's CPU in make soak. Only over an embedded
// store, where no other process writes them. A commit that writes session entries holds commit
// from before it reads them until after it committed (the recorder, and a redo's record), so
// that two commits never start from the same entry; an entry is kept an hour at most.
type sessionCache struct {
	on     bool
	commit sync.Mutex
	mu     sync.Mutex
	m      map[string]cachedSession
}

type cachedSession struct {
	info sessionInfo
	at   time.Time
}

const (
	sessionCacheMax = 10000
	sessionCacheAge = time.Hour
)

func (c *sessionCache) get(session string, now time.Time) (sessionInfo, bool) {
	if !c.on {
		return sessionInfo{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[session]
	if !ok || now.Sub(e.at) > sessionCacheAge || now.Before(e.at) {
		return sessionInfo{}, false
	}
	return e.info, true
}

func (c *sessionCache) put(session string, info sessionInfo, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= sessionCacheMax {
		c.m = map[string]cachedSession{}
	}
	c.m[session] = cachedSession{info: info, at: now}
}

// recordSize is what a record counts for against records.maxBytes: its key and value, and its
// id index entry's key and value (a version byte, the size itself and the session).
func recordSize(keyLen, valLen, idxKeyLen, sessionLen int) int64 {
	base := int64(keyLen + valLen + idxKeyLen + 1 + sessionLen)
	n := base + 1
	for uvarintLen(uint64(n)) != int(n-base) {
		n = base + int64(uvarintLen(uint64(n)))
	}
	return n
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// getRecord reads the record at key (within gate-run).
func getRecord(tx *store.Tx, key string) (Record, error) {
	raw, err := tx.GetRaw(runsCol.Key(key))
	if err != nil {
		return Record{}, err
	}
	return decodeRecord(runsCol.Key(key), raw)
}

// eachRecord calls fn for the records under idPrefix (within gate-run), in key order (a
// session's newest first). opts.After is an id within gate-run; fn may return store.ErrStop.
func eachRecord(tx *store.Tx, idPrefix string, opts store.ScanOptions, fn func(id string, r Record) error) error {
	prefix := runsCol.Name() + "/"
	if len(opts.After) > 0 {
		opts.After = []byte(prefix + string(opts.After))
	}
	err := tx.ScanRaw(prefix+idPrefix, opts, func(k string, raw []byte) error {
		r, err := decodeRecord(k, raw)
		if err != nil {
			return err
		}
		return fn(strings.TrimPrefix(k, prefix), r)
	})
	if errors.Is(err, store.ErrStop) {
		return nil
	}
	return err
}

// lookupRun reads the record of run id.
func lookupRun(tx *store.Tx, id string) (Record, error) {
	raw, err := tx.GetRaw(runIDCol.Key(id))
	if err != nil {
		return Record{}, err
	}
	idx, err := decodeIndex(id, raw)
	if err != nil {
		return Record{}, err
	}
	return getRecord(tx, idx.Key)
}

func (r Record) summary() RecordSummary {
	return RecordSummary{ID: r.ID, Gate: r.Gate, Point: r.Point, Turn: r.Turn, Agent: r.Agent, StartedAt: r.StartedAt,
		DurationMs: r.DurationMs, Action: r.Action, ConcludedBy: r.ConcludedBy, Verdict: r.Output.Verdict,
		Reason: r.Reason, Error: r.Error, Usage: r.Usage, HelperCalls: len(r.HelperCalls)}
}

var cursorRE = regexp.MustCompile(`^[0-9]{20}/run_[0-9a-f]{24}$`)

// Records lists a session's records, newest first. cursor is a page's Next; limit zero means
// DefaultRecordPage.
func (s *Service) Records(ctx context.Context, session, cursor string, limit int) (RecordPage, error) {
	if err := checkSessionID(session); err != nil {
		return RecordPage{}, errs.New(errs.Invalid, "%s", err.Error())
	}
	if cursor != "" && !cursorRE.MatchString(cursor) {
		return RecordPage{}, errs.New(errs.Invalid, "the cursor is not one this server gave out")
	}
	switch {
	case limit == 0:
		limit = DefaultRecordPage
	case limit < 0 || limit > MaxRecordPage:
		return RecordPage{}, errs.New(errs.Invalid, "the limit must be 1 to %d", MaxRecordPage)
	}
	s.rec.flush()
	page := RecordPage{Records: []RecordSummary{}}
	err := s.store.View(ctx, func(tx *store.Tx) error {
		opts := store.ScanOptions{Limit: limit + 1}
		if cursor != "" {
			opts.After = []byte(session + "/" + cursor)
		}
		var prev string
		return eachRecord(tx, session+"/", opts, func(id string, r Record) error {
			if len(page.Records) == limit {
				page.Next = strings.TrimPrefix(prev, session+"/")
				return store.ErrStop
			}
			page.Records = append(page.Records, r.summary())
			prev = id
			return nil
		})
	})
	if err != nil {
		return RecordPage{}, errs.Wrap(errs.Internal, err, "cannot list the gate records")
	}
	return page, nil
}

// Record returns one record in full.
func (s *Service) Record(ctx context.Context, id string) (Record, error) {
	s.rec.flush()
	var rec Record
	err := s.store.View(ctx, func(tx *store.Tx) error {
		var err error
		rec, err = lookupRun(tx, id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return Record{}, errs.New(errs.NotFound, "no gate run %q", id)
	}
	if err != nil {
		return Record{}, errs.Wrap(errs.Internal, err, "cannot read the gate record")
	}
	return rec, nil
}

// ChatNote is the chat block of a run, derived from its record (never stored in a session
// log).
type ChatNote struct {
	RunID string `json:"runId"`
	Gate  string `json:"gate"`
	Point string `json:"point"`
	Agent string `json:"agent"`
	Turn  int    `json:"turn"`
	// Place is where the block appears: "<agent>/turn:<n>/" followed by "message:<point>:<id>"
	// (message points), "tool:<call id>" (tool points: before and after of one call share it)
	// or "answer" (turn-end). Only the last run per place and point is shown.
	Place string `json:"place"`
	// Title is the leading [label] of the note, or the gate's name.
	Title string `json:"title"`
	// NotVerified is set when the label contains "not verified" or "미확인".
	NotVerified bool `json:"notVerified,omitempty"`
	// Body is the note (Markdown) without its label line; empty when there is no note.
	Body string `json:"body,omitempty"`
	// Without a note the block shows the verdict with its reason, and the replacement and
	// addition in a collapsed section.
	Verdict string `json:"verdict,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Replace string `json:"replace,omitempty"`
	Append  string `json:"append,omitempty"`
	Action  string `json:"action"`
	// Error is the one line a failed run shows.
	Error string    `json:"error,omitempty"`
	At    time.Time `json:"at"`
}

// notePlace is the place of a record's chat block.
func notePlace(r Record) string {
	base := fmt.Sprintf("%s/turn:%d/", r.Agent, r.Turn)
	switch r.Point {
	case abi.PointToolBefore, abi.PointToolAfter:
		if r.Tool != nil && r.Tool.CallID != "" {
			return base + "tool:" + r.Tool.CallID
		}
		return base + "tool:" + r.ID // without a call id each run is its own place
	case abi.PointTurnEnd:
		return base + "answer"
	default:
		return base + "message:" + r.Point + ":" + r.MessageID
	}
}

// noteTitle splits a leading [label] off a note.
func noteTitle(note string) (label, body string, ok bool) {
	first, rest, _ := strings.Cut(note, "\n")
	t := strings.TrimLeft(first, " \t")
	if !strings.HasPrefix(t, "[") {
		return "", note, false
	}
	end := strings.Index(t, "]")
	if end < 2 {
		return "", note, false
	}
	label = strings.TrimSpace(t[1:end])
	body = strings.TrimSpace(t[end+1:])
	if rest != "" {
		if body != "" {
			body += "\n"
		}
		body += rest
	}
	return label, strings.TrimSpace(body), label != ""
}

// chatNote derives the chat block of a record, or false when it gets none.
func chatNote(r Record) (ChatNote, bool) {
	if !r.ShowInChat || r.Cancelled || r.ConcludedBy == BySkippedByHook {
		return ChatNote{}, false
	}
	// A rejected instruction has no message in the chat.
	if r.Point == abi.PointUserMessage && r.Action == ActionRejected {
		return ChatNote{}, false
	}
	n := ChatNote{RunID: r.ID, Gate: r.Gate, Point: r.Point, Agent: r.Agent, Turn: r.Turn, Place: notePlace(r),
		Title: r.Gate, Action: r.Action, Error: r.Error, At: r.StartedAt}
	if r.Error != "" {
		return n, true
	}
	if r.Output.Note != "" {
		n.Body = r.Output.Note
		if label, body, ok := noteTitle(r.Output.Note); ok {
			n.Title, n.Body = label, body
			l := strings.ToLower(label)
			n.NotVerified = strings.Contains(l, "not verified") || strings.Contains(label, "미확인")
		}
		return n, true
	}
	n.Verdict, n.Reason, n.Replace, n.Append = r.Output.Verdict, r.Output.Reason, r.Output.Replace, r.Output.Append
	if n.Verdict == "" {
		n.Verdict = VerdictPass
	}
	return n, true
}

// ChatNotes returns the chat blocks of a session, oldest first: only runs whose gate showed
// results in the chat, and only the last run per place and point.
func (s *Service) ChatNotes(ctx context.Context, session string) ([]ChatNote, error) {
	if err := checkSessionID(session); err != nil {
		return nil, errs.New(errs.Invalid, "%s", err.Error())
	}
	s.rec.flush()
	var notes []ChatNote
	err := s.store.View(ctx, func(tx *store.Tx) error {
		seen := map[string]bool{}
		return eachRecord(tx, session+"/", store.ScanOptions{Limit: maxNoteScan}, func(_ string, r Record) error {
			key := notePlace(r) + "|" + r.Point
			if seen[key] {
				return nil
			}
			seen[key] = true
			if n, ok := chatNote(r); ok {
				notes = append(notes, n)
			}
			return nil
		})
	})
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot read the gate records")
	}
	// Newest first → oldest first.
	for i, j := 0, len(notes)-1; i < j; i, j = i+1, j-1 {
		notes[i], notes[j] = notes[j], notes[i]
	}
	if notes == nil {
		notes = []ChatNote{}
	}
	return notes, nil
}

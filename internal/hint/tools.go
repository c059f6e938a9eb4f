package hint

import (
	"context"
	"strings"
	"unicode/utf8"
)

// The model-side tools. They take the calling session from the transport (the hook or MCP
// adapter knows which session is calling) and the arguments from the model.

// SendArgs are hint_send's arguments.
type SendArgs struct {
	// Text is the hint.
	Text string `json:"text"`
	// SessionID is the target session; omitted means the calling session, "" means global.
	SessionID *string `json:"sessionId,omitempty"`
}

// SendResult is hint_send's answer.
type SendResult struct {
	OK        bool   `json:"ok"`
	HintID    string `json:"hintId"`
	SessionID string `json:"sessionId"`
	// Running tells whether the hint takes effect at once: the target session is running a turn
	// and will take it at its next step.
	Running bool `json:"running"`
	// Evicted tells whether the oldest pending hint was dropped to respect the backlog cap.
	Evicted bool `json:"evicted"`
	// Dropped are the ids of the evicted hints.
	Dropped []string `json:"dropped"`
	// Truncated tells whether the text was cut to the queue's limit (MaxContentChars code
	// points); Chars is the length kept, in code points.
	Truncated bool `json:"truncated"`
	Chars     int  `json:"chars"`
}

// HintSend is the hint_send tool: deliver a hint to a session, by default the caller's own.
func (q *Queue) HintSend(ctx context.Context, caller string, args SendArgs) (SendResult, error) {
	target := caller
	if args.SessionID != nil {
		target = *args.SessionID
	}
	r, err := q.Put(ctx, target, args.Text)
	if err != nil {
		return SendResult{}, err
	}
	kept := utf8.RuneCountInString(r.Hint.Text)
	out := SendResult{OK: true, HintID: r.Hint.ID, SessionID: target, Running: r.Running,
		Evicted: len(r.Dropped) > 0, Dropped: []string{}, Chars: kept,
		Truncated: utf8.RuneCountInString(strings.TrimSpace(strings.ToValidUTF8(args.Text, "\uFFFD"))) > kept}
	for _, d := range r.Dropped {
		out.Dropped = append(out.Dropped, d.ID)
	}
	return out, nil
}

// StatusArgs are hint_status's arguments.
type StatusArgs struct {
	// SessionID is the session to inspect; omitted means the calling session, "*" every
	// session, "" the global queue only.
	SessionID *string `json:"sessionId,omitempty"`
}

// StatusResult is hint_status's answer.
type StatusResult struct {
	// SessionID is the inspected session ("*" for all).
	SessionID string `json:"sessionId"`
	// Running tells whether that session is running a turn (for "*" and "": whether any is).
	Running bool `json:"running"`
	// RunningSessions lists every running session.
	RunningSessions []string `json:"runningSessions"`
	// Pending are the hints that session's next step would take: its own and the global ones,
	// oldest first (for "*": every pending hint).
	Pending []Hint `json:"pending"`
	// Consumed are the recently consumed hints of that session and the global queue, newest
	// first.
	Consumed []Hint `json:"consumed"`
	Revision uint64 `json:"revision"`
}

// HintStatus is the hint_status tool: pending and recently consumed hints of a session.
func (q *Queue) HintStatus(ctx context.Context, caller string, args StatusArgs) (StatusResult, error) {
	target := caller
	if args.SessionID != nil {
		target = *args.SessionID
	}
	if target != AllSessions {
		if err := checkSession(target, true); err != nil {
			return StatusResult{}, err
		}
	}
	snap, err := q.Snapshot(ctx)
	if err != nil {
		return StatusResult{}, err
	}
	mine := func(h Hint) bool {
		return target == AllSessions || h.SessionID == "" || h.SessionID == target
	}
	out := StatusResult{SessionID: target, Running: q.Running(target), RunningSessions: q.RunningSessions(),
		Pending: []Hint{}, Consumed: []Hint{}, Revision: snap.Revision}
	for _, h := range snap.Pending {
		if mine(h) {
			out.Pending = append(out.Pending, h)
		}
	}
	for _, h := range snap.Consumed {
		if mine(h) {
			out.Consumed = append(out.Consumed, h)
		}
	}
	return out, nil
}

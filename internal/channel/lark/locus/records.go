package locus

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pixie-dev/pixie/internal/store"
)

// Tool tiers of a Locus. The tier is what the executor of the entry may do; a shell-tier entry
// accepts only allowlisted senders.
const (
	TierRead  = "read"
	TierShell = "shell"
)

// Executor kinds.
const (
	// ExecutorBuiltin answers with the Pixie model as the child session.
	ExecutorBuiltin = "builtin"
	// ExecutorExternal leaves the Delivery to an agent that pulls it and calls finish or wait.
	ExecutorExternal = "external"
)

// Locus states.
const (
	LocusActive   = "active"
	LocusArchived = "archived"
)

// Delivery states. queued → current → one of the settled states.
const (
	DeliveryQueued    = "queued"
	DeliveryCurrent   = "current"
	DeliveryDone      = "done"      // finished with a reply or a no-reply reason
	DeliveryFailed    = "failed"    // the executor failed, or it was cancelled
	DeliveryTimedOut  = "timed_out" // the deadline passed
	deliveryStateNone = ""
)

// Session is a main session: Pixie's record of a host session (registered by a host adapter or
// the Q&A group action) or one created on demand for a chat in the default workspace.
type Session struct {
	ID string `json:"id"`
	// ShortID is the first six characters of ID, shown on the session badge and typed in /bind.
	ShortID   string `json:"shortId"`
	Workspace string `json:"workspace,omitempty"`
	// ChatID is the chat this session was created for automatically (empty for registered
	// sessions).
	ChatID string `json:"chatId,omitempty"`
	// QAChatID is the Q&A group opened for this session, if any.
	QAChatID   string     `json:"qaChatId,omitempty"`
	Auto       bool       `json:"auto"`
	Created    time.Time  `json:"created"`
	Archived   bool       `json:"archived"`
	ArchivedAt *time.Time `json:"archivedAt,omitempty"`
}

// Label is the session as a chat reply names it: its short id, with its workspace's folder.
func (s Session) Label() string {
	if s.Workspace != "" {
		return s.ShortID + " (" + filepath.Base(s.Workspace) + ")"
	}
	return s.ShortID
}

// Turn is one earlier question and answer of a child session.
type Turn struct {
	Question string    `json:"question"`
	Answer   string    `json:"answer"`
	At       time.Time `json:"at"`
}

// Child is the dedicated child session that serves one Locus. It has its own identity and its
// own short history; it never copies the main session's history.
type Child struct {
	ID       string    `json:"id"`
	ParentID string    `json:"parentId"`
	LocusID  string    `json:"locusId"`
	Entry    string    `json:"entry"`
	Created  time.Time `json:"created"`
	Archived bool      `json:"archived"`
	History  []Turn    `json:"history,omitempty"`
}

// Locus is one durable association of a Lark entry, a main session and a child session.
type Locus struct {
	ID       string `json:"id"`
	Entry    string `json:"entry"`
	ChatID   string `json:"chatId"`
	ThreadID string `json:"threadId,omitempty"`
	ChatType string `json:"chatType"`
	// MainSessionID is the main session; a topic keeps the one it was created with.
	MainSessionID string `json:"mainSessionId"`
	ChildID       string `json:"childId"`
	ToolTier      string `json:"toolTier"`
	Executor      string `json:"executor"`
	State         string `json:"state"`
	// QA marks a Locus created by the Q&A group action.
	QA       bool       `json:"qa,omitempty"`
	Created  time.Time  `json:"created"`
	Archived *time.Time `json:"archived,omitempty"`
	// Current is the id of the current Delivery, empty when idle.
	Current string `json:"current,omitempty"`
	// NextSeq is the sequence number the next Delivery gets.
	NextSeq int64 `json:"nextSeq"`
	// Queued counts Deliveries waiting behind the current one.
	Queued int `json:"queued"`
}

// Delivery is one message handed to a Locus's child.
type Delivery struct {
	ID           string    `json:"id"`
	LocusID      string    `json:"locusId"`
	Seq          int64     `json:"seq"`
	MessageID    string    `json:"messageId"`
	ChatID       string    `json:"chatId"`
	ThreadID     string    `json:"threadId,omitempty"`
	SenderOpenID string    `json:"senderOpenId"`
	Text         string    `json:"text"`
	Images       []string  `json:"images,omitempty"`
	Truncated    bool      `json:"truncated,omitempty"`
	State        string    `json:"state"`
	ReceivedAt   time.Time `json:"receivedAt"`
	// AcceptedAt is when the Delivery became current (the child accepted it); deadlines count
	// from here.
	AcceptedAt *time.Time `json:"acceptedAt,omitempty"`
	Deadline   *time.Time `json:"deadline,omitempty"`
	SettledAt  *time.Time `json:"settledAt,omitempty"`
	// Replied is true when a reply was sent; ReplyMessageID is Lark's id for it.
	Replied        bool   `json:"replied,omitempty"`
	ReplyMessageID string `json:"replyMessageId,omitempty"`
	// NoReplyReason is the executor's reason for not replying.
	NoReplyReason string `json:"noReplyReason,omitempty"`
	// FailReason says why a Delivery failed or timed out.
	FailReason string `json:"failReason,omitempty"`
	// WorkingReaction is the id of the working reaction while the Delivery is current.
	WorkingReaction string `json:"workingReaction,omitempty"`
	// Agent is the built-in executor's agent run on this Delivery: its tools and every tool
	// call with its result, written as each call is made and completed at settlement.
	Agent *AgentRun `json:"agent,omitempty"`
}

// AgentRun is the record of the built-in executor's agent run on one Delivery. Inputs and
// outputs are capped (and secrets redacted) by the channel before they are recorded.
type AgentRun struct {
	// Tools are the tools offered to the model.
	Tools []string `json:"tools"`
	// Workspace is the file tools' root: the main session's workspace ("" when the child had
	// none; NoWorkspace then says why).
	Workspace   string `json:"workspace,omitempty"`
	NoWorkspace string `json:"noWorkspace,omitempty"`
	// Policy is the shell tool's sandbox policy ("" when no shell tool was offered).
	Policy string `json:"policy,omitempty"`
	// Preset is the preset whose gates checked the tool calls ("" when no gates are wired).
	Preset string `json:"preset,omitempty"`
	// Images counts the images the model got as image content; ImagesUnavailable says which it
	// did not get, and why.
	Images            int      `json:"images"`
	ImagesUnavailable []string `json:"imagesUnavailable,omitempty"`
	// Steps counts the model turns; InputTokens and OutputTokens sum their usage (both are
	// known once the run ended).
	Steps        int `json:"steps"`
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
	// ToolCalls are the tool calls in order.
	ToolCalls []ToolCall `json:"toolCalls"`
	// Omitted counts the tool calls whose input and output were left out of the record because
	// it reached its size cap.
	Omitted int `json:"omitted,omitempty"`
	// Error says why the run failed ("" when it ended its turn).
	Error string `json:"error,omitempty"`
}

// ToolCall is one tool call of an agent run and its result, as the record keeps it.
type ToolCall struct {
	// N counts the run's tool calls from 1; Step is the model turn that made it.
	N    int    `json:"n"`
	Step int    `json:"step"`
	Name string `json:"name"`
	// Input is the call's arguments (JSON).
	Input json.RawMessage `json:"input"`
	// Output is what the tool produced, or why it did not run.
	Output string `json:"output"`
	// IsError marks a failed or refused call.
	IsError bool `json:"isError,omitempty"`
	// Gate says what a gate did (denied the call, withheld, replaced or added to the result),
	// with its notes.
	Gate       string `json:"gate,omitempty"`
	DurationMS int64  `json:"durationMs"`
}

// Entry is the Lark entry a Locus serves: a chat, or a topic (a thread) of a group chat.
type Entry struct {
	// Key names the entry: the chat id, or "<chat id>#<thread id>" for a topic.
	Key      string
	ChatID   string
	ThreadID string
	ChatType string
}

// Collections (the key layout is in doc.go).
var (
	colSession     = store.NewCollection[Session]("lark-session")     // lark-session/<id>
	colSessionChat = store.NewCollection[string]("lark-session-chat") // lark-session-chat/<chat id> → session id
	colChild       = store.NewCollection[Child]("lark-child")         // lark-child/<id>
	colLocus       = store.NewCollection[Locus]("lark-locus")         // lark-locus/<id>
	colEntry       = store.NewCollection[string]("lark-entry")        // lark-entry/<entry> → active locus id
	colDelivery    = store.NewCollection[Delivery]("lark-delivery")   // lark-delivery/<locus>/<seq>
	colReady       = store.NewCollection[bool]("lark-ready")          // lark-ready/<delivery> (TTL, shared stores)
	colSettling    = store.NewCollection[string]("lark-settling")     // lark-settling/<delivery> (TTL, shared stores)
)

// maxKeptSettled is how many settled Deliveries a Locus keeps for display; older ones are
// pruned when a Delivery settles.
const maxKeptSettled = 50

func seqKey(seq int64) string { return fmt.Sprintf("%020d", seq) }

func deliveryKey(locusID string, seq int64) string { return locusID + "/" + seqKey(seq) }

// deliveryID is "<locus id>-<seq>"; locus ids hold no "-".
func deliveryID(locusID string, seq int64) string { return locusID + "-" + strconv.FormatInt(seq, 10) }

func parseDeliveryID(id string) (locusID string, seq int64, ok bool) {
	l, s, found := strings.Cut(id, "-")
	if !found || l == "" || !ValidID(l) {
		return "", 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return "", 0, false
	}
	return l, n, true
}

// idAlphabet is lowercase base32 without look-alikes.
const idAlphabet = "abcdefghijkmnpqrstuvwxyz23456789"

// newID returns prefix followed by n random characters of idAlphabet.
func newID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return prefix + string(b)
}

// ValidID accepts the ids this package mints and host session ids: 1–128 of [A-Za-z0-9._:].
func ValidID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == ':') {
			return false
		}
	}
	return true
}

// validSessionID accepts host session ids: 6–128 of [A-Za-z0-9._:-].
func validSessionID(s string) bool {
	if len(s) < 6 || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == ':' || r == '-') {
			return false
		}
	}
	return true
}

// ShortID is the first six characters of a session id (its badge).
func ShortID(id string) string {
	if len(id) <= 6 {
		return id
	}
	return id[:6]
}

func ptime(t time.Time) *time.Time { return &t }

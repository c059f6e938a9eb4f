package lark

import (
	"time"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
	"github.com/pixie-dev/pixie/internal/channel/lark/locus"
	"github.com/pixie-dev/pixie/internal/store"
)

// The Loci's records, views and requests are the locus sub-package's; the channel's API speaks
// them under these names.
type (
	Locus          = locus.Locus
	Delivery       = locus.Delivery
	Session        = locus.Session
	Child          = locus.Child
	Turn           = locus.Turn
	LocusView      = locus.LocusView
	ChildView      = locus.ChildView
	LocusDetail    = locus.LocusDetail
	LocusUpdate    = locus.LocusUpdate
	DeliveryView   = locus.DeliveryView
	ImageView      = locus.ImageView
	SessionRequest = locus.SessionRequest
	FinishRequest  = locus.FinishRequest
	WaitRequest    = locus.WaitRequest
	WaitResult     = locus.WaitResult
	AgentRun       = locus.AgentRun
	AgentToolCall  = locus.ToolCall
)

// Tool tiers of a Locus (locus.TierRead, locus.TierShell).
const (
	TierRead  = locus.TierRead
	TierShell = locus.TierShell
)

// Executor kinds (locus.ExecutorBuiltin, locus.ExecutorExternal).
const (
	ExecutorBuiltin  = locus.ExecutorBuiltin
	ExecutorExternal = locus.ExecutorExternal
)

// Locus states.
const (
	LocusActive   = locus.LocusActive
	LocusArchived = locus.LocusArchived
)

// Delivery states. queued → current → one of the settled states.
const (
	DeliveryQueued   = locus.DeliveryQueued
	DeliveryCurrent  = locus.DeliveryCurrent
	DeliveryDone     = locus.DeliveryDone
	DeliveryFailed   = locus.DeliveryFailed
	DeliveryTimedOut = locus.DeliveryTimedOut
)

// Limits of the Loci.
const (
	// MinPrefix is the shortest session prefix /bind accepts (the badge's short id).
	MinPrefix = locus.MinPrefix
	// MaxReasonChars caps a no-reply or failure reason.
	MaxReasonChars = locus.MaxReasonChars
)

// bindingRecord is the non-secret half of the binding (the secrets are in Secrets).
type bindingRecord struct {
	AppID      string    `json:"appId"`
	BotOpenID  string    `json:"botOpenId"`
	BotName    string    `json:"botName,omitempty"`
	VerifiedAt time.Time `json:"verifiedAt"`
}

// AllowEntry is one permitted sender.
type AllowEntry struct {
	OpenID string `json:"openId"`
	// Name is a display label only; it never authorizes anything.
	Name string `json:"name,omitempty"`
	// Owner marks the person whose open_id the Q&A group action adds to new groups.
	Owner bool `json:"owner"`
	// Via is "pairing" or "manual".
	Via     string    `json:"via"`
	AddedAt time.Time `json:"addedAt"`
}

// inbound is an accepted event waiting for the worker.
type inbound struct {
	ID         string          `json:"id"`
	EventID    string          `json:"eventId"`
	ReceivedAt time.Time       `json:"receivedAt"`
	Msg        larkapi.Message `json:"msg"`
}

// Collections of the channel (the key layout is in doc.go; the Loci's are locus's).
var (
	colBinding = store.NewCollection[bindingRecord]("lark-binding") // lark-binding/current
	colAllow   = store.NewCollection[AllowEntry]("lark-allow")      // lark-allow/<open_id>
	colInbound = store.NewCollection[inbound]("lark-inbound")       // lark-inbound/<time>-<rand>
	colDedup   = store.NewCollection[int64]("lark-dedup")           // lark-dedup/e/<event id>, m/<message id> (TTL)
)

const bindingKey = "current"

func ptime(t time.Time) *time.Time { return &t }

package lark

import (
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
)

// Drop reasons: the only thing recorded about a refused event (the counter
// pixie_lark_dropped_total{reason}). The set is fixed, so the label stays low-cardinality.
const (
	reasonUnavailable   = "unavailable"             // the channel is off, unbound or unverified
	reasonBadRequest    = "bad_request"             // not JSON, or not an event Pixie understands
	reasonPlaintext     = "plaintext"               // a plain body while an encrypt key is bound
	reasonDecrypt       = "decrypt"                 // the encrypted body does not decrypt
	reasonSignature     = "signature"               // X-Lark-Signature missing or wrong
	reasonToken         = "token"                   // the verification token does not match
	reasonApp           = "app"                     // header.app_id is not the bound app
	reasonStale         = "stale"                   // the request timestamp is outside the replay window
	reasonWatermark     = "watermark"               // the message predates this process's start
	reasonEventType     = "event_type"              // not im.message.receive_v1
	reasonMalformed     = larkapi.ReasonMalformed   // a receive event missing required parts
	reasonSender        = larkapi.ReasonSender      // the sender is not a real user
	reasonNotMentioned  = "not_mentioned"           // the bot is not mentioned
	reasonMessageType   = larkapi.ReasonMessageType // an unsupported message type
	reasonEmpty         = larkapi.ReasonEmpty       // nothing left to answer after removing the mention
	reasonDupEvent      = "dup_event"               // event_id seen before
	reasonDupMessage    = "dup_message"             // message_id seen before
	reasonPairCode      = "pair_code"               // a /pair command with no matching live code
	reasonNotAllowed    = "not_allowed"             // sender may not ask in this entry
	reasonDMNotAllowed  = "dm_not_allowed"          // a direct message from a sender not on the allowlist
	reasonShellTier     = "shell_tier"              // a shell-tier entry and a sender not on the allowlist
	reasonCommand       = "command"                 // a control command from a sender not on the allowlist
	reasonNoWorkspace   = "no_workspace"            // a new entry but no usable default workspace
	reasonQueueFull     = "queue_full"              // the Locus's queue is at MaxQueue
	reasonAllowFull     = "allowlist_full"          // pairing refused: the allowlist is at its cap
	reasonInternal      = "internal"                // the event could not be processed (logged)
	reasonStoreConflict = "store"                   // the store refused the write (Lark retries)
)

// allReasons lists every reason so the counters exist (at zero) from the start.
var allReasons = []string{reasonUnavailable, reasonBadRequest, reasonPlaintext, reasonDecrypt, reasonSignature,
	reasonToken, reasonApp, reasonStale, reasonWatermark, reasonEventType, reasonMalformed, reasonSender,
	reasonNotMentioned, reasonMessageType, reasonEmpty, reasonDupEvent, reasonDupMessage, reasonPairCode,
	reasonNotAllowed, reasonDMNotAllowed, reasonShellTier, reasonCommand, reasonNoWorkspace, reasonQueueFull,
	reasonAllowFull, reasonInternal, reasonStoreConflict}

// metrics are the channel's Prometheus counters plus an in-memory copy of the drop counts for
// the diagnostics route.
type metrics struct {
	dropped  *prometheus.CounterVec
	accepted *prometheus.CounterVec
	settled  *prometheus.CounterVec
	outbound *prometheus.CounterVec

	mu    sync.Mutex
	drops map[string]uint64
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pixie_lark_dropped_total", Help: "Lark events refused, by reason.",
		}, []string{"reason"}),
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pixie_lark_accepted_total", Help: "Lark events accepted, by kind (question, command, pairing, challenge).",
		}, []string{"kind"}),
		settled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pixie_lark_deliveries_settled_total", Help: "Deliveries settled, by outcome.",
		}, []string{"outcome"}),
		outbound: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pixie_lark_outbound_errors_total", Help: "Failed calls to Lark, by call.",
		}, []string{"call"}),
		drops: map[string]uint64{},
	}
	for _, r := range allReasons {
		m.dropped.WithLabelValues(r)
	}
	if reg != nil {
		_ = m.register(reg, true)
	}
	return m
}

// register adds the counters to reg. With share (only before the channel's goroutines start),
// a second Channel over one registry (a restart in tests) takes over the first one's counters.
func (m *metrics) register(reg prometheus.Registerer, share bool) error {
	for _, c := range []*prometheus.CounterVec{m.dropped, m.accepted, m.settled, m.outbound} {
		err := reg.Register(c)
		if err == nil {
			continue
		}
		are, ok := err.(prometheus.AlreadyRegisteredError)
		if !ok || !share {
			return err
		}
		existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
		if !ok {
			return err
		}
		switch c {
		case m.dropped:
			m.dropped = existing
		case m.accepted:
			m.accepted = existing
		case m.settled:
			m.settled = existing
		case m.outbound:
			m.outbound = existing
		}
	}
	for _, r := range allReasons {
		m.dropped.WithLabelValues(r)
	}
	return nil
}

func (m *metrics) drop(reason string) {
	m.dropped.WithLabelValues(reason).Inc()
	m.mu.Lock()
	m.drops[reason]++
	m.mu.Unlock()
}

// DropCount is one drop reason and how often it happened since start.
type DropCount struct {
	Reason string `json:"reason"`
	Count  uint64 `json:"count"`
}

func (m *metrics) dropCounts() []DropCount {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]DropCount, 0, len(m.drops))
	for r, n := range m.drops {
		out = append(out, DropCount{Reason: r, Count: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Reason < out[j].Reason })
	return out
}

// dropCount returns the count of one reason (tests, diagnostics).
func (m *metrics) dropCount(reason string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.drops[reason]
}

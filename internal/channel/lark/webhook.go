package lark

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
	"github.com/pixie-dev/pixie/internal/channel/lark/locus"
	"github.com/pixie-dev/pixie/internal/store"
)

// Header names of Lark's signed callbacks.
const (
	HeaderTimestamp = larkapi.HeaderTimestamp
	HeaderNonce     = larkapi.HeaderNonce
	HeaderSignature = larkapi.HeaderSignature
)

// Reaction emoji types the Host maintains on a triggering message (Lark's names, case-sensitive).
const (
	ReactionWorking = larkapi.ReactionWorking
	ReactionDone    = larkapi.ReactionDone
	ReactionFailed  = larkapi.ReactionFailed
)

// eventReceive is the only event type the channel consumes.
const eventReceive = "im.message.receive_v1"

// MaxEventBytes caps a webhook body.
const MaxEventBytes = 1 << 20

// EventResponse is what the webhook answers: a status and a JSON body.
type EventResponse struct {
	Status int
	Body   []byte
}

func respond(status int, v any) EventResponse {
	b, _ := json.Marshal(v)
	return EventResponse{Status: status, Body: b}
}

// okResponse is the answer to every event taken or dropped after authentication: Lark must not
// retry it, and a dropped event must look exactly like a taken one.
var okResponse = respond(http.StatusOK, map[string]string{"msg": "success"})

// refused answers an event that failed authentication. Nothing else happens.
func refused() EventResponse {
	return respond(http.StatusUnauthorized, map[string]string{"msg": "refused"})
}

// HandleEvent is the event webhook (POST /v1/channel/lark/events). It authenticates the
// request (decryption, signature, verification token, app id, timestamp window), answers URL
// verification, applies the admission rules that need no state, and then, in one store
// transaction, records the event and message ids (with an expiry) and queues the event for the
// worker. It answers only after that commit, and does no other work before answering.
//
// Anything refused is counted under its reason and nothing else happens. A request that fails
// authentication gets 401; an authenticated event that is not admitted gets the same 200 as an
// admitted one.
func (c *Channel) HandleEvent(ctx context.Context, header http.Header, body []byte) EventResponse {
	b, _ := c.available()
	if b == nil && c.isShared() && c.cfg.Enabled {
		// Another replica may have bound the bot a moment ago (its notification is on the way).
		_ = c.binder.load(ctx)
		b, _ = c.available()
	}
	if b == nil {
		c.met.drop(reasonUnavailable)
		return respond(http.StatusServiceUnavailable, map[string]string{"msg": "unavailable"})
	}
	if len(body) > MaxEventBytes {
		c.met.drop(reasonBadRequest)
		return refused()
	}
	var outer larkapi.Envelope
	if err := json.Unmarshal(body, &outer); err != nil {
		c.met.drop(reasonBadRequest)
		return refused()
	}
	plain := body
	if b.encryptKey != "" {
		if outer.Encrypt == "" {
			c.met.drop(reasonPlaintext)
			return refused()
		}
		dec, err := larkapi.Decrypt(outer.Encrypt, b.encryptKey)
		if err != nil {
			c.met.drop(reasonDecrypt)
			return refused()
		}
		plain = dec
	} else if outer.Encrypt != "" {
		// Lark encrypts only when an encrypt key is set: this app has one Pixie does not know.
		c.met.drop(reasonDecrypt)
		return refused()
	}
	var env larkapi.Envelope
	if err := json.Unmarshal(plain, &env); err != nil {
		c.met.drop(reasonDecrypt)
		return refused()
	}
	if env.Type == "url_verification" {
		// With an encrypt key every callback is signed, the challenge included: answering an
		// unsigned one would let anyone who learnt the verification token (it travels in every
		// event body) point this app's callback at a server of theirs.
		if b.encryptKey != "" && !larkapi.ValidSignature(header, body, b.encryptKey) {
			c.met.drop(reasonSignature)
			return refused()
		}
		if !larkapi.EqualSecret(env.Token, b.token) {
			c.met.drop(reasonToken)
			return refused()
		}
		c.met.accepted.WithLabelValues("challenge").Inc()
		return respond(http.StatusOK, map[string]string{"challenge": env.Challenge})
	}
	if env.Schema != "2.0" || env.Header == nil {
		c.met.drop(reasonBadRequest)
		return refused()
	}
	h := env.Header
	// The token first: it is the one check every event carries.
	if !larkapi.EqualSecret(h.Token, b.token) {
		c.met.drop(reasonToken)
		return refused()
	}
	if b.encryptKey != "" {
		if !larkapi.ValidSignature(header, body, b.encryptKey) {
			c.met.drop(reasonSignature)
			return refused()
		}
	}
	if !larkapi.EqualSecret(h.AppID, b.appID) {
		c.met.drop(reasonApp)
		return refused()
	}
	if !c.fresh(header, h, b.encryptKey != "") {
		c.met.drop(reasonStale)
		return refused()
	}
	if !locus.ValidID(strings.ReplaceAll(h.EventID, "-", "")) {
		c.met.drop(reasonBadRequest)
		return refused()
	}
	if h.EventType != eventReceive {
		c.met.drop(reasonEventType)
		return okResponse
	}
	msg, reason := larkapi.ParseMessage(env.Event, b.botOpenID, c.cfg.MaxTextChars, c.cfg.MaxImages)
	if reason != "" {
		c.met.drop(reason)
		return okResponse
	}
	if msg.CreatedAt.Before(c.watermark()) {
		c.met.drop(reasonWatermark)
		return okResponse
	}
	// Pairing: an exact "/pair xxxx-xxxx" in a direct chat, with or without a mention.
	if msg.ChatType == larkapi.ChatP2P && msg.MessageType == "text" {
		if code, ok := pairCommand(msg.Text); ok {
			return c.redeemPairing(ctx, b, h.EventID, msg, code)
		}
	}
	if !msg.MentionsBot {
		c.met.drop(reasonNotMentioned)
		return okResponse
	}
	in := inbound{ID: c.inboundID(), EventID: h.EventID, ReceivedAt: c.now(), Msg: msg}
	reason, err := c.admit(ctx, h.EventID, msg.MessageID, func(tx *store.Tx) error {
		if err := c.notifyTx(tx, noteInbound); err != nil {
			return err
		}
		return colInbound.Put(tx, in.ID, in)
	})
	if err != nil {
		// Not recorded: Lark retries, and the retry is judged afresh.
		c.log.Error("lark: could not record an event", "err", err.Error())
		c.met.drop(reasonStoreConflict)
		return respond(http.StatusServiceUnavailable, map[string]string{"msg": "retry"})
	}
	if reason != "" {
		c.met.drop(reason)
		return okResponse
	}
	c.kick()
	return okResponse
}

// inboundID orders accepted events by arrival: the wall clock (not Config.Now, which tests
// move), then a process counter for events within one clock tick.
func (c *Channel) inboundID() string {
	id := fmt.Sprintf("%s-%010d", store.SortableTime(time.Now()), c.inSeq.Add(1))
	if c.isShared() {
		id += "-" + c.st.Instance() // two replicas' counters may meet within one tick
	}
	return id
}

// errDuplicate carries a de-duplication refusal out of the store transaction.
type errDuplicate struct{ reason string }

func (e errDuplicate) Error() string { return e.reason }

// admit records the event and message ids (refusing either if seen) and runs then in the same
// transaction. A duplicate is reported as a reason, not an error.
func (c *Channel) admit(ctx context.Context, eventID, messageID string, then func(tx *store.Tx) error) (string, error) {
	now := c.now().UnixMilli()
	err := c.st.Update(ctx, func(tx *store.Tx) error {
		if ok, err := colDedup.Has(tx, "e/"+eventID); err != nil {
			return err
		} else if ok {
			return errDuplicate{reasonDupEvent}
		}
		if ok, err := colDedup.Has(tx, "m/"+messageID); err != nil {
			return err
		} else if ok {
			return errDuplicate{reasonDupMessage}
		}
		if err := colDedup.PutTTL(tx, "e/"+eventID, now, c.cfg.DedupTTL); err != nil {
			return err
		}
		if err := colDedup.PutTTL(tx, "m/"+messageID, now, c.cfg.DedupTTL); err != nil {
			return err
		}
		return then(tx)
	})
	var dup errDuplicate
	if errors.As(err, &dup) {
		return dup.reason, nil
	}
	return "", err
}

// fresh applies the replay window to a timestamp the request's authentication covers: with an
// encrypt key, the signed X-Lark-Request-Timestamp (the signature covers it, and Lark renews it
// on every retry); without one, the event's own create_time, which is inside the body the
// verification token vouches for. The header is then unsigned and ignored: anyone replaying a
// captured event could set it to now.
func (c *Channel) fresh(header http.Header, h *larkapi.EventHeader, signed bool) bool {
	var at time.Time
	if signed {
		sec, err := strconv.ParseInt(header.Get(HeaderTimestamp), 10, 64)
		if err != nil {
			return false
		}
		at = time.Unix(sec, 0)
	} else {
		ms, err := strconv.ParseInt(h.CreateTime, 10, 64)
		if err != nil {
			return false
		}
		at = time.UnixMilli(ms)
	}
	d := c.now().Sub(at)
	if d < 0 {
		d = -d
	}
	return d <= c.cfg.ReplayWindow
}

package lark

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// pairAlphabet has no look-alike characters (no 0/o, 1/l/i).
const pairAlphabet = "abcdefghjkmnpqrstuvwxyz23456789"

// pairing is the one pending pairing code. It lives only in memory: a restart, a cancel or a
// new code expires it. Over a store other replicas share, it lives in the store instead,
// hashed (shared.go): a cancel, a new code or its five minutes expire it.
type pairing struct {
	mu      sync.Mutex
	code    string
	expires time.Time
}

// PairingInfo describes the pending code without revealing it.
type PairingInfo struct {
	Pending   bool       `json:"pending"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// PairingCode is a freshly minted code, shown once.
type PairingCode struct {
	// Command is what the person sends to the bot in a direct chat: "/pair xxxx-xxxx".
	Command   string    `json:"command"`
	Code      string    `json:"code"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// pairingInfo describes the pending code (from the store when it is shared).
func (c *Channel) pairingInfo(ctx context.Context) PairingInfo {
	if c.isShared() {
		return c.sharedPairingInfo(ctx)
	}
	return c.pair.info(c.now())
}

func (p *pairing) info(now time.Time) PairingInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.code == "" || !now.Before(p.expires) {
		return PairingInfo{}
	}
	return PairingInfo{Pending: true, ExpiresAt: ptime(p.expires)}
}

// MintPairing creates a five-minute, single-use pairing code, replacing (and so expiring) any
// pending one. The channel must be available: the code is redeemed through it.
func (c *Channel) MintPairing(ctx context.Context) (PairingCode, error) {
	if b, p := c.available(); b == nil {
		return PairingCode{}, errs.New(errs.Unavailable, "the Lark channel is unavailable: %s", p)
	}
	raw := make([]byte, 8)
	if _, err := rand.Read(raw); err != nil {
		return PairingCode{}, errs.Wrap(errs.Internal, err, "no randomness for a pairing code")
	}
	var sb strings.Builder
	for i, v := range raw {
		if i == 4 {
			sb.WriteByte('-')
		}
		// 256 is not a multiple of 31; the bias (under 1%) does not matter for a five-minute,
		// single-use code.
		sb.WriteByte(pairAlphabet[int(v)%len(pairAlphabet)])
	}
	now := c.now()
	pc := PairingCode{Code: sb.String(), ExpiresAt: now.Add(PairTTL)}
	pc.Command = "/pair " + pc.Code
	if c.isShared() {
		if err := c.putPairing(ctx, pc.Code, pc.ExpiresAt); err != nil {
			return PairingCode{}, errs.Wrap(errs.Internal, err, "the pairing code could not be stored")
		}
		c.log.Info("lark: pairing code minted", "expires", pc.ExpiresAt)
		return pc, nil
	}
	c.pair.mu.Lock()
	c.pair.code, c.pair.expires = pc.Code, pc.ExpiresAt
	c.pair.mu.Unlock()
	c.log.Info("lark: pairing code minted", "expires", pc.ExpiresAt)
	return pc, nil
}

// CancelPairing expires the pending code, if any.
func (c *Channel) CancelPairing() {
	if c.isShared() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.deletePairing(ctx); err != nil {
			c.log.Warn("lark: the pairing code could not be cancelled", "err", err.Error())
		}
		return
	}
	c.pair.mu.Lock()
	c.pair.code, c.pair.expires = "", time.Time{}
	c.pair.mu.Unlock()
}

// pairCommand reports whether text is exactly "/pair <code>" and returns the code.
func pairCommand(text string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(text), "/pair ")
	if !ok {
		return "", false
	}
	return strings.TrimSpace(rest), true
}

// redeemPairing adds the sender to the allowlist when code is the live one. The check, the
// store write and consuming the code happen under the pairing lock, so of two senders racing
// for one code exactly one is added.
func (c *Channel) redeemPairing(ctx context.Context, b *liveBinding, eventID string, msg larkapi.Message, code string) EventResponse {
	if c.isShared() {
		return c.redeemPairingShared(ctx, b, eventID, msg, code)
	}
	c.pair.mu.Lock()
	defer c.pair.mu.Unlock()
	now := c.now()
	live := c.pair.code != "" && now.Before(c.pair.expires) &&
		subtle.ConstantTimeCompare([]byte(code), []byte(c.pair.code)) == 1
	if !live {
		// Record the ids anyway so a retry of this event is not judged again.
		if reason, err := c.admit(ctx, eventID, msg.MessageID, func(*store.Tx) error { return nil }); err == nil && reason != "" {
			c.met.drop(reason)
			return okResponse
		}
		c.met.drop(reasonPairCode)
		return okResponse
	}
	already := false
	reason, err := c.admit(ctx, eventID, msg.MessageID, func(tx *store.Tx) error {
		var err error
		already, err = c.allowPaired(tx, msg.SenderOpenID, now)
		return err
	})
	if err != nil {
		c.log.Error("lark: pairing could not be recorded", "err", err.Error())
		c.met.drop(reasonStoreConflict)
		return respond(http.StatusServiceUnavailable, map[string]string{"msg": "retry"})
	}
	if reason != "" {
		c.met.drop(reason)
		return okResponse
	}
	// Single use: consumed by the first sender, whether or not they were already allowed.
	c.pair.code, c.pair.expires = "", time.Time{}
	return c.paired(b, msg, already)
}

// redeemPairingShared is redeemPairing over a shared store: the code's check, its consumption
// and the allowlist write are one transaction, so of two senders racing on two replicas
// exactly one is paired.
func (c *Channel) redeemPairingShared(ctx context.Context, b *liveBinding, eventID string, msg larkapi.Message, code string) EventResponse {
	now := c.now()
	live, already := false, false
	reason, err := c.admit(ctx, eventID, msg.MessageID, func(tx *store.Tx) error {
		live, already = false, false
		ok, err := c.redeemShared(tx, code)
		if err != nil || !ok {
			return err // not live: the ids are recorded all the same
		}
		live = true
		already, err = c.allowPaired(tx, msg.SenderOpenID, now)
		return err
	})
	if err != nil {
		c.log.Error("lark: pairing could not be recorded", "err", err.Error())
		c.met.drop(reasonStoreConflict)
		return respond(http.StatusServiceUnavailable, map[string]string{"msg": "retry"})
	}
	if reason != "" {
		c.met.drop(reason)
		return okResponse
	}
	if !live {
		c.met.drop(reasonPairCode)
		return okResponse
	}
	return c.paired(b, msg, already)
}

// allowPaired puts the sender of a live pairing code on the allowlist in tx (the first entry is
// the owner), unless they are on it already; a full allowlist refuses them.
func (c *Channel) allowPaired(tx *store.Tx, openID string, now time.Time) (already bool, err error) {
	_, err = colAllow.Get(tx, openID)
	switch {
	case err == nil:
		return true, nil
	case !errors.Is(err, store.ErrNotFound):
		return false, err
	}
	n, owner, err := allowStats(tx)
	if err != nil {
		return false, err
	}
	if n >= c.cfg.MaxAllowlist {
		return false, errDuplicate{reasonAllowFull}
	}
	return false, colAllow.Put(tx, openID, AllowEntry{OpenID: openID, Via: "pairing", AddedAt: now, Owner: !owner})
}

// paired counts a redeemed pairing code and replies to its sender.
func (c *Channel) paired(b *liveBinding, msg larkapi.Message, already bool) EventResponse {
	c.met.accepted.WithLabelValues("pairing").Inc()
	c.log.Info("lark: a sender was paired", "already_allowed", already)
	text := "Paired: you can now ask me here and in groups by mentioning me."
	if already {
		text = "You were already on the allowlist; the code is now used up."
	}
	c.goOutbound(func(ctx context.Context) {
		if _, err := b.api.Reply(ctx, msg.MessageID, text, "pair-"+msg.MessageID); err != nil {
			c.outboundFailed("reply", err)
		}
	})
	return okResponse
}

// allowStats counts the allowlist and reports whether an entry is marked as the owner.
func allowStats(tx *store.Tx) (n int, owner bool, err error) {
	err = colAllow.Each(tx, "", store.ScanOptions{}, func(_ string, e AllowEntry) error {
		n++
		owner = owner || e.Owner
		return nil
	})
	return n, owner, err
}

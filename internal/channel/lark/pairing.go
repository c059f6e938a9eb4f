package lark

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
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
// new code expires it. Over a store other replicas share, it lives in the store instead
// (lark-pair/current: salted SHA-256 of the code, its expiry, with the five-minute TTL): a
// cancel, a new code or its five minutes expire it.
type pairing struct {
	st  *store.Store
	now func() time.Time

	// mu guards code and expires (embedded stores).
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

// info describes the pending code (from the store when it is shared).
func (p *pairing) info(ctx context.Context) PairingInfo {
	if p.st.Shared() {
		var rec pairRecord
		err := p.st.View(ctx, func(tx *store.Tx) (err error) {
			rec, err = colPair.Get(tx, pairID)
			return err
		})
		if err != nil || !p.now().Before(rec.ExpiresAt) {
			return PairingInfo{}
		}
		return PairingInfo{Pending: true, ExpiresAt: ptime(rec.ExpiresAt)}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.code == "" || !p.now().Before(p.expires) {
		return PairingInfo{}
	}
	return PairingInfo{Pending: true, ExpiresAt: ptime(p.expires)}
}

// put makes code the pending one until expires, replacing any other (over a shared store,
// hashed, for every replica).
func (p *pairing) put(ctx context.Context, code string, expires time.Time) error {
	if p.st.Shared() {
		var b [16]byte
		_, _ = rand.Read(b[:])
		salt := hex.EncodeToString(b[:])
		rec := pairRecord{Salt: salt, Hash: hashCode(salt, code), ExpiresAt: expires}
		return p.st.Update(ctx, func(tx *store.Tx) error { return colPair.PutTTL(tx, pairID, rec, PairTTL) })
	}
	p.mu.Lock()
	p.code, p.expires = code, expires
	p.mu.Unlock()
	return nil
}

// clear expires the pending code, if any.
func (p *pairing) clear(ctx context.Context) error {
	if p.st.Shared() {
		return p.st.Update(ctx, func(tx *store.Tx) error { return colPair.Delete(tx, pairID) })
	}
	p.mu.Lock()
	p.code, p.expires = "", time.Time{}
	p.mu.Unlock()
	return nil
}

const pairID = "current"

func hashCode(salt, code string) string {
	h := sha256.Sum256([]byte(salt + "\x00" + code))
	return hex.EncodeToString(h[:])
}

// redeemStored checks code against the stored one inside tx and consumes it (shared stores).
func (p *pairing) redeemStored(tx *store.Tx, code string) (bool, error) {
	rec, err := colPair.Get(tx, pairID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if !p.now().Before(rec.ExpiresAt) ||
		subtle.ConstantTimeCompare([]byte(hashCode(rec.Salt, code)), []byte(rec.Hash)) != 1 {
		return false, nil
	}
	return true, colPair.Delete(tx, pairID)
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
	if err := c.pair.put(ctx, pc.Code, pc.ExpiresAt); err != nil {
		return PairingCode{}, errs.Wrap(errs.Internal, err, "the pairing code could not be stored")
	}
	c.log.Info("lark: pairing code minted", "expires", pc.ExpiresAt)
	return pc, nil
}

// CancelPairing expires the pending code, if any.
func (c *Channel) CancelPairing() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.pair.clear(ctx); err != nil {
		c.log.Warn("lark: the pairing code could not be cancelled", "err", err.Error())
	}
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
		ok, err := c.pair.redeemStored(tx, code)
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

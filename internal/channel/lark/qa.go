package lark

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
	"github.com/pixie-dev/pixie/internal/channel/lark/locus"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// QAActionID is the wheel id of the built-in Q&A group action.
const QAActionID = "lark-qa-group"

// QASource is what the Q&A group action takes from the invocation's snapshot: the session the
// person was working in, its workspace, and optionally the person's open_id. When OpenID is
// empty the allowlist entry marked as owner is used (the first person paired becomes the owner;
// Settings can move the mark).
type QASource struct {
	SessionID string `json:"sessionId"`
	Workspace string `json:"workspace,omitempty"`
	OpenID    string `json:"openId,omitempty"`
}

// QAGroup is the group tied to a session.
type QAGroup struct {
	ChatID    string `json:"chatId"`
	LocusID   string `json:"locusId"`
	SessionID string `json:"sessionId"`
	ShortID   string `json:"shortId"`
	// Created is false when the session already had its group.
	Created bool `json:"created"`
}

// QAAvailability reports whether the Q&A group action can run, and why not: it needs the
// channel available and a person's open_id (the owner on the allowlist).
func (c *Channel) QAAvailability(ctx context.Context) (bool, string) {
	if b, p := c.available(); b == nil {
		return false, "the Lark channel is unavailable: " + p
	}
	owner, err := ownerOpenID(ctx, c.st)
	if err != nil {
		return false, "the allowlist could not be read"
	}
	if owner == "" {
		return false, "no person's open_id is known: pair yourself with the bot (Settings → Channel), or mark an allowlist entry as owner"
	}
	return true, ""
}

// OpenQAGroup opens a Lark group tied to src's session: the bot creates the group, adds the
// person, and binds it as that session's Locus, so others can ask questions without touching
// the session. A session that already has its group gets it back (Created false); concurrent
// calls for one session create one group.
func (c *Channel) OpenQAGroup(ctx context.Context, src QASource) (QAGroup, error) {
	b, p := c.available()
	if b == nil {
		return QAGroup{}, errs.New(errs.Unavailable, "the Lark channel is unavailable: %s", p)
	}
	if err := locus.CheckSessionRequest(SessionRequest{ID: src.SessionID, Workspace: src.Workspace}); err != nil {
		return QAGroup{}, err
	}
	person := src.OpenID
	if person == "" {
		var err error
		if person, err = ownerOpenID(ctx, c.st); err != nil {
			return QAGroup{}, err
		}
		if person == "" {
			return QAGroup{}, errs.New(errs.Unavailable, "no person's open_id is known: pair with the bot first, or mark an allowlist entry as owner")
		}
	} else if !larkapi.ValidOpenID(person) {
		return QAGroup{}, errs.New(errs.Invalid, "openId must be a Lark open_id (ou_…)")
	}
	unlock, err := c.q.Lock(ctx, "qa:"+src.SessionID)
	if err != nil {
		return QAGroup{}, err
	}
	defer unlock()

	var sess Session
	var existing *QAGroup
	err = c.st.Update(ctx, func(tx *store.Tx) error {
		existing = nil
		var err error
		sess, err = c.q.EnsureSession(tx, SessionRequest{ID: src.SessionID, Workspace: src.Workspace})
		if err != nil {
			return err
		}
		if sess.QAChatID == "" {
			return nil
		}
		l, active, err := locus.ActiveLocus(tx, sess.QAChatID)
		if err != nil {
			return err
		}
		if active && l.MainSessionID == sess.ID {
			existing = &QAGroup{ChatID: sess.QAChatID, LocusID: l.ID, SessionID: sess.ID, ShortID: sess.ShortID}
		}
		return nil
	})
	if err != nil {
		return QAGroup{}, err
	}
	if existing != nil {
		return *existing, nil
	}
	sum := sha256.Sum256([]byte(b.appID + "\x00" + sess.ID + "\x00" + sess.QAChatID))
	chatID, err := b.api.CreateChat(ctx, "Pixie Q&A · "+sess.ShortID,
		"Questions about session "+sess.ShortID+". Mention the bot to ask; answers come from a dedicated child session.",
		person, hex.EncodeToString(sum[:16]))
	if err != nil {
		c.outboundFailed("chat_create", err)
		return QAGroup{}, err
	}
	var out QAGroup
	err = c.st.Update(ctx, func(tx *store.Tx) error {
		l, active, err := locus.ActiveLocus(tx, chatID)
		if err != nil {
			return err
		}
		if !active {
			qa := locus.Entry{Key: chatID, ChatID: chatID, ChatType: larkapi.ChatGroup}
			if l, err = c.q.CreateLocus(tx, qa, sess, true); err != nil {
				return err
			}
		}
		s, err := locus.SetQAChat(tx, sess.ID, chatID)
		if err != nil {
			return err
		}
		out = QAGroup{ChatID: chatID, LocusID: l.ID, SessionID: s.ID, ShortID: s.ShortID, Created: true}
		return nil
	})
	if err != nil {
		return QAGroup{}, err
	}
	c.log.Info("lark: Q&A group opened", "session", sess.ShortID, "chat", chatID)
	return out, nil
}

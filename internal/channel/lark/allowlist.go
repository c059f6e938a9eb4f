package lark

import (
	"context"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// Allowlist returns the permitted senders in open_id order.
func (c *Channel) Allowlist(ctx context.Context) ([]AllowEntry, error) {
	var out []AllowEntry
	err := c.st.View(ctx, func(tx *store.Tx) error {
		es, err := colAllow.List(tx, "", store.ScanOptions{})
		for _, e := range es {
			out = append(out, e.Value)
		}
		return err
	})
	if out == nil {
		out = []AllowEntry{}
	}
	return out, err
}

// AllowRequest adds a sender by open_id (the advanced fallback to pairing).
type AllowRequest struct {
	OpenID string `json:"openId"`
	Name   string `json:"name,omitempty"`
	Owner  bool   `json:"owner,omitempty"`
}

// Allow adds or updates a sender. Marking an entry as the owner unmarks the previous owner.
func (c *Channel) Allow(ctx context.Context, req AllowRequest) (AllowEntry, error) {
	req.OpenID = strings.TrimSpace(req.OpenID)
	req.Name = strings.TrimSpace(req.Name)
	if !larkapi.ValidOpenID(req.OpenID) {
		return AllowEntry{}, errs.New(errs.Invalid, "openId must be a Lark open_id (ou_…)")
	}
	if utf8.RuneCountInString(req.Name) > 100 || strings.ContainsAny(req.Name, "\n\r") {
		return AllowEntry{}, errs.New(errs.Invalid, "name must be one line of at most 100 characters")
	}
	var out AllowEntry
	err := c.st.Update(ctx, func(tx *store.Tx) error {
		e, err := colAllow.Get(tx, req.OpenID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			n, _, err := allowStats(tx)
			if err != nil {
				return err
			}
			if n >= c.cfg.MaxAllowlist {
				return errs.New(errs.Conflict, "the allowlist is full (%d entries)", c.cfg.MaxAllowlist)
			}
			e = AllowEntry{OpenID: req.OpenID, Via: "manual", AddedAt: c.now()}
		case err != nil:
			return err
		}
		if req.Name != "" {
			e.Name = req.Name
		}
		if req.Owner {
			if err := clearOwner(tx); err != nil {
				return err
			}
			e.Owner = true
		}
		out = e
		return colAllow.Put(tx, e.OpenID, e)
	})
	return out, err
}

// SetOwner marks openID (already allowlisted) as the owner.
func (c *Channel) SetOwner(ctx context.Context, openID string) (AllowEntry, error) {
	var out AllowEntry
	err := c.st.Update(ctx, func(tx *store.Tx) error {
		e, err := colAllow.Get(tx, openID)
		if errors.Is(err, store.ErrNotFound) {
			return errs.New(errs.NotFound, "%s is not on the allowlist", openID)
		} else if err != nil {
			return err
		}
		if err := clearOwner(tx); err != nil {
			return err
		}
		e.Owner = true
		out = e
		return colAllow.Put(tx, openID, e)
	})
	return out, err
}

// clearOwner unmarks the owner, in tx.
func clearOwner(tx *store.Tx) error {
	return colAllow.Each(tx, "", store.ScanOptions{}, func(id string, e AllowEntry) error {
		if !e.Owner {
			return nil
		}
		e.Owner = false
		return colAllow.Put(tx, id, e)
	})
}

// Disallow removes a sender.
func (c *Channel) Disallow(ctx context.Context, openID string) error {
	return c.st.Update(ctx, func(tx *store.Tx) error {
		ok, err := colAllow.Has(tx, openID)
		if err != nil {
			return err
		}
		if !ok {
			return errs.New(errs.NotFound, "%s is not on the allowlist", openID)
		}
		return colAllow.Delete(tx, openID)
	})
}

func isAllowed(tx *store.Tx, openID string) (bool, error) { return colAllow.Has(tx, openID) }

// ownerOpenID returns the owner's open_id, or "".
func ownerOpenID(ctx context.Context, st *store.Store) (string, error) {
	owner := ""
	err := st.View(ctx, func(tx *store.Tx) error {
		return colAllow.Each(tx, "", store.ScanOptions{}, func(_ string, e AllowEntry) error {
			if e.Owner {
				owner = e.OpenID
				return store.ErrStop
			}
			return nil
		})
	})
	return owner, err
}

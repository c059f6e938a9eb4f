package pet

import (
	"context"
	"errors"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// Replicas. Over a store other processes share, the Invocations of one scope must run one at a
// time across every replica, not only within one: lockScope then also holds
// pet-scope-lock/<scope> in the store (with a TTL of the Run's time limit and a margin, so a
// replica killed mid-Run does not block the scope for ever). A Run records the replica's
// instance as its Boot, and a Run another live replica is running shows as running
// (Config.Alive), not as interrupted.

var scopeLocks = store.NewCollection[scopeLock]("pet-scope-lock")

type scopeLock struct {
	Holder string    `json:"holder"`
	At     time.Time `json:"at"`
}

var errScopeBusy = errors.New("pet: scope busy")

// lockScope serialises the Invocations of scope: in this process, and over a shared store in
// every replica.
func (s *Service) lockScope(ctx context.Context, scope string) (func(), error) {
	unlock, err := s.scopes.Lock(ctx, scope)
	if err != nil {
		return nil, errs.Wrap(errs.Timeout, err, "gave up waiting for the earlier invocation of this scope to finish")
	}
	if !s.st.Shared() {
		return unlock, nil
	}
	holder := s.boot + "/" + randHex(6)
	ttl := s.cfg.RunTimeout + 30*time.Second
	for {
		err := s.st.Update(ctx, func(tx *store.Tx) error {
			ok, err := scopeLocks.Has(tx, scope)
			if err != nil {
				return err
			}
			if ok {
				return errScopeBusy
			}
			return scopeLocks.PutTTL(tx, scope, scopeLock{Holder: holder, At: s.now()}, ttl)
		})
		if err == nil {
			break
		}
		if !errors.Is(err, errScopeBusy) && ctx.Err() == nil {
			unlock()
			return nil, errs.Wrap(errs.Internal, err, "the scope's lock could not be taken")
		}
		select {
		case <-ctx.Done():
			unlock()
			return nil, errs.Wrap(errs.Timeout, ctx.Err(), "gave up waiting for the earlier invocation of this scope to finish")
		case <-time.After(25 * time.Millisecond):
		}
	}
	return func() {
		bg, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.st.Update(bg, func(tx *store.Tx) error {
			l, err := scopeLocks.Get(tx, scope)
			if err != nil || l.Holder != holder {
				return nil // expired and taken by another: not ours to remove
			}
			return scopeLocks.Delete(tx, scope)
		})
		unlock()
	}, nil
}

package lark

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// # Replicas
//
// Over a store other processes share (N replicas behind a load balancer, which Lark's webhook
// reaches at random), the channel works like this:
//
//   - Any replica admits events: the dedup keys and the queued event are one transaction, so
//     an event Lark delivers to two replicas at once is admitted once. The transaction notifies
//     "lark inbound".
//   - One replica, the leader (the store lease "lark", renewed every leaderEvery), is the
//     channel's one event consumer and does its background work: it drains the inbound queue,
//     activates Deliveries (reaction, images, the built-in executor), times out Deliveries past
//     their deadline, and when it becomes leader resumes what the previous leader left (recover).
//     Other replicas serve the API (Current, Finish, Wait, Cancel, images, status, pairing).
//   - A Delivery settled on any replica notifies "lark settled <id>": every replica stops a run
//     of it and drops its local copies of its images, and the leader activates the next one.
//     Its activation done notifies "lark ready <id>" and leaves lark-ready/<id>, so Current on
//     any replica stops waiting for it. A replica marks a Delivery it settles in
//     lark-settling/<id> (TTL), so two replicas never settle one Delivery at once.
//   - A binding changed on one replica notifies "lark binding"; every replica reloads it (the
//     secrets live in the shared credentials).
//   - The pairing code lives in lark-pair/current: salted SHA-256 of the code, its expiry, with
//     the five-minute TTL; redeeming it deletes it in the transaction that adds the sender, so
//     of two senders racing on two replicas exactly one is paired.
//   - The start-up watermark is the cluster's: lark-meta/epoch holds when the first replica of
//     the running cluster started, renewed by every replica; a replica that starts while others
//     run adopts it, and only a start after the whole cluster stopped (the record expired)
//     moves it.
//
// Over an embedded store none of this runs.

const (
	leaderLease = "lark"
	leaderEvery = 2 * time.Second
	leaderTTL   = 10 * time.Second
	epochEvery  = 10 * time.Second
	epochTTL    = 3 * epochEvery
	larkTopic   = "lark"
)

const (
	noteInbound = "inbound"
	noteBinding = "binding"
)

type pairRecord struct {
	Salt      string    `json:"salt"`
	Hash      string    `json:"hash"`
	ExpiresAt time.Time `json:"expiresAt"`
}

type epochRecord struct {
	StartedAt time.Time `json:"startedAt"`
}

var (
	colPair = store.NewCollection[pairRecord]("lark-pair")  // lark-pair/current (TTL)
	colMeta = store.NewCollection[epochRecord]("lark-meta") // lark-meta/epoch (TTL)
)

// sharedState is the channel's part for shared stores.
type sharedState struct {
	leading  atomic.Bool
	unlisten func()
}

func (c *Channel) isShared() bool { return c.st.Shared() }

// leads reports whether this replica does the channel's background work: always over an
// embedded store.
func (c *Channel) leads() bool { return !c.isShared() || c.sh.leading.Load() }

// notifyTx queues a channel notification (shared stores).
func (c *Channel) notifyTx(tx *store.Tx, what string) error {
	if !c.isShared() {
		return nil
	}
	return tx.Notify(larkTopic, what)
}

// startShared adopts the cluster's watermark, listens to the other replicas and starts the
// leader loop.
func (c *Channel) startShared(ctx context.Context) error {
	started, err := adoptEpoch(ctx, c.st, c.started)
	c.started = started
	if err != nil {
		return err
	}
	c.sh.unlisten = c.st.Listen(larkTopic, c.heard)
	c.wg.Add(1)
	go c.leaderLoop()
	return nil
}

func (c *Channel) heard(n store.Note) {
	switch {
	case n.Lost:
		c.goOutbound(func(ctx context.Context) {
			_ = c.binder.load(ctx)
			if c.leads() {
				c.recover(ctx)
			}
		})
		c.kick()
	case n.Payload == noteInbound:
		c.kick()
	case n.Payload == noteBinding:
		c.goOutbound(func(ctx context.Context) {
			_ = c.binder.load(ctx)
			if c.leads() {
				c.recover(ctx)
				c.kick()
			}
		})
	default:
		// A Delivery settled or activated on another replica (locus.Queue.Heard).
		if id, ok := c.q.Heard(n.Payload); ok && id != "" && c.leads() {
			c.goOutbound(func(ctx context.Context) { c.recover(ctx) })
		}
	}
}

// leaderLoop takes and renews the leader lease, and renews the cluster's epoch.
func (c *Channel) leaderLoop() {
	defer c.wg.Done()
	t := time.NewTicker(leaderEvery)
	defer t.Stop()
	lastEpoch := time.Now()
	for {
		ok, err := c.st.Lead(c.ctx, leaderLease, leaderTTL)
		if err != nil && c.ctx.Err() == nil {
			c.log.Warn("lark: the leader lease could not be renewed", "err", err.Error())
			ok = false
		}
		was := c.sh.leading.Swap(ok)
		if ok && !was {
			c.log.Info("lark: this replica now consumes the channel's events")
			c.recover(c.ctx)
			c.kick()
		} else if !ok && was {
			c.log.Warn("lark: this replica no longer consumes the channel's events")
		}
		if time.Since(lastEpoch) >= epochEvery {
			if err := renewEpoch(c.ctx, c.st, c.started); err != nil && c.ctx.Err() == nil {
				c.log.Warn("lark: the cluster's start could not be renewed", "err", err.Error())
			}
			lastEpoch = time.Now()
		}
		select {
		case <-c.ctx.Done():
			if c.sh.unlisten != nil {
				c.sh.unlisten()
			}
			return
		case <-t.C:
		}
	}
}

const epochID = "epoch"

// adoptEpoch returns the watermark's start: the running cluster's, or started (now) when no
// replica runs, which it records as the cluster's.
func adoptEpoch(ctx context.Context, st *store.Store, started time.Time) (time.Time, error) {
	err := st.Update(ctx, func(tx *store.Tx) error {
		e, err := colMeta.Get(tx, epochID)
		switch {
		case err == nil:
			started = e.StartedAt
			return colMeta.PutTTL(tx, epochID, e, epochTTL)
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		return colMeta.PutTTL(tx, epochID, epochRecord{StartedAt: started}, epochTTL)
	})
	if err != nil {
		return started, errs.Wrap(errs.Internal, err, "lark: read the cluster's start")
	}
	return started, nil
}

// renewEpoch keeps the cluster's start alive; when it expired while this replica ran, started
// (this replica's) becomes it again.
func renewEpoch(ctx context.Context, st *store.Store, started time.Time) error {
	return st.Update(ctx, func(tx *store.Tx) error {
		e, err := colMeta.Get(tx, epochID)
		if errors.Is(err, store.ErrNotFound) {
			e = epochRecord{StartedAt: started} // expired while this replica ran: keep ours
		} else if err != nil {
			return err
		}
		return colMeta.PutTTL(tx, epochID, e, epochTTL)
	})
}

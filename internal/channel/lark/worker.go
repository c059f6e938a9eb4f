package lark

import (
	"context"
	"errors"
	"time"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
	"github.com/pixie-dev/pixie/internal/channel/lark/locus"
	"github.com/pixie-dev/pixie/internal/store"
)

// workerBatch is how many queued events the worker reads at a time.
const workerBatch = 32

// worker processes accepted events in arrival order, one at a time.
func (c *Channel) worker() {
	defer c.wg.Done()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.wake:
		}
		for c.ctx.Err() == nil {
			if n := c.drain(c.ctx); n == 0 {
				break
			}
		}
	}
}

// drain processes up to workerBatch events and returns how many it looked at.
func (c *Channel) drain(ctx context.Context) int {
	if !c.leads() {
		return 0 // another replica consumes the events (shared.go)
	}
	var items []inbound
	err := c.st.View(ctx, func(tx *store.Tx) error {
		es, err := colInbound.List(tx, "", store.ScanOptions{Limit: workerBatch})
		for _, e := range es {
			items = append(items, e.Value)
		}
		return err
	})
	if err != nil {
		c.log.Error("lark: could not read the inbound queue", "err", err.Error())
		return 0
	}
	for _, in := range items {
		if ctx.Err() != nil {
			return 0
		}
		if err := c.process(ctx, in); err != nil {
			if ctx.Err() != nil {
				return 0
			}
			// A store failure: drop the event rather than loop on it (it was counted).
			c.log.Error("lark: could not process an event", "err", err.Error())
			c.met.drop(reasonInternal)
			_ = c.st.Update(ctx, func(tx *store.Tx) error { return colInbound.Delete(tx, in.ID) })
			time.Sleep(10 * time.Millisecond)
		}
	}
	return len(items)
}

// process applies the rules that need state to one accepted event: control commands, who may
// ask where, bootstrapping a new entry, and queueing the Delivery.
func (c *Channel) process(ctx context.Context, in inbound) error {
	b, _ := c.available()
	if b == nil {
		c.met.drop(reasonUnavailable)
		return c.st.Update(ctx, func(tx *store.Tx) error { return colInbound.Delete(tx, in.ID) })
	}
	msg := in.Msg
	if cmd, ok := parseCommand(msg.Text); ok {
		return c.processCommand(ctx, b, in, cmd)
	}
	var reason string
	var started *Delivery
	err := c.st.Update(ctx, func(tx *store.Tx) error {
		reason, started = "", nil
		if ok, err := colInbound.Has(tx, in.ID); err != nil || !ok {
			return err
		}
		if err := colInbound.Delete(tx, in.ID); err != nil {
			return err
		}
		allowed, err := isAllowed(tx, msg.SenderOpenID)
		if err != nil {
			return err
		}
		l, active, err := locus.ActiveLocus(tx, msg.EntryKey())
		if err != nil {
			return err
		}
		if !allowed {
			switch {
			case msg.ChatType == larkapi.ChatP2P:
				reason = reasonDMNotAllowed
			case !active:
				reason = reasonNotAllowed
			case l.ToolTier == TierShell:
				reason = reasonShellTier
			}
			if reason != "" {
				return nil
			}
		}
		if !active {
			l, err = c.q.Bootstrap(tx, entryOf(msg))
			if errors.Is(err, locus.ErrNoWorkspace) {
				reason = reasonNoWorkspace
				return nil
			}
			if err != nil {
				return err
			}
		}
		d, err := c.q.Enqueue(tx, &l, Delivery{MessageID: msg.MessageID, ChatID: msg.ChatID, ThreadID: msg.ThreadID,
			SenderOpenID: msg.SenderOpenID, Text: msg.Text, Images: msg.Images, Truncated: msg.Truncated,
			ReceivedAt: in.ReceivedAt})
		if errors.Is(err, locus.ErrQueueFull) {
			reason = reasonQueueFull
			return nil
		}
		if err != nil {
			return err
		}
		if d.State == DeliveryCurrent {
			started = &d
		}
		return nil
	})
	if err != nil {
		return err
	}
	if reason != "" {
		c.met.drop(reason)
		if reason == reasonNoWorkspace {
			c.log.Warn("lark: a new entry was not created", "why", c.q.WorkspaceProblem())
		}
		return nil
	}
	c.met.accepted.WithLabelValues("question").Inc()
	if started != nil {
		d := *started
		c.goOutbound(func(ctx context.Context) { c.activate(ctx, d) })
	}
	return nil
}

package lark

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pixie-dev/pixie/internal/channel/lark/locus"
	"github.com/pixie-dev/pixie/internal/clip"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/model"
)

// builtinMaxTokens caps the built-in executor's answer.
const builtinMaxTokens = 1500

// builtinReplyAttempts is how often the built-in executor tries to send its reply.
const builtinReplyAttempts = 3

// startBuiltin runs the built-in executor for the current Delivery d: the Pixie model answers
// as the Locus's child, from the Delivery alone (plus the child's own short history), and the
// executor then finishes the Delivery. A model turn ending is not what ends the Delivery: the
// finish is.
func (c *Channel) startBuiltin(d Delivery, l Locus) {
	var ctx context.Context
	var cancel context.CancelFunc
	if !c.q.StartRun(d.ID, func() context.CancelFunc {
		deadline := time.Now().Add(c.cfg.InitialDeadline)
		if d.Deadline != nil {
			deadline = time.Now().Add(d.Deadline.Sub(c.now()))
		}
		ctx, cancel = context.WithDeadline(c.ctx, deadline)
		return cancel
	}) {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			c.q.EndRun(d.ID)
			cancel()
		}()
		c.runBuiltin(ctx, d, l)
	}()
}

func (c *Channel) runBuiltin(ctx context.Context, d Delivery, l Locus) {
	self := func(got Delivery, gl Locus) error {
		if gl.Executor != ExecutorBuiltin {
			return errs.New(errs.Conflict, "the executor changed")
		}
		return nil
	}
	fail := func(why string) {
		if ctx.Err() != nil && c.ctx.Err() != nil {
			return // shutting down: the Delivery resumes on the next start
		}
		if _, err := c.settle(context.WithoutCancel(ctx), d.ID, self, locus.Outcome{State: DeliveryFailed, Fail: why}); err != nil &&
			!errs.Is(err, errs.Conflict) && !errs.Is(err, errs.NotFound) {
			c.log.Warn("lark: could not fail a delivery", "delivery", d.ID, "err", describeErr(err))
		}
	}
	if !c.modelConfigured() {
		fail("the built-in executor has no Pixie model configured")
		return
	}
	child, err := c.q.Child(ctx, l.ChildID)
	if err != nil {
		fail("the child session could not be read")
		return
	}
	req := c.builtinRequest(ctx, d, l, child)
	resp, err := c.cfg.Model.Complete(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			if c.ctx.Err() == nil && errors.Is(ctx.Err(), context.Canceled) {
				return // settled elsewhere (cancel, unbind)
			}
			if c.ctx.Err() != nil {
				return
			}
		}
		fail("the Pixie model failed: " + describeModelErr(err))
		return
	}
	text := strings.TrimSpace(resp.Text)
	o := locus.Outcome{State: DeliveryDone, Reply: clip.Runes(text, c.cfg.MaxReplyChars)}
	if text == "" {
		o = locus.Outcome{State: DeliveryDone, NoReply: "the model gave an empty answer"}
	}
	for attempt := 1; ; attempt++ {
		_, err = c.settle(context.WithoutCancel(ctx), d.ID, self, o)
		if err == nil || errs.Is(err, errs.Conflict) || errs.Is(err, errs.NotFound) {
			return
		}
		if attempt >= builtinReplyAttempts || ctx.Err() != nil {
			fail("the reply could not be sent: " + describeErr(err))
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt) * time.Second):
		}
	}
}

// builtinRequest builds the model request: the child's identity, its own earlier turns, and
// the Delivery. Images are described, not shown: internal/model carries text only, so the image
// part is unavailable to the built-in executor (an external executor gets the files).
func (c *Channel) builtinRequest(ctx context.Context, d Delivery, l Locus, child Child) model.Request {
	var sys strings.Builder
	fmt.Fprintf(&sys, "You are Pixie's assistant in a Lark %s, serving it as child session %s of main session %s.\n",
		map[bool]string{true: "topic", false: "chat"}[l.ThreadID != ""], child.ID, locus.ShortID(l.MainSessionID))
	sys.WriteString("You answer one message at a time, briefly and plainly, in the language of the question. ")
	sys.WriteString("You cannot run tools or see the main session's history; say so when a question needs them. ")
	sys.WriteString("To mention a chat member, write @ followed by their exact name.")
	var msgs []model.Message
	for _, t := range child.History {
		msgs = append(msgs, model.Message{Role: model.RoleUser, Content: t.Question},
			model.Message{Role: model.RoleAssistant, Content: t.Answer})
	}
	var q strings.Builder
	if name := c.senderName(ctx, d); name != "" {
		fmt.Fprintf(&q, "From %s:\n", name)
	}
	q.WriteString(d.Text)
	if d.Truncated {
		q.WriteString("\n[the message was longer and has been cut]")
	}
	if len(d.Images) > 0 {
		files, note := c.q.Spool().Get(d.ID)
		for _, f := range files {
			fmt.Fprintf(&q, "\n[image %d attached: %s, %d bytes — this model cannot see images]", f.Index, f.MediaType, f.Size)
		}
		if note != "" {
			fmt.Fprintf(&q, "\n[some images are unavailable: %s]", note)
		}
	}
	msgs = append(msgs, model.Message{Role: model.RoleUser, Content: strings.TrimSpace(q.String())})
	return model.Request{System: sys.String(), Messages: msgs, MaxTokens: builtinMaxTokens}
}

// senderName resolves the sender's display name from the chat's members (best effort).
func (c *Channel) senderName(ctx context.Context, d Delivery) string {
	b := c.binder.live()
	if b == nil {
		return ""
	}
	ms, err := c.members.Members(ctx, b.api, d.ChatID, c.now())
	if err != nil {
		return ""
	}
	for _, m := range ms {
		if m.OpenID == d.SenderOpenID {
			return m.Name
		}
	}
	return ""
}

// describeModelErr names a model failure without provider internals.
func describeModelErr(err error) string {
	switch {
	case errors.Is(err, model.ErrNoModel):
		return "no model is configured"
	case errors.Is(err, model.ErrAuth):
		return "authentication failed"
	case errors.Is(err, model.ErrRateLimit):
		return "rate limited"
	case errors.Is(err, model.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(err, model.ErrBadResponse):
		return "bad response"
	}
	return "error"
}

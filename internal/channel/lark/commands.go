package lark

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
	"github.com/pixie-dev/pixie/internal/channel/lark/locus"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// Control commands. Each has a long form and a short flag form; only allowlisted senders may
// run them, and anyone else's command is dropped without a word (it is never forwarded to the
// child as a question). A message is a command only when its first word is one of these, so a
// question that happens to start with a path ("/etc/hosts …") is still a question.
const (
	cmdBind   = "bind"
	cmdUnbind = "unbind"
	cmdStatus = "status"
	cmdTier   = "tier"
	cmdCancel = "cancel"
	cmdHelp   = "help"
)

var commandNames = map[string]string{
	"/bind": cmdBind, "-b": cmdBind,
	"/unbind": cmdUnbind, "-u": cmdUnbind,
	"/status": cmdStatus, "-s": cmdStatus,
	"/tier": cmdTier, "-t": cmdTier,
	"/cancel": cmdCancel, "-c": cmdCancel,
	"/help": cmdHelp, "-h": cmdHelp,
}

type command struct {
	name string
	args []string
}

// parseCommand recognises a control command in a message's text.
func parseCommand(text string) (command, bool) {
	fields := strings.Fields(text)
	if len(fields) == 0 {
		return command{}, false
	}
	name, ok := commandNames[strings.ToLower(fields[0])]
	if !ok {
		return command{}, false
	}
	return command{name: name, args: fields[1:]}, true
}

// helpText is the answer to /help (and to a malformed command).
const helpText = `Commands (allowlisted senders only; mention me first):
/bind <session prefix>  (-b)  attach this chat to an existing main session (its 6-character short id or longer)
/unbind                 (-u)  detach this chat; waiting questions are dropped, the next mention starts afresh
/status                 (-s)  show this chat's binding and queue
/tier read|shell        (-t)  set the tool tier; a shell-tier chat takes questions from allowlisted senders only
/cancel                 (-c)  give up on the question being answered and move to the next
/help                   (-h)  this list`

// noSessionMatch is the one answer for "no match" and "several matches": no count, no hint.
const noSessionMatch = "No single session matches that prefix."

// processCommand runs a control command from an allowlisted sender and replies to it; a command
// from anyone else is dropped.
func (c *Channel) processCommand(ctx context.Context, b *liveBinding, in inbound, cmd command) error {
	msg := in.Msg
	var allowed bool
	err := c.st.View(ctx, func(tx *store.Tx) error {
		var err error
		allowed, err = isAllowed(tx, msg.SenderOpenID)
		return err
	})
	if err != nil {
		return err
	}
	if !allowed {
		c.met.drop(reasonCommand)
		return c.st.Update(ctx, func(tx *store.Tx) error { return colInbound.Delete(tx, in.ID) })
	}
	reply, err := c.runCommand(ctx, msg, cmd)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		c.log.Warn("lark: control command failed", "command", cmd.name, "err", describeErr(err))
		reply = "That did not work: " + describeErr(err)
	}
	if err := c.st.Update(ctx, func(tx *store.Tx) error { return colInbound.Delete(tx, in.ID) }); err != nil {
		return err
	}
	c.met.accepted.WithLabelValues("command").Inc()
	c.goOutbound(func(ctx context.Context) {
		if _, err := b.api.Reply(ctx, msg.MessageID, reply, "cmd-"+msg.MessageID); err != nil {
			c.outboundFailed("reply", err)
		}
	})
	return nil
}

// runCommand executes cmd for the entry msg came from and returns the reply text.
func (c *Channel) runCommand(ctx context.Context, msg larkapi.Message, cmd command) (string, error) {
	key := msg.EntryKey()
	switch cmd.name {
	case cmdHelp:
		return helpText, nil
	case cmdBind:
		if len(cmd.args) != 1 || len(cmd.args[0]) < MinPrefix {
			return "Usage: /bind <session prefix> (at least 6 characters of the session's id).", nil
		}
		return c.bindEntry(ctx, msg, cmd.args[0])
	case cmdUnbind:
		l, ok, err := c.q.EntryLocus(ctx, key)
		if err != nil || !ok {
			return "This chat is not bound.", err
		}
		if _, err := c.ArchiveLocus(ctx, l.ID, "unbound from chat"); err != nil {
			return "", err
		}
		return "Unbound. Waiting questions were dropped; the next mention starts afresh.", nil
	case cmdStatus:
		return c.statusText(ctx, key)
	case cmdTier:
		if len(cmd.args) != 1 || (cmd.args[0] != TierRead && cmd.args[0] != TierShell) {
			return "Usage: /tier read|shell", nil
		}
		l, ok, err := c.q.EntryLocus(ctx, key)
		if err != nil || !ok {
			return "This chat is not bound.", err
		}
		if _, err := c.UpdateLocus(ctx, l.ID, LocusUpdate{ToolTier: cmd.args[0]}); err != nil {
			return "", err
		}
		if cmd.args[0] == TierShell {
			return "Tool tier: shell. Only allowlisted senders can ask here now.", nil
		}
		return "Tool tier: read. Members of this chat can ask by mentioning me.", nil
	case cmdCancel:
		l, ok, err := c.q.EntryLocus(ctx, key)
		if err != nil || !ok {
			return "This chat is not bound.", err
		}
		if l.Current == "" {
			return "Nothing is being answered here.", nil
		}
		if _, err := c.Cancel(ctx, l.ID, "cancelled from the chat"); err != nil {
			if errs.Is(err, errs.Conflict) {
				return "Nothing is being answered here.", nil
			}
			return "", err
		}
		return "Cancelled the question being answered.", nil
	}
	return helpText, nil
}

// entryOf is the Lark entry msg came from.
func entryOf(msg larkapi.Message) locus.Entry {
	return locus.Entry{Key: msg.EntryKey(), ChatID: msg.ChatID, ThreadID: msg.ThreadID, ChatType: msg.ChatType}
}

// bindEntry attaches the entry to the main session named by prefix (locus.Queue.BindEntry) and
// returns the reply.
func (c *Channel) bindEntry(ctx context.Context, msg larkapi.Message, prefix string) (string, error) {
	r, err := c.q.BindEntry(ctx, entryOf(msg), prefix)
	if err != nil {
		return "", err
	}
	switch r.Bound {
	case locus.BindAlready:
		return "Already bound to session " + r.Session.Label() + ".", nil
	case locus.BindBusy:
		return "Questions are being answered here; wait for them or /cancel, then /bind again.", nil
	case locus.BindDone:
		return fmt.Sprintf("Bound to session %s. Child %s answers here.", r.Session.Label(), r.Locus.ChildID), nil
	}
	return noSessionMatch, nil
}

// statusText describes the entry's Locus for /status.
func (c *Channel) statusText(ctx context.Context, key string) (string, error) {
	l, ok, err := c.q.EntryLocus(ctx, key)
	if err != nil {
		return "", err
	}
	if !ok {
		return "This chat is not bound. An allowlisted sender's first mention binds it to a new main session; /bind attaches it to an existing one.", nil
	}
	v, err := c.q.ViewLocus(ctx, l)
	if err != nil {
		return "", err
	}
	var sb strings.Builder
	kind := "chat"
	if l.ThreadID != "" {
		kind = "topic"
	}
	main := locus.ShortID(l.MainSessionID)
	if v.MainSession != nil {
		main = v.MainSession.Label()
	}
	fmt.Fprintf(&sb, "This %s is bound to session %s; child %s answers.\n", kind, main, l.ChildID)
	fmt.Fprintf(&sb, "Executor: %s. Tool tier: %s.\n", l.Executor, l.ToolTier)
	if v.CurrentView != nil && v.CurrentView.Deadline != nil {
		left := v.CurrentView.Deadline.Sub(c.now()).Round(time.Minute)
		fmt.Fprintf(&sb, "Answering one question (deadline in %s); %d waiting.", left, l.Queued)
	} else {
		sb.WriteString("Idle; nothing waiting.")
	}
	return sb.String(), nil
}

package lark

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/pet"
)

// qaAction is the Q&A group action on Pet's wheel.
type qaAction struct{ c *Channel }

var _ pet.BuiltinAction = qaAction{}

// QAAction returns the Q&A group action for Pet's wheel (pet.Service.RegisterBuiltin).
func (c *Channel) QAAction() pet.BuiltinAction { return qaAction{c: c} }

func (qaAction) ID() string    { return QAActionID }
func (qaAction) Label() string { return "Lark Q&A group" }

// Availability follows the action's dependencies: the channel bound and available, and a
// person's open_id known (the owner on the allowlist).
func (a qaAction) Availability(ctx context.Context) (bool, string) { return a.c.QAAvailability(ctx) }

// Invoke opens (or returns) the Q&A group of the snapshot's session. The snapshot's working
// directory, when absolute, becomes the session's workspace if it has none.
func (a qaAction) Invoke(ctx context.Context, snap pet.Snapshot) (string, error) {
	if snap.Scope != pet.ScopeSession || snap.SessionID == "" {
		return "", errs.New(errs.Invalid, "the Q&A group is tied to a session: invoke it from a session")
	}
	src := QASource{SessionID: snap.SessionID}
	if snap.Cwd != "" && filepath.IsAbs(snap.Cwd) {
		src.Workspace = snap.Cwd
	}
	g, err := a.c.OpenQAGroup(ctx, src)
	if err != nil {
		return "", err
	}
	if g.Created {
		return fmt.Sprintf("Opened a Lark group for session %s (chat %s). Mention the bot there to ask.", g.ShortID, g.ChatID), nil
	}
	return fmt.Sprintf("Session %s already has its Lark group (chat %s).", g.ShortID, g.ChatID), nil
}

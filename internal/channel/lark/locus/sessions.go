package locus

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// MinPrefix is the shortest session prefix /bind accepts (the badge's short id).
const MinPrefix = 6

// SessionRequest registers a host session as a main session, so that /bind and the Q&A group
// action can refer to it.
type SessionRequest struct {
	ID        string `json:"id"`
	Workspace string `json:"workspace,omitempty"`
}

// RegisterSession records a host session (idempotent: a known, unarchived id is returned as is,
// with its workspace filled in if it had none).
func (q *Queue) RegisterSession(ctx context.Context, req SessionRequest) (Session, error) {
	if err := CheckSessionRequest(req); err != nil {
		return Session{}, err
	}
	var out Session
	err := q.st.Update(ctx, func(tx *store.Tx) error {
		var err error
		out, err = q.EnsureSession(tx, req)
		return err
	})
	return out, err
}

// CheckSessionRequest validates a session's id and workspace.
func CheckSessionRequest(req SessionRequest) error {
	if !validSessionID(req.ID) {
		return errs.New(errs.Invalid, "session id must be 6–128 characters of letters, digits and . _ : -")
	}
	if req.Workspace != "" && (!filepath.IsAbs(req.Workspace) || len(req.Workspace) > 4096) {
		return errs.New(errs.Invalid, "workspace must be an absolute path")
	}
	return nil
}

// EnsureSession returns the main session req names, in tx, recording it when it is new (a
// checked request; see RegisterSession). A child session's id is refused.
func (q *Queue) EnsureSession(tx *store.Tx, req SessionRequest) (Session, error) {
	s, err := colSession.Get(tx, req.ID)
	switch {
	case err == nil:
		if s.Archived {
			return Session{}, errs.New(errs.Conflict, "session %s is archived", ShortID(req.ID))
		}
		if s.Workspace == "" && req.Workspace != "" {
			s.Workspace = req.Workspace
			return s, colSession.Put(tx, s.ID, s)
		}
		return s, nil
	case !errors.Is(err, store.ErrNotFound):
		return Session{}, err
	}
	if isChild, err := colChild.Has(tx, req.ID); err != nil {
		return Session{}, err
	} else if isChild {
		return Session{}, errs.New(errs.Conflict, "%s is a child session and cannot be a main session", ShortID(req.ID))
	}
	s = Session{ID: req.ID, ShortID: ShortID(req.ID), Workspace: req.Workspace, Created: q.now()}
	return s, colSession.Put(tx, s.ID, s)
}

// SetQAChat records chatID as the Q&A group of session id, in tx, and returns the session.
func SetQAChat(tx *store.Tx, id, chatID string) (Session, error) {
	s, err := colSession.Get(tx, id)
	if err != nil {
		return Session{}, err
	}
	s.QAChatID = chatID
	return s, colSession.Put(tx, s.ID, s)
}

// Sessions lists main sessions (archived ones too, flagged).
func (q *Queue) Sessions(ctx context.Context) ([]Session, error) {
	out := []Session{}
	err := q.st.View(ctx, func(tx *store.Tx) error {
		return colSession.Each(tx, "", store.ScanOptions{}, func(_ string, s Session) error {
			out = append(out, s)
			return nil
		})
	})
	return out, err
}

// Session returns main session id.
func (q *Queue) Session(ctx context.Context, id string) (Session, error) {
	var out Session
	err := q.st.View(ctx, func(tx *store.Tx) error {
		s, err := colSession.Get(tx, id)
		if errors.Is(err, store.ErrNotFound) {
			return errs.New(errs.NotFound, "no such session")
		}
		out = s
		return err
	})
	return out, err
}

// SessionLoci returns main session id and the ids of its active Loci.
func (q *Queue) SessionLoci(ctx context.Context, id string) (Session, []string, error) {
	var out Session
	var loci []string
	err := q.st.View(ctx, func(tx *store.Tx) error {
		s, err := colSession.Get(tx, id)
		if errors.Is(err, store.ErrNotFound) {
			return errs.New(errs.NotFound, "no such session")
		} else if err != nil {
			return err
		}
		out = s
		return colLocus.Each(tx, "", store.ScanOptions{}, func(lid string, l Locus) error {
			if l.MainSessionID == id && l.State == LocusActive {
				loci = append(loci, lid)
			}
			return nil
		})
	})
	return out, loci, err
}

// ArchiveSessionRecord marks main session id archived (its Loci are the caller's to archive
// first).
func (q *Queue) ArchiveSessionRecord(ctx context.Context, id string) (Session, error) {
	var out Session
	err := q.st.Update(ctx, func(tx *store.Tx) error {
		s, err := colSession.Get(tx, id)
		if err != nil {
			return err
		}
		if !s.Archived {
			s.Archived, s.ArchivedAt = true, ptime(q.now())
		}
		out = s
		return colSession.Put(tx, id, s)
	})
	return out, err
}

// resolvePrefix finds the main session /bind names: the one whose id is prefix exactly, or else
// the one session whose id starts with prefix. A prefix that more than one session shares is no
// match, whatever those sessions are: archived sessions and child sessions (which live in their
// own collection and are never bound) count, since the person typing the prefix may have meant
// any of them, and binding the one other match would attach the chat to a session they did not
// name. An archived match is no match either. No match and several matches are the same answer
// (ok=false), so a caller cannot learn that other sessions exist.
func resolvePrefix(tx *store.Tx, prefix string) (Session, bool, error) {
	if len(prefix) < MinPrefix || !validSessionID(prefix) {
		return Session{}, false, nil
	}
	// An exact id sorts first among the ids it prefixes.
	if s, err := colSession.Get(tx, prefix); err == nil {
		return s, !s.Archived, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return Session{}, false, err
	}
	var found []Session
	err := colSession.Each(tx, prefix, store.ScanOptions{Limit: 2}, func(_ string, s Session) error {
		found = append(found, s)
		return nil
	})
	if err != nil || len(found) != 1 || found[0].Archived {
		return Session{}, false, err
	}
	children, err := colChild.List(tx, prefix, store.ScanOptions{Limit: 1})
	if err != nil || len(children) > 0 {
		return Session{}, false, err
	}
	return found[0], true, nil
}

// chatSession returns the chat's automatic main session, creating it in the default workspace
// when there is none. Different chats never share one.
func (q *Queue) chatSession(tx *store.Tx, chatID string) (Session, error) {
	id, err := colSessionChat.Get(tx, chatID)
	if err == nil {
		s, err := colSession.Get(tx, id)
		if err == nil && !s.Archived {
			return s, nil
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return Session{}, err
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return Session{}, err
	}
	if p := q.WorkspaceProblem(); p != "" {
		return Session{}, ErrNoWorkspace
	}
	s := Session{ID: newID("s", 20), Workspace: q.cfg.DefaultWorkspace, ChatID: chatID, Auto: true, Created: q.now()}
	s.ShortID = ShortID(s.ID)
	if err := colSession.Put(tx, s.ID, s); err != nil {
		return Session{}, err
	}
	return s, colSessionChat.Put(tx, chatID, s.ID)
}

// ErrNoWorkspace stops a bootstrap that would need an automatic main session.
var ErrNoWorkspace = errs.New(errs.Unavailable, "no usable default workspace")

// WorkspaceProblem says why automatic main sessions cannot be created, or "".
func (q *Queue) WorkspaceProblem() string {
	if q.cfg.DefaultWorkspace == "" {
		return "no default workspace is configured (lark.defaultWorkspace): new chats cannot get a main session automatically; bind them with /bind"
	}
	st, err := os.Stat(q.cfg.DefaultWorkspace)
	if err != nil || !st.IsDir() {
		return "the default workspace " + q.cfg.DefaultWorkspace + " is missing or not a directory: new chats cannot get a main session automatically"
	}
	return ""
}

// newChild creates the dedicated child of a Locus under parent.
func (q *Queue) newChild(tx *store.Tx, parent, locusID, entry string) (Child, error) {
	ch := Child{ID: newID("c", 12), ParentID: parent, LocusID: locusID, Entry: entry, Created: q.now()}
	return ch, colChild.Put(tx, ch.ID, ch)
}

// Child returns child session id.
func (q *Queue) Child(ctx context.Context, id string) (Child, error) {
	var ch Child
	err := q.st.View(ctx, func(tx *store.Tx) error {
		var err error
		ch, err = colChild.Get(tx, id)
		return err
	})
	return ch, err
}

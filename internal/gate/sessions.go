package gate

import (
	"context"
	"errors"
	"regexp"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// The sessions that have records, newest first: gate-session-recent/<rev time of the last
// run>/<session> → session, moved forward by each record (writeRecords), with the sessions' TTL
// (Service.sessionTTL).

var sessionRecentCol = store.NewCollection[string]("gate-session-recent")

// DefaultSessionPage and MaxSessionPage bound a sessions page.
const (
	DefaultSessionPage = 50
	MaxSessionPage     = 200
)

// SessionSummary is a session that has records, with its last run.
type SessionSummary struct {
	Session string `json:"session"`
	// Preset is the preset of its last run.
	Preset  string        `json:"preset"`
	LastRun RecordSummary `json:"lastRun"`
}

// SessionPage is one page of sessions, newest last run first.
type SessionPage struct {
	Sessions []SessionSummary `json:"sessions"`
	// Next is the cursor of the next page; empty on the last page.
	Next string `json:"next,omitempty"`
}

// noteSessionRun moves the session to the front of the recent list when the run at runKey,
// started at start, is its newest.
func noteSessionRun(tx *store.Tx, info *sessionInfo, session, runKey string, start time.Time, ttl time.Duration) (changed bool, err error) {
	if !info.LastAt.IsZero() && !start.After(info.LastAt) {
		return false, nil
	}
	if !info.LastAt.IsZero() {
		if err := sessionRecentCol.Delete(tx, store.ReverseSortableTime(info.LastAt)+"/"+session); err != nil && !errors.Is(err, store.ErrNotFound) {
			return false, err
		}
	}
	if err := sessionRecentCol.PutTTL(tx, store.ReverseSortableTime(start)+"/"+session, session, ttl); err != nil {
		return false, err
	}
	info.LastAt, info.LastRun = start.UTC(), runKey
	return true, nil
}

var sessionCursorRE = regexp.MustCompile(`^[0-9]{20}/[^/\x00]{1,128}$`)

// Sessions lists the sessions that have records, newest last run first, each with its last
// run. cursor is a page's Next; limit zero means DefaultSessionPage.
func (s *Service) Sessions(ctx context.Context, cursor string, limit int) (SessionPage, error) {
	if cursor != "" && !sessionCursorRE.MatchString(cursor) {
		return SessionPage{}, errs.New(errs.Invalid, "the cursor is not one this server gave out")
	}
	switch {
	case limit == 0:
		limit = DefaultSessionPage
	case limit < 0 || limit > MaxSessionPage:
		return SessionPage{}, errs.New(errs.Invalid, "the limit must be 1 to %d", MaxSessionPage)
	}
	s.rec.flush()
	page := SessionPage{Sessions: []SessionSummary{}}
	err := s.store.View(ctx, func(tx *store.Tx) error {
		opts := store.ScanOptions{Limit: limit + 1}
		if cursor != "" {
			opts.After = []byte(cursor)
		}
		es, err := sessionRecentCol.List(tx, "", opts)
		if err != nil {
			return err
		}
		for i, e := range es {
			if i == limit {
				page.Next = es[i-1].ID
				break
			}
			info, err := sessionCol.Get(tx, e.Value)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			sum := SessionSummary{Session: e.Value, Preset: info.Preset}
			rec, err := getRecord(tx, info.LastRun)
			switch {
			case errors.Is(err, store.ErrNotFound):
				continue // expired with its records
			case err != nil:
				return err
			}
			sum.LastRun = rec.summary()
			page.Sessions = append(page.Sessions, sum)
		}
		return nil
	})
	if err != nil {
		return SessionPage{}, errs.Wrap(errs.Internal, err, "cannot list the sessions")
	}
	return page, nil
}

package proxy

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/store"
)

// The sessions whose steps the proxy carried, so the hooks adapter can leave their hints to the
// proxy (hints.delivery: auto). They are kept in memory and in the store (proxy-session/<id>,
// with a TTL), so a restart or another replica still knows them; the store is written at most
// once per session per seenRefresh, after the request (never on its path).
var seenColl = store.NewCollection[seenRecord]("proxy-session")

type seenRecord struct {
	LastSeen time.Time `json:"lastSeen"`
}

const (
	// seenTTL is how long a session is remembered after its last step through the proxy.
	seenTTL = 30 * 24 * time.Hour
	// seenRefresh is how often a session's record is rewritten while it is active.
	seenRefresh = time.Hour
	// seenMemoryCap bounds the in-memory set; past it the oldest half is dropped (the store
	// still answers for them).
	seenMemoryCap = 100_000
)

type seenSessions struct {
	st  *store.Store
	log *slog.Logger

	mu sync.Mutex
	m  map[string]time.Time // session → when its record was last written (or looked up)
}

func newSeen(st *store.Store, log *slog.Logger) *seenSessions {
	return &seenSessions{st: st, log: log, m: map[string]time.Time{}}
}

// mark records that the proxy carried a step of session.
func (s *seenSessions) mark(session string) {
	now := time.Now()
	s.mu.Lock()
	last, ok := s.m[session]
	if ok && now.Sub(last) < seenRefresh {
		s.mu.Unlock()
		return
	}
	if len(s.m) >= seenMemoryCap {
		s.prune()
	}
	s.m[session] = now
	s.mu.Unlock()
	if s.st == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := s.st.Update(ctx, func(tx *store.Tx) error {
			return seenColl.PutTTL(tx, session, seenRecord{LastSeen: now.UTC()}, seenTTL)
		})
		if err != nil {
			s.log.Warn("proxy: remembering a session failed", "session", session, "err", err)
		}
	}()
}

// has reports whether session was marked (here, or in the store by any replica).
func (s *seenSessions) has(ctx context.Context, session string) bool {
	if session == "" {
		return false
	}
	s.mu.Lock()
	_, ok := s.m[session]
	s.mu.Unlock()
	if ok || s.st == nil {
		return ok
	}
	found := false
	err := s.st.View(ctx, func(tx *store.Tx) error {
		var err error
		found, err = seenColl.Has(tx, session)
		return err
	})
	if err != nil {
		s.log.Warn("proxy: reading the carried sessions failed", "session", session, "err", err)
		return false
	}
	if found {
		s.mu.Lock()
		if _, ok := s.m[session]; !ok {
			// Not written by this process: the next mark rewrites the record.
			s.m[session] = time.Time{}
		}
		s.mu.Unlock()
	}
	return found
}

// prune drops the older half of the in-memory set; the caller holds mu.
func (s *seenSessions) prune() {
	var ts []time.Time
	for _, t := range s.m {
		ts = append(ts, t)
	}
	// The median by selection is not worth it here: sort a copy.
	sortTimes(ts)
	cut := ts[len(ts)/2]
	for k, t := range s.m {
		if t.Before(cut) {
			delete(s.m, k)
		}
	}
}

func sortTimes(ts []time.Time) {
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
}

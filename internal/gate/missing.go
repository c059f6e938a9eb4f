package gate

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/later"
	"github.com/pixie-dev/pixie/internal/store"
)

// The presets evaluations asked for that do not exist: a hook pointed at a misspelt preset, or
// hooks that name none while there is no default preset, run no gate at all. The hook's answer
// says so to the user; this list lets Studio, `pixie gate list` and `pixie doctor` say so too.
//
// gate-missing/<preset> → MissingPreset, kept MissingPresetTTL after its last sighting, at most
// MaxMissingPresets names. An evaluation never writes: it counts the sighting in memory
// (missingTracker) and answers; the counts are written after the answer, at most once every
// missingWriteEvery however many evaluations arrive (a hook storm on a misspelt preset is one
// write per window, for every name at once). Reading the list writes what is counted first, so
// a client reads its own sightings. Saving a set that has the preset deletes its entry; the
// writer skips a name whose preset exists in its own transaction, so the two never race into a
// stale entry.

// MissingPresetTTL is how long a missing preset is listed after it was last asked for.
const MissingPresetTTL = 7 * 24 * time.Hour

// MaxMissingPresets bounds the names listed (and those counted in memory between writes): a
// caller sending random preset names cannot grow the store. When the list is full a new name
// replaces the one asked for least (then the one seen longest ago).
const MaxMissingPresets = 100

// missingWriteEvery is the shortest time between two background writes of the sightings.
const missingWriteEvery = 5 * time.Second

var missingCol = store.NewCollection[MissingPreset]("gate-missing")

// MissingPreset is a preset that evaluations (hooks) asked for and that does not exist.
type MissingPreset struct {
	Name string `json:"name"`
	// Count is how many evaluations asked for it (within the list's TTL).
	Count     int64     `json:"count"`
	FirstSeen time.Time `json:"firstSeen"`
	LastSeen  time.Time `json:"lastSeen"`
	// LastSession, LastPoint and LastHost describe the last evaluation that asked for it.
	LastSession string `json:"lastSession"`
	LastPoint   string `json:"lastPoint"`
	LastHost    string `json:"lastHost,omitempty"`
}

// missingTracker counts sightings in memory and writes them in the background.
type missingTracker struct {
	st    *store.Store
	log   *slog.Logger
	now   func() time.Time
	ttl   time.Duration
	every time.Duration // missingWriteEvery; tests shorten or lengthen it

	wmu sync.Mutex // held by a write, so a flush waits for a write under way

	mu        sync.Mutex
	pending   map[string]MissingPreset // sightings since the last write (Count: how many)
	lastWrite time.Time
	scheduled bool
	writes    int // store transactions written (tests)
}

func newMissingTracker(st *store.Store, log *slog.Logger, now func() time.Time) *missingTracker {
	return &missingTracker{st: st, log: log, now: now, ttl: MissingPresetTTL, every: missingWriteEvery,
		pending: map[string]MissingPreset{}}
}

// note counts one evaluation that asked for a preset that does not exist. It takes a lock and
// updates a map; the write starts after the answer (after, as the recorder's).
func (m *missingTracker) note(after *later.Queue, req *EvalRequest) {
	name := req.Session.Preset
	if !nameRE.MatchString(name) {
		return // not a name a preset can have (hooks refuse such names before they get here)
	}
	now := m.now().UTC()
	m.mu.Lock()
	p, ok := m.pending[name]
	if !ok {
		if len(m.pending) >= MaxMissingPresets {
			m.mu.Unlock()
			return // bounded until the next write empties the map
		}
		p = MissingPreset{Name: name, FirstSeen: now}
	}
	p.Count++
	p.LastSeen, p.LastSession, p.LastPoint, p.LastHost = now, req.Session.ID, req.Point, req.Host
	m.pending[name] = p
	start := !m.scheduled
	m.mu.Unlock()
	if start {
		after.Do(m.schedule)
	}
}

// schedule arms the background write: recordDelay from now, or missingWriteEvery after the
// last write when that is later.
func (m *missingTracker) schedule() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.scheduled || len(m.pending) == 0 {
		return
	}
	m.scheduled = true
	wait := max(recordDelay, time.Until(m.lastWrite.Add(m.every)))
	time.AfterFunc(wait, m.run)
}

func (m *missingTracker) run() {
	m.wmu.Lock()
	m.write()
	m.wmu.Unlock()
	m.mu.Lock()
	m.scheduled = false
	m.mu.Unlock()
	m.schedule() // what arrived during the write
}

// flush writes what is counted, at once (before a read).
func (m *missingTracker) flush() {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	m.write()
}

// write merges the pending sightings into the store. The caller holds wmu.
func (m *missingTracker) write() {
	m.mu.Lock()
	batch := m.pending
	if len(batch) == 0 {
		m.mu.Unlock()
		return
	}
	m.pending = map[string]MissingPreset{}
	m.lastWrite = time.Now()
	m.mu.Unlock()
	now := m.now()
	err := m.st.Update(context.Background(), func(tx *store.Tx) error { return m.merge(tx, batch, now) })
	if err != nil {
		m.log.Error("the missing presets could not be written", "err", err)
	}
	m.mu.Lock()
	m.writes++
	m.mu.Unlock()
}

// merge adds batch to the stored list (it may run again when the transaction conflicts: it
// does not change batch).
func (m *missingTracker) merge(tx *store.Tx, batch map[string]MissingPreset, now time.Time) error {
	es, err := missingCol.List(tx, "", store.ScanOptions{})
	if err != nil {
		return err
	}
	stored := make(map[string]MissingPreset, len(es))
	for _, e := range es {
		if m.live(e.Value, now) {
			stored[e.ID] = e.Value
		} else if err := missingCol.Delete(tx, e.ID); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(batch))
	for n := range batch {
		names = append(names, n)
	}
	// The names asked for most first, so that a full list keeps them.
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(batch[b].Count, batch[a].Count), cmp.Compare(a, b))
	})
	for _, n := range names {
		b := batch[n]
		exists, err := presetsCol.Has(tx, n)
		if err != nil {
			return err
		}
		if exists {
			continue // created since it was asked for
		}
		cur, ok := stored[n]
		if ok {
			cur.Count += b.Count
			cur.LastSeen, cur.LastSession, cur.LastPoint, cur.LastHost = b.LastSeen, b.LastSession, b.LastPoint, b.LastHost
		} else {
			if len(stored) >= MaxMissingPresets {
				victim := leastAsked(stored)
				if err := missingCol.Delete(tx, victim); err != nil {
					return err
				}
				delete(stored, victim)
			}
			cur = b
		}
		stored[n] = cur
		if err := missingCol.PutTTL(tx, n, cur, m.ttl); err != nil {
			return err
		}
	}
	return nil
}

// live reports whether an entry is within its TTL (the store forgets it at about the same time;
// the clock decides here, so that the edge does not depend on when the store sweeps).
func (m *missingTracker) live(p MissingPreset, now time.Time) bool {
	return now.Before(p.LastSeen.Add(m.ttl))
}

// leastAsked is the entry with the lowest count, the one seen longest ago among equals.
func leastAsked(stored map[string]MissingPreset) string {
	var victim string
	var v MissingPreset
	for n, p := range stored {
		if victim == "" || p.Count < v.Count || (p.Count == v.Count && (p.LastSeen.Before(v.LastSeen) || (p.LastSeen.Equal(v.LastSeen) && n < victim))) {
			victim, v = n, p
		}
	}
	return victim
}

// MissingPresets lists the presets that evaluations asked for within MissingPresetTTL and that
// do not exist, most recently asked for first. It writes the sightings counted so far first.
func (s *Service) MissingPresets(ctx context.Context) ([]MissingPreset, error) {
	s.missing.flush()
	sn, err := s.loadSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	out := []MissingPreset{}
	err = s.store.View(ctx, func(tx *store.Tx) error {
		return missingCol.Each(tx, "", store.ScanOptions{}, func(name string, p MissingPreset) error {
			if _, exists := sn.active[name]; !exists && s.missing.live(p, now) {
				out = append(out, p)
			}
			return nil
		})
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, errs.Wrap(errs.Internal, err, "cannot list the missing presets")
	}
	slices.SortFunc(out, func(a, b MissingPreset) int {
		return cmp.Or(b.LastSeen.Compare(a.LastSeen), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}

// forgetMissing deletes the entries of the presets a save writes.
func forgetMissing(tx *store.Tx, presets []Preset) error {
	for _, p := range presets {
		if err := missingCol.Delete(tx, p.Name); err != nil {
			return err
		}
	}
	return nil
}

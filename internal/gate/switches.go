package gate

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// sessionSwitch is a gate switched off for one session.
type sessionSwitch struct {
	Off bool      `json:"off"`
	At  time.Time `json:"at"`
}

// sessionInfo remembers a session's preset (from its evaluations).
type sessionInfo struct {
	Preset string `json:"preset"`
	// LastRun is the record key of its newest run, started at LastAt (the sessions list).
	LastRun string    `json:"lastRun,omitempty"`
	LastAt  time.Time `json:"lastAt,omitempty"`
}

// SessionGate is a gate that applies to a session, with its per-session switch.
type SessionGate struct {
	Gate        string `json:"gate"`
	Point       string `json:"point"`
	Description string `json:"description,omitempty"`
	// On is false when the gate is switched off for this session.
	On bool `json:"on"`
}

// SessionGates lists the gates that apply to a session's preset.
type SessionGates struct {
	Session string        `json:"session"`
	Preset  string        `json:"preset"`
	Gates   []SessionGate `json:"gates"`
}

func switchKey(session, gate string) string { return session + "/" + gate }

// switchedOff reports whether gate is switched off for session, from the switch cache when it
// knows, else from the store.
func (s *Service) switchedOff(ctx context.Context, session, gate string) (bool, error) {
	key := switchKey(session, gate)
	off, known, gen := s.switches.get(key, s.cfg.Now())
	if known {
		return off, nil
	}
	var sw sessionSwitch
	err := s.store.View(ctx, func(tx *store.Tx) error {
		var err error
		sw, err = switchCol.Get(tx, key)
		return err
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return false, errs.Wrap(errs.Internal, err, "cannot read the session's gate switches")
	}
	s.switches.put(key, sw, s.cfg.RecordTTL, gen)
	return sw.Off, nil
}

// switchCache remembers what switchedOff read, so that an evaluation does not read the store
// for a switch that has not changed (a Badger read is tens of µs on a gate's path). The
// Service is the only writer of switches: SetSessionSwitch forgets the key after its write,
// and the generation keeps a read that raced with a write from caching what it read before
// it. An off switch is remembered until its TTL in the store ends. The zero value is ready.
// Over a shared store other replicas write switches too; their writes notify, and this cache
// forgets the key when it hears it (shared.go).
type switchCache struct {
	mu  sync.Mutex
	gen uint64
	m   map[string]switchEntry
}

type switchEntry struct {
	off   bool
	until time.Time // for an off switch: when the store forgets it
}

// maxSwitchCache bounds the cache; it is emptied when full.
const maxSwitchCache = 4096

// get returns the cached answer for key, whether there is one, and the generation to pass to
// put after reading the store.
func (c *switchCache) get(key string, now time.Time) (off, known bool, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if ok && e.off && !now.Before(e.until) {
		ok = false
	}
	return e.off, ok, c.gen
}

// put remembers what the store holds for key, unless a write happened since get.
func (c *switchCache) put(key string, sw sessionSwitch, ttl time.Duration, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if c.m == nil || len(c.m) >= maxSwitchCache {
		c.m = make(map[string]switchEntry)
	}
	e := switchEntry{off: sw.Off}
	if sw.Off {
		e.until = sw.At.Add(ttl)
	}
	c.m[key] = e
}

// forgetAll drops every entry (another replica's writes may have been missed).
func (c *switchCache) forgetAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.m)
}

// forget drops key after a write to it.
func (c *switchCache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	delete(c.m, key)
}

// SessionGates lists the gates that apply to the session's preset (switched on, attached to
// the preset and switched on there), each with its per-session switch. An empty preset means
// the preset the session last evaluated with.
func (s *Service) SessionGates(ctx context.Context, session, preset string) (SessionGates, error) {
	if err := checkSessionID(session); err != nil {
		return SessionGates{}, errs.New(errs.Invalid, "%s", err.Error())
	}
	sn, err := s.loadSnapshot(ctx)
	if err != nil {
		return SessionGates{}, err
	}
	out := SessionGates{Session: session, Preset: preset, Gates: []SessionGate{}}
	s.rec.flush() // the session's last preset is written with its records
	err = s.store.View(ctx, func(tx *store.Tx) error {
		if out.Preset == "" {
			info, err := sessionCol.Get(tx, session)
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			out.Preset = info.Preset
		}
		for _, name := range sn.applying[out.Preset] {
			g := sn.gates[name]
			sw, err := switchCol.Get(tx, switchKey(session, name))
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			out.Gates = append(out.Gates, SessionGate{Gate: name, Point: g.Point, Description: g.Description, On: !sw.Off})
		}
		return nil
	})
	if err != nil {
		return SessionGates{}, errs.Wrap(errs.Internal, err, "cannot read the session's gate switches")
	}
	return out, nil
}

// SetSessionSwitch switches a gate on or off for one session only. It takes effect from the
// session's next evaluation; definitions, attachments and other sessions do not change.
func (s *Service) SetSessionSwitch(ctx context.Context, session, gate string, on bool) error {
	if err := checkSessionID(session); err != nil {
		return errs.New(errs.Invalid, "%s", err.Error())
	}
	sn, err := s.loadSnapshot(ctx)
	if err != nil {
		return err
	}
	if _, ok := sn.gates[gate]; !ok {
		return errs.New(errs.NotFound, "no gate is named %q", gate)
	}
	// Forgotten before and after the write: an evaluation between the two reads the store,
	// and the generation keeps it from caching what it read there.
	s.switches.forget(switchKey(session, gate))
	defer s.switches.forget(switchKey(session, gate))
	err = s.store.Update(ctx, func(tx *store.Tx) error {
		if err := s.notify(tx, noteSwitch+switchKey(session, gate)); err != nil {
			return err
		}
		if on {
			return switchCol.Delete(tx, switchKey(session, gate))
		}
		return switchCol.PutTTL(tx, switchKey(session, gate), sessionSwitch{Off: true, At: s.cfg.Now().UTC()}, s.cfg.RecordTTL)
	})
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cannot save the session switch")
	}
	return nil
}

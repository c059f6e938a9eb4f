package gate

import (
	"strings"

	"github.com/pixie-dev/pixie/internal/store"
)

// Replicas. Over a store other processes share, the Service keeps three things in memory that
// other replicas change: the snapshot of the saved definitions (definition.go), the listing of
// the script folder (scripts.go) and the per-session switch cache (switches.go). Every write of
// one of them notifies topic in its transaction, and every replica forgets what it holds when
// it hears it (or when notifications may have been lost), reading the store again on next use.
// Over an embedded store nothing is sent: the Service is the only writer and updates its
// memory after its own commits.

// topic is the notification of gate changes; the payload says what changed.
const topic = "gates"

const (
	noteDefs    = "defs"
	noteScripts = "scripts"
	noteSwitch  = "switch " // + session/gate
)

// notify sends a change notification over a shared store.
func (s *Service) notify(tx *store.Tx, what string) error {
	if !s.store.Shared() {
		return nil
	}
	return tx.Notify(topic, what)
}

// heard forgets what another replica changed.
func (s *Service) heard(n store.Note) {
	switch {
	case n.Lost:
		s.forgetSnapshot()
		s.forgetListing()
		s.switches.forgetAll()
	case n.Payload == noteDefs:
		s.forgetSnapshot()
	case n.Payload == noteScripts:
		s.forgetListing()
	case strings.HasPrefix(n.Payload, noteSwitch):
		s.switches.forget(strings.TrimPrefix(n.Payload, noteSwitch))
	}
}

func (s *Service) forgetSnapshot() {
	s.mu.Lock()
	s.snap = nil
	s.snapGen++
	s.mu.Unlock()
}

func (s *Service) forgetListing() {
	s.mu.Lock()
	s.listing = nil
	s.mu.Unlock()
}

package model

import (
	"context"
	"sync/atomic"
)

// Swappable is a Model whose provider can be replaced while it is in use: the services that
// were handed the Swappable (the gate service, the decision engine, Pet, the Lark channel) see
// a new provider at their next call, without a restart. A call already running finishes on the
// provider it started with. The zero value is usable and has no model (calls fail with
// ErrNoModel). It is safe for concurrent use.
type Swappable struct {
	cur atomic.Pointer[holder]
}

// holder boxes the interface value so it can sit in an atomic.Pointer.
type holder struct{ m Model }

var _ Model = (*Swappable)(nil)

// NewSwappable returns a Swappable that starts with m (nil means no model).
func NewSwappable(m Model) *Swappable {
	s := &Swappable{}
	s.Set(m)
	return s
}

// Set replaces the provider atomically; nil means no model.
func (s *Swappable) Set(m Model) {
	if m == nil {
		m = noModel{}
	}
	s.cur.Store(&holder{m: m})
}

// Current returns the provider in use now (never nil).
func (s *Swappable) Current() Model {
	if h := s.cur.Load(); h != nil {
		return h.m
	}
	return noModel{}
}

// Complete answers with the current provider.
func (s *Swappable) Complete(ctx context.Context, req Request) (Response, error) {
	return s.Current().Complete(ctx, req)
}

// Info describes the current provider.
func (s *Swappable) Info() Info { return s.Current().Info() }

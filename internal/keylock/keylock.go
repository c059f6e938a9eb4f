// Package keylock owns per-key mutual exclusion that a waiter can give up on: one lock per
// key (a session, a locus, a scope), taken and released like a mutex, where a waiter whose
// context ends stops waiting. Lark's channel serialises a session's questions and a locus's
// side effects with it; Pet serialises the invocations of one scope.
package keylock

import (
	"context"
	"sync"
)

// Mutex is a set of mutexes by key. A key's lock exists only while it is held, so the set
// stays as small as what is in use. The zero value is ready to use; a Mutex must not be copied
// after first use.
type Mutex struct {
	mu   sync.Mutex
	held map[string]chan struct{} // closed when its key is released
}

// Lock waits for key's turn and returns the func that releases it (call it exactly once). It
// returns ctx.Err() when ctx ends first; the caller words that error for its users.
func (k *Mutex) Lock(ctx context.Context, key string) (unlock func(), err error) {
	for {
		k.mu.Lock()
		ch, busy := k.held[key]
		if !busy {
			if k.held == nil {
				k.held = map[string]chan struct{}{}
			}
			ch = make(chan struct{})
			k.held[key] = ch
			k.mu.Unlock()
			return func() {
				k.mu.Lock()
				delete(k.held, key)
				k.mu.Unlock()
				close(ch)
			}, nil
		}
		k.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

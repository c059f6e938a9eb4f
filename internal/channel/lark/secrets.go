package lark

import (
	"context"
	"sync"
)

// Secrets is where the binding's credentials live: the home's credentials file in production
// (cmd/pixie adapts internal/credentials to it). Get reports ok=false for a missing name.
// Values read from it are never returned by any route, recorded or logged.
type Secrets interface {
	Get(ctx context.Context, name string) (value string, ok bool, err error)
	Set(ctx context.Context, name, value string) error
	Delete(ctx context.Context, name string) error
}

// Names of the credentials the binding stores.
const (
	SecretAppID             = "lark.appId"
	SecretAppSecret         = "lark.appSecret"
	SecretVerificationToken = "lark.verificationToken"
	SecretEncryptKey        = "lark.encryptKey"
)

// MemorySecrets is a Secrets kept in memory (tests, or a process that must not write a file).
type MemorySecrets struct {
	mu sync.Mutex
	m  map[string]string
}

var _ Secrets = (*MemorySecrets)(nil)

// Get returns name's value.
func (s *MemorySecrets) Get(_ context.Context, name string) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[name]
	return v, ok, nil
}

// Set stores value under name.
func (s *MemorySecrets) Set(_ context.Context, name, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]string{}
	}
	s.m[name] = value
	return nil
}

// Delete removes name.
func (s *MemorySecrets) Delete(_ context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, name)
	return nil
}

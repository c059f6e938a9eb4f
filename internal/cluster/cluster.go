// Package cluster owns what Pixie replicas sharing one store know of each other: each
// replica's record (its instance id, the URL the others reach it at, when it started, when it
// last beat), liveness, and the admin token every replica accepts.
//
// Over an embedded store there is one process: New writes nothing, Self is the store's
// instance, and every other instance is dead. Over a shared store (PostgreSQL) each replica
// writes cluster-replica/<instance> with a TTL of three heartbeats and renews it every
// heartbeat; a replica that stops cleanly deletes it, one that is killed disappears when the
// TTL ends.
//
// # Admin token
//
// The admin token lives in the store (cluster-secret/admin-token) once a replica on a shared
// store has started: the first replica on an empty store inserts it (its home's token file if
// it has one, else a fresh random token), and every replica, the first included, writes it to
// its own home's token file (0600), so the CLI on each machine finds it. The UI cookie key is
// derived from the token (server.newCookieSigner), so every replica accepts every replica's
// cookies. Over an embedded store the token stays where it always was: the home's token file.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/store"
)

// Defaults of Options.
const (
	DefaultHeartbeat = 5 * time.Second
)

// Member is one replica's record.
type Member struct {
	Instance  string    `json:"instance"`
	URL       string    `json:"url"`
	StartedAt time.Time `json:"startedAt"`
	SeenAt    time.Time `json:"seenAt"`
}

var (
	members = store.NewCollection[Member]("cluster-replica")
	secrets = store.NewCollection[string]("cluster-secret")
)

// Config configures New. Store is required; the zero value of every other field works.
type Config struct {
	// Store is where the replicas record themselves (a store that is not shared has one
	// replica, this one, and nothing is recorded).
	Store *store.Store
	// URL is where the other replicas reach this one (SetURL may set it later).
	URL string
	// Heartbeat is how often the record is renewed; zero means 5s. The record lives three
	// heartbeats.
	Heartbeat time.Duration
	// Logger receives heartbeat failures; nil discards them.
	Logger *slog.Logger
}

// Node is this replica in its cluster. It is safe for concurrent use.
type Node struct {
	st    *store.Store
	opts  Config
	log   *slog.Logger
	start time.Time

	mu  sync.Mutex
	url string

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// New joins the cluster: it records this replica (over a shared store) and starts its
// heartbeat; Close leaves.
func New(ctx context.Context, opts Config) (*Node, error) {
	st := opts.Store
	if st == nil {
		return nil, errors.New("cluster: Config.Store is required")
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	n := &Node{st: st, opts: opts, log: log, start: time.Now().UTC(), url: opts.URL, stop: make(chan struct{})}
	if !st.Shared() {
		return n, nil
	}
	if err := n.beat(ctx); err != nil {
		return nil, fmt.Errorf("cluster: record this replica: %w", err)
	}
	n.wg.Add(1)
	go n.loop()
	return n, nil
}

// Self is this replica's instance id.
func (n *Node) Self() string { return n.st.Instance() }

// Shared reports whether other replicas may exist.
func (n *Node) Shared() bool { return n.st.Shared() }

// SetURL sets the URL the other replicas reach this one at and records it at once.
func (n *Node) SetURL(ctx context.Context, url string) error {
	n.mu.Lock()
	n.url = url
	n.mu.Unlock()
	if !n.st.Shared() {
		return nil
	}
	return n.beat(ctx)
}

func (n *Node) beat(ctx context.Context) error {
	n.mu.Lock()
	m := Member{Instance: n.Self(), URL: n.url, StartedAt: n.start, SeenAt: time.Now().UTC()}
	n.mu.Unlock()
	return n.st.Update(ctx, func(tx *store.Tx) error {
		return members.PutTTL(tx, m.Instance, m, 3*n.opts.Heartbeat)
	})
}

func (n *Node) loop() {
	defer n.wg.Done()
	t := time.NewTicker(n.opts.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), n.opts.Heartbeat)
		if err := n.beat(ctx); err != nil {
			n.log.Warn("cluster: heartbeat failed", "err", err)
		}
		cancel()
	}
}

// Close stops the heartbeat and removes this replica's record (within 2s, even when ctx is
// already done). It may be called more than once.
func (n *Node) Close(ctx context.Context) error {
	var err error
	n.once.Do(func() {
		close(n.stop)
		n.wg.Wait()
		if !n.st.Shared() {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		err = n.st.Update(ctx, func(tx *store.Tx) error { return members.Delete(tx, n.Self()) })
	})
	return err
}

// Members lists the live replicas, this one included, by instance id.
func (n *Node) Members(ctx context.Context) ([]Member, error) {
	if !n.st.Shared() {
		n.mu.Lock()
		defer n.mu.Unlock()
		return []Member{{Instance: n.Self(), URL: n.url, StartedAt: n.start, SeenAt: time.Now().UTC()}}, nil
	}
	var out []Member
	err := n.st.View(ctx, func(tx *store.Tx) error {
		es, err := members.List(tx, "", store.ScanOptions{})
		for _, e := range es {
			out = append(out, e.Value)
		}
		return err
	})
	return out, err
}

// Alive reports whether the replica with instance id is live (this one always is).
func (n *Node) Alive(ctx context.Context, id string) (bool, error) {
	if id == n.Self() {
		return true, nil
	}
	if !n.st.Shared() || id == "" {
		return false, nil
	}
	var ok bool
	err := n.st.View(ctx, func(tx *store.Tx) (err error) {
		ok, err = members.Has(tx, id)
		return err
	})
	return ok, err
}

// OthersAlive reports whether any replica other than this one is live.
func (n *Node) OthersAlive(ctx context.Context) (bool, error) {
	ms, err := n.Members(ctx)
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		if m.Instance != n.Self() {
			return true, nil
		}
	}
	return false, nil
}

// ErrNoReplica is returned by URL for an instance that is not live.
var ErrNoReplica = errors.New("cluster: no such live replica")

// URL returns the URL of the live replica id.
func (n *Node) URL(ctx context.Context, id string) (string, error) {
	if id == n.Self() {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.url, nil
	}
	if !n.st.Shared() {
		return "", ErrNoReplica
	}
	var m Member
	err := n.st.View(ctx, func(tx *store.Tx) (err error) {
		m, err = members.Get(tx, id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) || err == nil && m.URL == "" {
		return "", ErrNoReplica
	}
	return m.URL, err
}

// TokenFile is the admin token's file in a home.
const TokenFile = config.TokenFile

const adminTokenID = "admin-token"

// AdminToken returns the admin token and whether it was created now (to show it once). Over
// an embedded store it is the home's token file, created when missing. Over a shared store it
// is the store's, inserted by the first replica (from its token file if it has one), and
// written to home's token file when the file is missing or differs.
func AdminToken(ctx context.Context, st *store.Store, home string) (token string, fresh bool, err error) {
	local, err := readTokenFile(home)
	if err != nil {
		return "", false, err
	}
	if !st.Shared() {
		if local != "" {
			return local, false, nil
		}
		t := newToken()
		if err := writeTokenFile(home, t, true); err != nil {
			return "", false, err
		}
		return t, true, nil
	}
	candidate, created := local, false
	if candidate == "" {
		candidate = newToken()
	}
	err = st.Update(ctx, func(tx *store.Tx) error {
		cur, err := secrets.Get(tx, adminTokenID)
		switch {
		case err == nil:
			token, created = cur, false
			return nil
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		token, created = candidate, true
		return secrets.Put(tx, adminTokenID, candidate)
	})
	if err != nil {
		return "", false, fmt.Errorf("cluster: read the admin token from the store: %w", err)
	}
	if token != local {
		if err := writeTokenFile(home, token, false); err != nil {
			return "", false, err
		}
	}
	return token, created && local == "", nil
}

func readTokenFile(home string) (string, error) {
	p := filepath.Join(home, TokenFile)
	raw, err := os.ReadFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read token: %w", err)
	}
	t := strings.TrimSpace(string(raw))
	if len(t) < 32 {
		return "", fmt.Errorf("token file %s is too short; delete it to generate a new one", p)
	}
	if st, err := os.Stat(p); err == nil && st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("token file %s must not be readable by others (chmod 600)", p)
	}
	return t, nil
}

// writeTokenFile writes the token file 0600: exclusively when excl (a first start), else
// replacing it atomically.
func writeTokenFile(home, token string, excl bool) error {
	p := filepath.Join(home, TokenFile)
	if excl {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("write token: %w", err)
		}
		if _, err := f.WriteString(token + "\n"); err != nil {
			f.Close()
			return fmt.Errorf("write token: %w", err)
		}
		return f.Close()
	}
	f, err := os.CreateTemp(home, ".token-*.tmp")
	if err != nil {
		return fmt.Errorf("write token: %w", err)
	}
	tmp := f.Name()
	_, err = f.WriteString(token + "\n")
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write token: %w", err)
	}
	return nil
}

func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

package lark

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
	"github.com/pixie-dev/pixie/internal/channel/lark/locus"
	"github.com/pixie-dev/pixie/internal/channel/lark/spool"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// Channel is the Lark channel: the event webhook, the binding, the allowlist and pairing, and
// the Loci with their Deliveries. It is safe for concurrent use. One Channel serves one store;
// run one per process.
type Channel struct {
	st      *store.Store
	cfg     Config
	log     *slog.Logger
	met     *metrics
	started time.Time

	// binder holds the live binding (binding.go), pair the pending pairing code (pairing.go).
	binder *binder
	pair   *pairing

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{}
	inSeq  atomic.Uint64

	// q is the Loci with their Delivery queues, locks and run state (the locus sub-package).
	q *locus.Queue

	members larkapi.MemberCache

	// sh is the part for stores other replicas share (shared.go).
	sh sharedState

	// askWait wakes the ask_main_session call waiting for a question's answer (ask.go).
	askMu   sync.Mutex
	askWait map[string]chan struct{}
}

// New returns the channel over cfg.Store and starts its worker and deadline sweep. A missing or
// incomplete binding is not an error: the channel is then unavailable and Status says why.
func New(ctx context.Context, cfg Config) (*Channel, error) {
	st := cfg.Store
	if st == nil {
		return nil, errs.New(errs.Invalid, "lark: a store is required")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	secrets := cfg.Secrets
	if secrets == nil {
		secrets = &MemorySecrets{}
	}
	c := &Channel{
		st: st, cfg: cfg, log: cfg.Logger, met: newMetrics(cfg.Registerer),
		started: cfg.Now().UTC(),
		wake:    make(chan struct{}, 1),
		askWait: map[string]chan struct{}{},
	}
	c.binder = &binder{st: st, secrets: secrets, log: c.log, baseURL: cfg.BaseURL, timeout: cfg.HTTPTimeout}
	c.pair = &pairing{st: st, now: c.now}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.q = locus.New(st, locus.Config{
		MaxQueue: cfg.MaxQueue, InitialDeadline: cfg.InitialDeadline, MaxDeadline: cfg.MaxDeadline,
		HistoryTurns: cfg.HistoryTurns, MaxReplyChars: cfg.MaxReplyChars, Executor: cfg.Executor,
		DefaultWorkspace: cfg.DefaultWorkspace, SettleTTL: 10*cfg.HTTPTimeout + time.Minute,
		Topic: larkTopic, Now: cfg.Now, Logger: c.log,
	}, spool.New(cfg.SpoolDir, c.log, st, cfg.MaxDeadline+time.Hour))
	if err := c.binder.load(ctx); err != nil {
		return nil, err
	}
	if st.Shared() {
		// The leader resumes Deliveries when it takes the lease (shared.go).
		if err := c.startShared(ctx); err != nil {
			c.cancel()
			return nil, err
		}
	}
	c.wg.Add(1)
	go c.worker()
	if cfg.SweepInterval > 0 {
		c.wg.Add(1)
		go c.sweeper()
	}
	if !st.Shared() {
		c.recover(ctx)
	}
	c.kick()
	return c, nil
}

// Close stops the worker, the sweep and running built-in turns. Deliveries stay in the store
// and resume on the next start. It may be called more than once.
func (c *Channel) Close(context.Context) error {
	c.cancel()
	c.wg.Wait()
	return nil
}

// RegisterMetrics adds the channel's counters to reg (for a registry that exists only after
// the channel, such as the server's). A registry that already holds the counters is refused.
func (c *Channel) RegisterMetrics(reg prometheus.Registerer) error {
	return c.met.register(reg, false)
}

func (c *Channel) now() time.Time { return c.cfg.Now().UTC() }

// available returns the live binding when the channel can take events, with the reason when it
// cannot.
func (c *Channel) available() (*liveBinding, string) {
	if !c.cfg.Enabled {
		return nil, "the channel is turned off (lark.enabled is false): set lark.enabled: true in " + filepath.Join(c.cfg.Home, "pixie.yaml") + " (or PIXIE_LARK_ENABLED=true) and restart pixie serve"
	}
	b := c.binder.live()
	if b == nil {
		p := c.binder.why()
		if p == "" {
			p = "no Lark bot is bound: bind one with its app id, app secret, verification token and encrypt key"
		}
		return nil, p
	}
	return b, ""
}

// Status is the channel's state for the Channel and Diagnostics settings. It holds no secret.
type Status struct {
	Enabled   bool `json:"enabled"`
	Bound     bool `json:"bound"`
	Available bool `json:"available"`
	// Problem says why the channel is unavailable.
	Problem    string     `json:"problem,omitempty"`
	AppID      string     `json:"appId,omitempty"`
	BotOpenID  string     `json:"botOpenId,omitempty"`
	BotName    string     `json:"botName,omitempty"`
	VerifiedAt *time.Time `json:"verifiedAt,omitempty"`
	// Encrypted is true when an encrypt key is bound (events are encrypted and signed).
	Encrypted bool `json:"encrypted"`
	// Warnings name parts that are degraded without making the channel unavailable.
	Warnings         []string `json:"warnings,omitempty"`
	DefaultWorkspace string   `json:"defaultWorkspace,omitempty"`
	WorkspaceOK      bool     `json:"workspaceOk"`
	Executor         string   `json:"executor"`
	ModelConfigured  bool     `json:"modelConfigured"`
	SpoolDir         string   `json:"spoolDir,omitempty"`
	ImagesOK         bool     `json:"imagesOk"`
	// Agent is what the built-in executor's agent has here.
	Agent        AgentStatus `json:"agent"`
	Pairing      PairingInfo `json:"pairing"`
	Allowlisted  int         `json:"allowlisted"`
	OwnerOpenID  string      `json:"ownerOpenId,omitempty"`
	StartedAt    time.Time   `json:"startedAt"`
	Watermark    time.Time   `json:"watermark"`
	ReplayWindow string      `json:"replayWindow"`
	Drops        []DropCount `json:"drops"`
}

// AgentStatus is the built-in executor's agent as configured: its limits, its gates' preset,
// and whether the shell tool (shell tier) and ask_main_session are available.
type AgentStatus struct {
	MaxSteps   int    `json:"maxSteps"`
	MaxTokens  int    `json:"maxTokens"`
	Timeout    string `json:"timeout"`
	AskTimeout string `json:"askTimeout"`
	// Preset is the preset whose gates check the tool calls ("" when no gates are wired).
	Preset string `json:"preset,omitempty"`
	// Shell is true when shell-tier entries get the shell tool (read-only sandbox).
	Shell bool `json:"shell"`
	// AskMainSession is true when the child can ask its main session (registered sessions).
	AskMainSession bool `json:"askMainSession"`
}

// Status reports the channel's state.
func (c *Channel) Status(ctx context.Context) Status {
	s := Status{
		Enabled:          c.cfg.Enabled,
		DefaultWorkspace: c.cfg.DefaultWorkspace,
		Executor:         c.cfg.Executor,
		SpoolDir:         c.cfg.SpoolDir,
		StartedAt:        c.started,
		Watermark:        c.watermark(),
		ReplayWindow:     c.cfg.ReplayWindow.String(),
		Pairing:          c.pair.info(ctx),
		Drops:            c.met.dropCounts(),
		Agent: AgentStatus{MaxSteps: c.cfg.Agent.MaxSteps, MaxTokens: c.cfg.Agent.MaxTokens, Timeout: c.cfg.Agent.Timeout.String(),
			AskTimeout: c.cfg.Agent.AskTimeout.String(), Shell: c.cfg.Agent.Shell != nil, AskMainSession: c.cfg.Agent.Hints != nil},
	}
	if c.cfg.Agent.Gates != nil {
		s.Agent.Preset = c.cfg.Agent.Preset
	}
	if b := c.binder.live(); b != nil {
		s.Bound, s.AppID, s.BotOpenID, s.BotName, s.Encrypted = true, b.appID, b.botOpenID, b.botName, b.encryptKey != ""
		s.VerifiedAt = ptime(b.verifiedAt)
		if !s.Encrypted {
			s.Warnings = append(s.Warnings, "no encrypt key is bound: events arrive unencrypted and unsigned, and only the verification token authenticates them")
		}
	}
	if _, p := c.available(); p != "" {
		s.Problem = p
	} else {
		s.Available = true
	}
	if p := c.q.WorkspaceProblem(); p != "" {
		s.Warnings = append(s.Warnings, p)
	} else {
		s.WorkspaceOK = true
	}
	if c.cfg.Model != nil {
		s.ModelConfigured = c.cfg.Model.Info().Configured
	}
	if s.Executor == ExecutorBuiltin && !s.ModelConfigured {
		s.Warnings = append(s.Warnings, "the built-in executor has no Pixie model configured: its Deliveries fail until one is")
	}
	if p := c.q.Spool().Problem(); p != "" {
		s.Warnings = append(s.Warnings, "images are unavailable: "+p)
	} else {
		s.ImagesOK = true
	}
	_ = c.st.View(ctx, func(tx *store.Tx) error {
		return colAllow.Each(tx, "", store.ScanOptions{}, func(_ string, e AllowEntry) error {
			s.Allowlisted++
			if e.Owner {
				s.OwnerOpenID = e.OpenID
			}
			return nil
		})
	})
	return s
}

// watermark is the oldest message creation time accepted: the process start minus StartSkew.
func (c *Channel) watermark() time.Time { return c.started.Add(-c.cfg.StartSkew) }

// kick wakes the inbound worker.
func (c *Channel) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// modelConfigured reports whether the built-in executor has a model.
func (c *Channel) modelConfigured() bool {
	return c.cfg.Model != nil && c.cfg.Model.Info().Configured
}

// describeErr is err's client-safe message: a coded error's message, else its text.
func describeErr(err error) string {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return fmt.Sprintf("%v", err)
}

package lark

import (
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pixie-dev/pixie/internal/agent"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/runtime"
)

// Defaults of Config. The deadline values and the pairing lifetime are the spec's.
const (
	DefaultBaseURL         = "https://open.feishu.cn"
	DefaultReplayWindow    = 5 * time.Minute
	DefaultStartSkew       = 30 * time.Second
	DefaultDedupTTL        = 24 * time.Hour
	DefaultInitialDeadline = time.Hour
	DefaultMaxDeadline     = 24 * time.Hour
	DefaultSweepInterval   = 15 * time.Second
	DefaultMaxImageBytes   = 10 << 20
	DefaultMaxImages       = 4
	DefaultMaxQueue        = 50
	DefaultMaxTextChars    = 8000
	DefaultMaxReplyChars   = 20000
	DefaultHTTPTimeout     = 20 * time.Second
	DefaultHistoryTurns    = 10
	DefaultMaxAllowlist    = 500

	// The built-in executor's agent (Config.Agent).
	DefaultAgentMaxSteps   = 12
	DefaultAgentMaxTokens  = 100_000
	DefaultAgentTimeout    = 15 * time.Minute
	DefaultAgentAskTimeout = 10 * time.Minute

	// PairTTL is how long a pairing code lives (spec: five minutes).
	PairTTL = 5 * time.Minute
)

// Config configures a Channel. The zero value works (the channel is then off).
type Config struct {
	// Store holds the binding, the allowlist, the Loci and their Deliveries; required.
	Store *store.Store
	// Enabled turns the channel on; it also needs a verified binding.
	Enabled bool
	// BaseURL is Lark's open API base; empty means https://open.feishu.cn.
	BaseURL string
	// DefaultWorkspace is the directory automatically created main sessions belong to. Empty or
	// missing means no main session is created on demand (entries can still be bound with
	// /bind), and Status says why.
	DefaultWorkspace string
	// ReplayWindow is the accepted distance between an event's timestamp and now; zero means 5m.
	ReplayWindow time.Duration
	// StartSkew is how far before this process started a message may have been created and
	// still be accepted (the start-up watermark); zero means 30s.
	StartSkew time.Duration
	// DedupTTL is how long event and message ids are remembered; zero means 24h.
	DedupTTL time.Duration
	// Home is Pixie's home; the image spool is <Home>/spool/lark unless SpoolDir is set.
	Home string
	// SpoolDir overrides the image spool directory (it must be private: mode 0700).
	SpoolDir string
	// Executor is the default executor of new Loci: "builtin" (default) or "external".
	Executor string
	// InitialDeadline is a Delivery's deadline from its acceptance; zero means 1h.
	InitialDeadline time.Duration
	// MaxDeadline caps any deadline, from acceptance; zero means 24h.
	MaxDeadline time.Duration
	// SweepInterval is how often deadlines are checked; zero means 15s, negative disables the
	// background sweep (tests call the sweep themselves).
	SweepInterval time.Duration
	// MaxImageBytes caps one downloaded image; zero means 10 MiB.
	MaxImageBytes int64
	// MaxImages caps the images taken from one message; zero means 4.
	MaxImages int
	// MaxQueue caps the Deliveries waiting in one Locus (the current one not counted); zero
	// means 50.
	MaxQueue int
	// MaxTextChars caps a message's text, in characters; longer text is cut; zero means 8000.
	MaxTextChars int
	// MaxReplyChars caps a reply body, in characters; zero means 20000.
	MaxReplyChars int
	// MaxAllowlist caps the allowlist; zero means 500.
	MaxAllowlist int
	// HTTPTimeout bounds one call to Lark; zero means 20s.
	HTTPTimeout time.Duration
	// HistoryTurns is how many earlier question/answer pairs of its own the built-in child sees;
	// zero means 10.
	HistoryTurns int
	// Model is the Pixie model of the built-in executor; nil means none is configured.
	Model model.Model
	// Agent configures the built-in executor's agent: its limits, tools and gates.
	Agent AgentConfig
	// Secrets holds the binding's credentials; nil keeps them in memory only (tests).
	Secrets Secrets
	// Registerer receives the channel's metrics; nil registers them nowhere.
	Registerer prometheus.Registerer
	// Logger receives operational logs (never secrets or message text); nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// AgentConfig configures the agent the built-in executor runs for each Delivery (internal/agent):
// the child answers with list, read and search over its Locus's workspace, the shell under the
// read-only policy on a shell-tier entry, and ask_main_session. Every field's zero value works.
type AgentConfig struct {
	// MaxSteps caps the model turns of one Delivery's run; zero means 12.
	MaxSteps int
	// MaxTokens caps the tokens of one run (input and output of every model call, summed); zero
	// means 100000.
	MaxTokens int
	// Timeout bounds one run, within the Delivery's deadline; zero means 15m.
	Timeout time.Duration
	// AskTimeout bounds how long ask_main_session waits for the main session's answer (never
	// past the run's own time, less 30 s it keeps to reply); zero means 10m.
	AskTimeout time.Duration
	// ShellTimeout bounds one shell command; zero means agent.DefaultShellTimeout (60s).
	ShellTimeout time.Duration
	// Shell runs the shell tool's commands (the bash executor) on shell-tier entries, always
	// under the read-only sandbox policy; nil means no shell tool is offered.
	Shell runtime.Executor
	// Gates checks every tool call and its result (tool-before, tool-after) with the gates of
	// Preset, as any agent host's; nil means no gates.
	Gates agent.Gates
	// Preset is the preset whose gates apply; required with Gates.
	Preset string
	// Hidden are directories the file tools never show, even inside a workspace; empty means
	// Home (the Pixie home: the admin token, the credentials, the store).
	Hidden []string
	// Hints queues a question for the main session as a hint (internal/hint); nil means
	// ask_main_session is not offered.
	Hints HintSender
}

func (c Config) withDefaults() (Config, error) {
	if c.ReplayWindow < 0 || c.StartSkew < 0 || c.DedupTTL < 0 || c.InitialDeadline < 0 || c.MaxDeadline < 0 ||
		c.MaxImageBytes < 0 || c.MaxImages < 0 || c.MaxQueue < 0 || c.MaxTextChars < 0 || c.MaxReplyChars < 0 ||
		c.HTTPTimeout < 0 || c.HistoryTurns < 0 || c.MaxAllowlist < 0 {
		return c, errs.New(errs.Invalid, "lark: limits and durations must not be negative")
	}
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	if c.ReplayWindow == 0 {
		c.ReplayWindow = DefaultReplayWindow
	}
	if c.StartSkew == 0 {
		c.StartSkew = DefaultStartSkew
	}
	if c.DedupTTL == 0 {
		c.DedupTTL = DefaultDedupTTL
	}
	if c.InitialDeadline == 0 {
		c.InitialDeadline = DefaultInitialDeadline
	}
	if c.MaxDeadline == 0 {
		c.MaxDeadline = DefaultMaxDeadline
	}
	if c.InitialDeadline > c.MaxDeadline {
		return c, errs.New(errs.Invalid, "lark: the initial deadline (%s) is beyond the maximum (%s)", c.InitialDeadline, c.MaxDeadline)
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.MaxImageBytes == 0 {
		c.MaxImageBytes = DefaultMaxImageBytes
	}
	if c.MaxImages == 0 {
		c.MaxImages = DefaultMaxImages
	}
	if c.MaxQueue == 0 {
		c.MaxQueue = DefaultMaxQueue
	}
	if c.MaxTextChars == 0 {
		c.MaxTextChars = DefaultMaxTextChars
	}
	if c.MaxReplyChars == 0 {
		c.MaxReplyChars = DefaultMaxReplyChars
	}
	if c.HTTPTimeout == 0 {
		c.HTTPTimeout = DefaultHTTPTimeout
	}
	if c.MaxAllowlist == 0 {
		c.MaxAllowlist = DefaultMaxAllowlist
	}
	if c.HistoryTurns == 0 {
		c.HistoryTurns = DefaultHistoryTurns
	}
	a := &c.Agent
	if a.MaxSteps < 0 || a.MaxTokens < 0 || a.Timeout < 0 || a.AskTimeout < 0 || a.ShellTimeout < 0 {
		return c, errs.New(errs.Invalid, "lark: the agent's limits must not be negative")
	}
	if a.MaxSteps == 0 {
		a.MaxSteps = DefaultAgentMaxSteps
	}
	if a.MaxTokens == 0 {
		a.MaxTokens = DefaultAgentMaxTokens
	}
	if a.Timeout == 0 {
		a.Timeout = DefaultAgentTimeout
	}
	if a.AskTimeout == 0 {
		a.AskTimeout = min(DefaultAgentAskTimeout, a.Timeout)
	}
	if a.Timeout > c.MaxDeadline {
		return c, errs.New(errs.Invalid, "lark: the agent's time limit (%s) is beyond a Delivery's maximum deadline (%s)", a.Timeout, c.MaxDeadline)
	}
	if a.AskTimeout > a.Timeout {
		return c, errs.New(errs.Invalid, "lark: the agent's ask timeout (%s) is beyond its time limit (%s)", a.AskTimeout, a.Timeout)
	}
	if a.Gates != nil && a.Preset == "" {
		return c, errs.New(errs.Invalid, "lark: the agent's gates need a preset")
	}
	if len(a.Hidden) == 0 && c.Home != "" {
		a.Hidden = []string{c.Home}
	}
	switch c.Executor {
	case "":
		c.Executor = ExecutorBuiltin
	case ExecutorBuiltin, ExecutorExternal:
	default:
		return c, errs.New(errs.Invalid, "lark: unknown executor %q: use %q or %q", c.Executor, ExecutorBuiltin, ExecutorExternal)
	}
	if c.SpoolDir == "" && c.Home != "" {
		c.SpoolDir = filepath.Join(c.Home, "spool", "lark")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// Package config owns Pixie's settings: the shape of pixie.yaml, the PIXIE_* environment
// overrides, flag overrides, defaults, validation, and the masked view printed by
// `pixie config`. Precedence, lowest first: defaults, <home>/pixie.yaml, PIXIE_* environment
// variables, flags.
//
// Every setting has a YAML path (for example model.apiKey) and an environment variable made by
// upper-snake-casing that path with a PIXIE_ prefix (PIXIE_MODEL_API_KEY). An unknown key in the
// file or an invalid value anywhere stops start-up with a message naming the key.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	yaml "go.yaml.in/yaml/v3"

	"github.com/pixie-dev/pixie/internal/pixiehome"
	"github.com/pixie-dev/pixie/internal/redact"
	"github.com/pixie-dev/pixie/internal/yamlline"
)

// FileName is the configuration file inside the home.
const FileName = pixiehome.ConfigFile

// DefaultMemoryLimit is server.memoryLimit's default: a soft limit on the Go runtime's memory
// that keeps a busy server's garbage from piling up between collections (issue 32's soak:
// docs/bench.md, "The soak"); the live heap of a server with ten modules warm under load is
// about 150 MiB.
const DefaultMemoryLimit = 256 << 20

// minMemoryLimit is the smallest server.memoryLimit taken: below it the collector would run
// all the time.
const minMemoryLimit = 64 << 20

// TokenFile is the admin token's file inside the home (written 0600 by the server's first
// start; internal/cluster owns it).
const TokenFile = pixiehome.TokenFile

// Config holds every setting. Fields tagged secret:"true" are masked when shown; secret:"url"
// marks a URL whose password alone is masked.
type Config struct {
	// Home is the home directory (not a file setting: it is where the file lives).
	Home string `yaml:"-"`
	// Addr is the listen address.
	Addr string `yaml:"addr" doc:"listen address (host:port)"`
	// AllowedHosts are the Host names accepted; empty means localhost names plus the bind host.
	AllowedHosts []string `yaml:"allowedHosts" doc:"Host header names accepted (DNS-rebinding defence); empty = localhost + bind host"`
	// PublicURL is the URL scripts use to reach the helper; empty means http://<addr>.
	PublicURL string `yaml:"publicUrl" doc:"URL given to scripts as PIXIE_URL; empty = http://<addr>"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `yaml:"logLevel" doc:"debug, info, warn or error"`
	// LogFormat is text or json.
	LogFormat string `yaml:"logFormat" doc:"text or json"`

	Server ServerConfig `yaml:"server"`
	Store  StoreConfig  `yaml:"store"`
	Model  ModelConfig  `yaml:"model"`
	Judge  JudgeConfig  `yaml:"judge"`
	Gates  GatesConfig  `yaml:"gates"`
	// Records is the retention of gate run records.
	Records RecordsConfig `yaml:"records"`
	WASM    WASMConfig    `yaml:"wasm"`
	Hints   HintsConfig   `yaml:"hints"`
	Hooks   HooksConfig   `yaml:"hooks"`
	Proxy   ProxyConfig   `yaml:"proxy"`
	Pet     PetConfig     `yaml:"pet"`
	Lark    LarkConfig    `yaml:"lark"`
}

// ServerConfig is the HTTP server.
type ServerConfig struct {
	BodyLimit       int64         `yaml:"bodyLimit" doc:"request body cap in bytes"`
	ReadTimeout     time.Duration `yaml:"readTimeout" doc:"HTTP read timeout"`
	WriteTimeout    time.Duration `yaml:"writeTimeout" doc:"HTTP write timeout (SSE streams are exempt)"`
	IdleTimeout     time.Duration `yaml:"idleTimeout" doc:"keep-alive idle timeout"`
	ShutdownTimeout time.Duration `yaml:"shutdownTimeout" doc:"graceful shutdown budget"`
	CookieTTL       time.Duration `yaml:"cookieTtl" doc:"web UI login lifetime"`
	StoreGCInterval time.Duration `yaml:"storeGcInterval" doc:"Badger value-log GC interval"`
	Pprof           bool          `yaml:"pprof" doc:"serve Go's profiles at /debug/pprof/ (admin token only; docs/bench.md)"`
	MemoryLimit     int64         `yaml:"memoryLimit" doc:"soft limit in bytes on the Go runtime's memory (the garbage collector works harder near it; guests' memory and compiled code are outside it); GOMEMLIMIT wins when set; 0 = none"`
}

// StoreConfig is where Pixie keeps its state.
type StoreConfig struct {
	Driver   string         `yaml:"driver" doc:"badger (embedded, in <home>/data) or postgres (N replicas on one database: docs/scale.md)"`
	Postgres PostgresConfig `yaml:"postgres"`
}

// PostgresConfig is the PostgreSQL driver.
type PostgresConfig struct {
	URL              string        `yaml:"url" secret:"url" doc:"database URL, postgres://user:password@host:5432/db?sslmode=…; the password is masked everywhere"`
	MaxConns         int           `yaml:"maxConns" doc:"connection pool cap per replica (one more for notifications)"`
	StatementTimeout time.Duration `yaml:"statementTimeout" doc:"statement and idle-in-transaction timeout"`
	Poll             bool          `yaml:"poll" doc:"poll instead of LISTEN/NOTIFY (for compatible databases without it)"`
	PollInterval     time.Duration `yaml:"pollInterval" doc:"poll period when poll is on"`
	ReplicaURL       string        `yaml:"replicaUrl" doc:"URL the other replicas reach this one at (helper calls that land on another replica are forwarded here); empty = http://<addr>"`
}

// ModelConfig is the Pixie model.
type ModelConfig struct {
	Provider string        `yaml:"provider" doc:"openai (any OpenAI-compatible server) or anthropic; empty = no model"`
	BaseURL  string        `yaml:"baseUrl" doc:"endpoint override (vLLM, llama.cpp, Ollama, LM Studio)"`
	Model    string        `yaml:"model" doc:"model name"`
	APIKey   string        `yaml:"apiKey" secret:"true" doc:"API key; falls back to OPENAI_API_KEY / ANTHROPIC_API_KEY"`
	Timeout  time.Duration `yaml:"timeout" doc:"per-call timeout"`
}

// JudgeConfig is the decision engine.
type JudgeConfig struct {
	Engine       string        `yaml:"engine" doc:"llm or jev"`
	SystemPrompt string        `yaml:"systemPrompt" doc:"judge system prompt; empty = the built-in one"`
	Model        ModelConfig   `yaml:"model" doc:"judge model; empty provider = the Pixie model"`
	JevBaseURL   string        `yaml:"jevBaseUrl" doc:"TypeSafe Jev API base URL"`
	JevModel     string        `yaml:"jevModel" doc:"Jev model (jev-latest, or a pinned version)"`
	JevTimeout   time.Duration `yaml:"jevTimeout" doc:"Jev call timeout"`
}

// GatesConfig is Pixie Gate.
type GatesConfig struct {
	ScriptDir      string        `yaml:"scriptDir" doc:"script folder (absolute or ~/…); empty = <home>/commands"`
	DefaultTimeout time.Duration `yaml:"defaultTimeout" doc:"gate time limit when a gate sets none"`
}

// RecordsConfig is the retention of gate run records (docs/gates.md, "Run records"): a sweep
// deletes the oldest records first, those older than MaxAge, then more until they take at most
// MaxBytes.
type RecordsConfig struct {
	MaxBytes int64         `yaml:"maxBytes" doc:"most bytes the gate run records take (the oldest are deleted first); 0 = no bound"`
	MaxAge   time.Duration `yaml:"maxAge" doc:"longest a gate run record is kept after its run (e.g. 168h); 0 = no bound"`
}

// WASMConfig is the WASM runtime.
type WASMConfig struct {
	MaxModuleSize int64 `yaml:"maxModuleSize" doc:"module upload cap in bytes"`
	MemoryPages   int   `yaml:"memoryPages" doc:"guest memory cap in 64 KiB pages"`
	MaxInput      int   `yaml:"maxInput" doc:"guest input cap in bytes"`
	MaxOutput     int   `yaml:"maxOutput" doc:"guest output cap in bytes"`
	PoolSize      int   `yaml:"poolSize" doc:"pre-initialised instances kept per module"`
	MaxHostCalls  int   `yaml:"maxHostCalls" doc:"host calls per run"`
	// Admission control (docs/runtime.md).
	MaxConcurrent int           `yaml:"maxConcurrent" doc:"guest runs executing at once; 0 = the number of CPUs"`
	MaxQueued     int           `yaml:"maxQueued" doc:"guest runs waiting for a slot; past it a run fails at once"`
	QueueTimeout  time.Duration `yaml:"queueTimeout" doc:"longest wait for a slot before a run fails"`
	MemoryBudget  int64         `yaml:"memoryBudget" doc:"guest linear memory of every instance, pool and snapshot together, in bytes; past it a run fails at once"`
}

// HintsConfig is the hint queue.
type HintsConfig struct {
	Enabled              bool          `yaml:"enabled" doc:"turn hints on; off removes the hint routes, the MCP hint tools and the event stream, and neither the proxy nor the hooks deliver hints"`
	MaxPerStep           int           `yaml:"maxPerStep" doc:"hints delivered per step"`
	MaxContentChars      int           `yaml:"maxContentChars" doc:"hint length cap in code points"`
	MaxPendingPerSession int           `yaml:"maxPendingPerSession" doc:"pending hints per session before the oldest is dropped"`
	KeepConsumed         int           `yaml:"keepConsumed" doc:"consumed hints kept for the snapshot"`
	Heartbeat            time.Duration `yaml:"heartbeat" doc:"SSE ping interval"`
	Lease                time.Duration `yaml:"lease" doc:"time a take may stay unconfirmed before its hints return"`
	Locale               string        `yaml:"locale" doc:"injected message language: en or zh"`
	Delivery             string        `yaml:"delivery" doc:"who delivers hints: auto (the model-API proxy for sessions it carries, hooks for the others), proxy (never hooks) or hooks (the proxy only forwards)"`
}

// HooksConfig is the agent-host adapters.
type HooksConfig struct {
	DefaultPreset string        `yaml:"defaultPreset" doc:"preset when a hook names none"`
	FailOpen      bool          `yaml:"failOpen" doc:"command adapter: allow when the server is unreachable"`
	Timeout       time.Duration `yaml:"timeout" doc:"command adapter: server call timeout"`
	SkillDir      string        `yaml:"skillDir" doc:"where pixie init installs the agent skill; empty = .claude/skills of the project"`
}

// ProxyConfig is the model-API side channel (/v1/proxy/anthropic, /v1/proxy/openai).
type ProxyConfig struct {
	AnthropicURL string `yaml:"anthropicUrl" doc:"upstream of /v1/proxy/anthropic (any Anthropic Messages API)"`
	OpenAIURL    string `yaml:"openaiUrl" doc:"upstream of /v1/proxy/openai (any OpenAI Responses / Chat Completions API)"`
	InjectLimit  int64  `yaml:"injectLimit" doc:"largest request body read to inject hints into, in bytes; larger bodies are forwarded without hints"`
}

// PetConfig is Pet.
type PetConfig struct {
	Workspace        string        `yaml:"workspace" doc:"Pet workspace; empty = <home>/pet/workspace"`
	MaxSkillFiles    int           `yaml:"maxSkillFiles" doc:"files per imported Skill"`
	MaxSkillFileSize int64         `yaml:"maxSkillFileSize" doc:"bytes per Skill file"`
	MaxSkillSize     int64         `yaml:"maxSkillSize" doc:"bytes per Skill in total"`
	RunTimeout       time.Duration `yaml:"runTimeout" doc:"time limit of one Run (the executor, its model and helper calls together; an external CLI is killed with its whole process tree)"`
	// Agent is the built-in agent instruction Skills run on, and the gates Pet's tool calls pass.
	Agent  PetAgentConfig `yaml:"agent"`
	Claude PetCLIConfig   `yaml:"claude" doc:"Claude Code, the external executor claude"`
	Codex  PetCLIConfig   `yaml:"codex" doc:"Codex, the external executor codex"`
}

// PetAgentConfig is the built-in agent of Pet's instruction Skills, and the gates Pet's own tool
// calls pass (docs/pet.md).
type PetAgentConfig struct {
	MaxSteps     int           `yaml:"maxSteps" doc:"model turns per instruction Skill run"`
	MaxTokens    int           `yaml:"maxTokens" doc:"tokens per instruction Skill run (input and output of every model turn, summed)"`
	ShellTimeout time.Duration `yaml:"shellTimeout" doc:"time limit of one shell command of the agent (within the run's)"`
	Preset       string        `yaml:"preset" doc:"preset whose gates Pet's own tool calls pass (the built-in agent's, and the external CLIs' through the hooks); empty = hooks.defaultPreset; no such preset = no gates"`
}

// PetCLIConfig is one external executor's CLI (docs/pet.md, "External executors").
type PetCLIConfig struct {
	Command string `yaml:"command" doc:"the CLI: a path, or a name on PATH; empty = claude / codex on PATH"`
	BaseURL string `yaml:"baseUrl" doc:"the model API the CLI talks to (Claude Code: an Anthropic Messages API, no /v1; Codex: an OpenAI Responses API, with /v1); empty = the CLI's default"`
	APIKey  string `yaml:"apiKey" secret:"true" doc:"the key the CLI sends; empty = the CLI's own login (its login file is linked into the Run's private configuration)"`
	Model   string `yaml:"model" doc:"the model the CLI asks for; empty = the CLI's default"`
}

// LarkConfig is the Lark channel (credentials live in the credentials file, not here).
type LarkConfig struct {
	Enabled          bool            `yaml:"enabled" doc:"turn the channel on (it also needs a binding)"`
	BaseURL          string          `yaml:"baseUrl" doc:"Lark open API base URL"`
	DefaultWorkspace string          `yaml:"defaultWorkspace" doc:"workspace for automatically created main sessions"`
	ReplayWindow     time.Duration   `yaml:"replayWindow" doc:"accepted age of an event's timestamp"`
	Agent            LarkAgentConfig `yaml:"agent"`
}

// LarkAgentConfig is the built-in Lark executor's agent: the child answers a Delivery with tools
// over its Locus's workspace (docs/lark.md, "The built-in executor").
type LarkAgentConfig struct {
	MaxSteps   int           `yaml:"maxSteps" doc:"model turns per Delivery"`
	MaxTokens  int           `yaml:"maxTokens" doc:"tokens per Delivery (input and output of every model call)"`
	Timeout    time.Duration `yaml:"timeout" doc:"time limit of one Delivery's run (never past its deadline)"`
	AskTimeout time.Duration `yaml:"askTimeout" doc:"how long ask_main_session waits for the main session's answer"`
	Preset     string        `yaml:"preset" doc:"preset whose gates check the child's tool calls; empty = hooks.defaultPreset"`
}

// Defaults returns the built-in settings for home.
func Defaults(home string) Config {
	return Config{
		Home:      home,
		Addr:      "127.0.0.1:7777",
		LogLevel:  "info",
		LogFormat: "text",
		Server: ServerConfig{
			BodyLimit: 1 << 20, ReadTimeout: 30 * time.Second, WriteTimeout: 120 * time.Second,
			IdleTimeout: 120 * time.Second, ShutdownTimeout: 10 * time.Second, CookieTTL: 12 * time.Hour,
			StoreGCInterval: 5 * time.Minute, MemoryLimit: DefaultMemoryLimit,
		},
		Store: StoreConfig{Driver: "badger", Postgres: PostgresConfig{MaxConns: 10,
			StatementTimeout: 30 * time.Second, PollInterval: time.Second}},
		Model: ModelConfig{Timeout: 60 * time.Second},
		Judge: JudgeConfig{Engine: "llm", JevModel: "jev-latest", JevTimeout: 30 * time.Second},
		Gates: GatesConfig{DefaultTimeout: 60 * time.Second},
		// 256 MiB is about 750,000 decisions of a WASM rule (about 350 bytes each).
		Records: RecordsConfig{MaxBytes: 256 << 20, MaxAge: 7 * 24 * time.Hour},
		WASM: WASMConfig{MaxModuleSize: 16 << 20, MemoryPages: 512, MaxInput: 1 << 20,
			MaxOutput: 256 << 10, PoolSize: 2, MaxHostCalls: 200, MaxQueued: 64, QueueTimeout: time.Second, MemoryBudget: 1 << 30},
		Hints: HintsConfig{Enabled: true, MaxPerStep: 20, MaxContentChars: 2000, MaxPendingPerSession: 20,
			KeepConsumed: 20, Heartbeat: 25 * time.Second, Lease: 2 * time.Minute, Locale: "en", Delivery: "auto"},
		Proxy: ProxyConfig{AnthropicURL: "https://api.anthropic.com", OpenAIURL: "https://api.openai.com", InjectLimit: 32 << 20},
		Hooks: HooksConfig{DefaultPreset: "default", Timeout: 90 * time.Second}, // above the 60 s default gate time limit
		Pet: PetConfig{MaxSkillFiles: 200, MaxSkillFileSize: 1 << 20, MaxSkillSize: 8 << 20, RunTimeout: 60 * time.Second,
			Agent: PetAgentConfig{MaxSteps: 20, MaxTokens: 200_000, ShellTimeout: 60 * time.Second}},
		Lark: LarkConfig{BaseURL: "https://open.feishu.cn", ReplayWindow: 5 * time.Minute,
			Agent: LarkAgentConfig{MaxSteps: 12, MaxTokens: 100_000, Timeout: 15 * time.Minute, AskTimeout: 10 * time.Minute}},
	}
}

// Error names the offending key.
type Error struct {
	Key    string // YAML path, e.g. model.timeout
	Source string // "pixie.yaml", an environment variable name, or a flag
	Msg    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("config: %s (%s): %s", e.Key, e.Source, e.Msg)
}

// ResolveHome picks the home: flag, else $PIXIE_HOME, else ~/.pixie (internal/pixiehome).
func ResolveHome(flagHome string, getenv func(string) string) (string, error) {
	return pixiehome.Resolve(flagHome, getenv)
}

// ExpandPath expands a leading ~/ to the user's home.
func ExpandPath(p string) (string, error) { return pixiehome.ExpandPath(p) }

// Load builds the effective configuration for home: defaults, then the file (if present), then
// the environment, then flags (path=value pairs, e.g. {"addr": "127.0.0.1:9000"}).
func Load(home string, getenv func(string) string, environ []string, flags map[string]string) (Config, error) {
	c := Defaults(home)
	raw, err := os.ReadFile(filepath.Join(home, FileName))
	switch {
	case err == nil:
		if err := decodeFile(raw, &c); err != nil {
			return c, err
		}
	case !errors.Is(err, os.ErrNotExist):
		return c, fmt.Errorf("config: read %s: %w", FileName, err)
	}
	fields := leaves(reflect.ValueOf(&c).Elem(), "")
	for _, f := range fields {
		if v, ok := lookupEnv(environ, f.env); ok {
			if err := setString(f.v, v); err != nil {
				return c, &Error{Key: f.path, Source: f.env, Msg: err.Error()}
			}
		}
	}
	keys := make([]string, 0, len(flags))
	for k := range flags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f, ok := findField(fields, k)
		if !ok {
			return c, &Error{Key: k, Source: "flag", Msg: "unknown key"}
		}
		if err := setString(f.v, flags[k]); err != nil {
			return c, &Error{Key: k, Source: "flag", Msg: err.Error()}
		}
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
}

func lookupEnv(environ []string, name string) (string, bool) {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

var unknownField = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`line (\d+): field (\S+) not found in type (\S+)`)
})

// decodeFile decodes YAML strictly and turns unknown fields into an Error naming the full key.
func decodeFile(raw []byte, c *Config) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		if m := unknownField().FindStringSubmatch(err.Error()); m != nil {
			return &Error{Key: qualify(m[3], m[2]), Source: FileName + ":" + m[1], Msg: "unknown key"}
		}
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			return &Error{Key: keyFromTypeError(raw, te.Errors[0]), Source: FileName, Msg: te.Errors[0]}
		}
		var ye *yamlline.Error
		if errors.As(yamlline.Fix(raw, err), &ye) {
			return &Error{Key: "(file)", Source: FileName + ":" + strconv.Itoa(ye.Line), Msg: "not YAML: " + ye.Msg}
		}
		return &Error{Key: "(file)", Source: FileName, Msg: err.Error()}
	}
	return nil
}

// qualify turns a Go type name and a YAML field into a dotted key, e.g. config.ModelConfig + foo
// → model.foo.
func qualify(goType, field string) string {
	t := reflect.TypeOf(Config{})
	want := strings.TrimPrefix(goType, "config.")
	if want == "Config" {
		return field
	}
	var walk func(t reflect.Type, prefix string) string
	walk = func(t reflect.Type, prefix string) string {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name := yamlName(f)
			if name == "-" || f.Type.Kind() != reflect.Struct || f.Type == reflect.TypeOf(time.Duration(0)) {
				continue
			}
			p := join(prefix, name)
			if f.Type.Name() == want {
				return p + "." + field
			}
			if r := walk(f.Type, p); r != "" {
				return r
			}
		}
		return ""
	}
	if r := walk(t, ""); r != "" {
		return r
	}
	return field
}

var lineRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^line (\d+):`) })

func keyFromTypeError(raw []byte, msg string) string {
	m := lineRe().FindStringSubmatch(msg)
	if m == nil {
		return "(file)"
	}
	n, _ := strconv.Atoi(m[1])
	lines := strings.Split(string(raw), "\n")
	if n < 1 || n > len(lines) {
		return "(file)"
	}
	// Rebuild the dotted path from indentation.
	var path []string
	var indents []int
	for i := 0; i < n; i++ {
		l := lines[i]
		t := strings.TrimLeft(l, " ")
		if t == "" || strings.HasPrefix(t, "#") || strings.HasPrefix(t, "-") {
			continue
		}
		k, _, ok := strings.Cut(t, ":")
		if !ok {
			continue
		}
		ind := len(l) - len(t)
		for len(indents) > 0 && indents[len(indents)-1] >= ind {
			indents = indents[:len(indents)-1]
			path = path[:len(path)-1]
		}
		indents = append(indents, ind)
		path = append(path, strings.TrimSpace(k))
	}
	return strings.Join(path, ".")
}

type field struct {
	path, env string
	v         reflect.Value
	secret    bool
	urlSecret bool // a URL whose password alone is masked
	doc       string
}

func yamlName(f reflect.StructField) string {
	n, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if n == "" {
		n = strings.ToLower(f.Name)
	}
	return n
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// envName turns model.apiKey into PIXIE_MODEL_API_KEY.
func envName(path string) string {
	var b strings.Builder
	b.WriteString("PIXIE")
	for _, part := range strings.Split(path, ".") {
		b.WriteByte('_')
		for i, r := range part {
			if unicode.IsUpper(r) && i > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToUpper(r))
		}
	}
	return b.String()
}

func leaves(v reflect.Value, prefix string) []field {
	var out []field
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name := yamlName(sf)
		if name == "-" {
			continue
		}
		p := join(prefix, name)
		fv := v.Field(i)
		if sf.Type.Kind() == reflect.Struct {
			out = append(out, leaves(fv, p)...)
			continue
		}
		out = append(out, field{path: p, env: envName(p), v: fv, secret: sf.Tag.Get("secret") != "", urlSecret: sf.Tag.Get("secret") == "url", doc: sf.Tag.Get("doc")})
	}
	return out
}

func findField(fs []field, key string) (field, bool) {
	for _, f := range fs {
		if strings.EqualFold(f.path, key) {
			return f, true
		}
	}
	return field{}, false
}

func setString(v reflect.Value, s string) error {
	switch v.Interface().(type) {
	case time.Duration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("invalid duration %q (use e.g. 30s, 5m)", s)
		}
		v.SetInt(int64(d))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("invalid boolean %q", s)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("invalid integer %q", s)
		}
		v.SetInt(n)
	case reflect.Slice:
		var parts []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		v.Set(reflect.ValueOf(parts))
	default:
		return fmt.Errorf("unsupported setting type %s", v.Type())
	}
	return nil
}

// Validate checks every value and names the first bad key.
func (c *Config) Validate() error {
	bad := func(key, msg string, args ...any) error {
		return &Error{Key: key, Source: "value", Msg: fmt.Sprintf(msg, args...)}
	}
	if _, port, err := net.SplitHostPort(c.Addr); err != nil || port == "" {
		return bad("addr", "must be host:port, got %q", c.Addr)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return bad("logLevel", "must be debug, info, warn or error, got %q", c.LogLevel)
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return bad("logFormat", "must be text or json, got %q", c.LogFormat)
	}
	for _, m := range []struct {
		key string
		m   ModelConfig
	}{{"model", c.Model}, {"judge.model", c.Judge.Model}} {
		switch m.m.Provider {
		case "", "openai", "anthropic":
		default:
			return bad(m.key+".provider", "must be openai or anthropic (or empty for none), got %q", m.m.Provider)
		}
		if m.m.Provider != "" && m.m.Model == "" {
			return bad(m.key+".model", "is required when %s.provider is set", m.key)
		}
		if m.m.Timeout < 0 {
			return bad(m.key+".timeout", "must not be negative")
		}
	}
	switch c.Store.Driver {
	case "badger":
	case "postgres":
		if strings.TrimSpace(c.Store.Postgres.URL) == "" {
			return bad("store.postgres.url", "is required when store.driver is postgres (PIXIE_STORE_POSTGRES_URL)")
		}
	default:
		return bad("store.driver", "must be badger or postgres, got %q", c.Store.Driver)
	}
	if u := c.Store.Postgres.ReplicaURL; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return bad("store.postgres.replicaUrl", "must start with http:// or https://")
	}
	switch c.Judge.Engine {
	case "llm", "jev":
	default:
		return bad("judge.engine", "must be llm or jev, got %q", c.Judge.Engine)
	}
	switch c.Hints.Locale {
	case "en", "zh":
	default:
		return bad("hints.locale", "must be en or zh, got %q", c.Hints.Locale)
	}
	switch c.Hints.Delivery {
	case "auto", "proxy", "hooks":
	default:
		return bad("hints.delivery", "must be auto, proxy or hooks, got %q", c.Hints.Delivery)
	}
	for _, u := range []struct{ key, v string }{{"proxy.anthropicUrl", c.Proxy.AnthropicURL}, {"proxy.openaiUrl", c.Proxy.OpenAIURL}} {
		if !strings.HasPrefix(u.v, "http://") && !strings.HasPrefix(u.v, "https://") {
			return bad(u.key, "must start with http:// or https://, got %q", u.v)
		}
	}
	if m := c.Server.MemoryLimit; m != 0 && m < minMemoryLimit {
		return bad("server.memoryLimit", "must be 0 (none) or at least %d (64 MiB), got %d", minMemoryLimit, m)
	}
	positive := []struct {
		key string
		n   int64
	}{
		{"server.bodyLimit", c.Server.BodyLimit},
		{"server.readTimeout", int64(c.Server.ReadTimeout)},
		{"server.writeTimeout", int64(c.Server.WriteTimeout)},
		{"server.shutdownTimeout", int64(c.Server.ShutdownTimeout)},
		{"gates.defaultTimeout", int64(c.Gates.DefaultTimeout)},
		{"wasm.maxModuleSize", c.WASM.MaxModuleSize},
		{"wasm.memoryPages", int64(c.WASM.MemoryPages)},
		{"wasm.maxInput", int64(c.WASM.MaxInput)},
		{"wasm.maxOutput", int64(c.WASM.MaxOutput)},
		{"wasm.poolSize", int64(c.WASM.PoolSize)},
		{"wasm.maxHostCalls", int64(c.WASM.MaxHostCalls)},
		{"wasm.maxQueued", int64(c.WASM.MaxQueued)},
		{"wasm.queueTimeout", int64(c.WASM.QueueTimeout)},
		{"wasm.memoryBudget", c.WASM.MemoryBudget},
		{"hints.maxPerStep", int64(c.Hints.MaxPerStep)},
		{"hints.maxContentChars", int64(c.Hints.MaxContentChars)},
		{"hints.maxPendingPerSession", int64(c.Hints.MaxPendingPerSession)},
		{"hints.keepConsumed", int64(c.Hints.KeepConsumed)},
		{"hints.heartbeat", int64(c.Hints.Heartbeat)},
		{"hints.lease", int64(c.Hints.Lease)},
		{"hooks.timeout", int64(c.Hooks.Timeout)},
		{"store.postgres.maxConns", int64(c.Store.Postgres.MaxConns)},
		{"store.postgres.statementTimeout", int64(c.Store.Postgres.StatementTimeout)},
		{"store.postgres.pollInterval", int64(c.Store.Postgres.PollInterval)},
		{"proxy.injectLimit", c.Proxy.InjectLimit},
		{"pet.maxSkillFiles", int64(c.Pet.MaxSkillFiles)},
		{"pet.maxSkillFileSize", c.Pet.MaxSkillFileSize},
		{"pet.maxSkillSize", c.Pet.MaxSkillSize},
		{"pet.runTimeout", int64(c.Pet.RunTimeout)},
		{"pet.agent.maxSteps", int64(c.Pet.Agent.MaxSteps)},
		{"pet.agent.maxTokens", int64(c.Pet.Agent.MaxTokens)},
		{"pet.agent.shellTimeout", int64(c.Pet.Agent.ShellTimeout)},
		{"lark.agent.maxSteps", int64(c.Lark.Agent.MaxSteps)},
		{"lark.agent.maxTokens", int64(c.Lark.Agent.MaxTokens)},
		{"lark.agent.timeout", int64(c.Lark.Agent.Timeout)},
		{"lark.agent.askTimeout", int64(c.Lark.Agent.AskTimeout)},
	}
	for _, p := range positive {
		if p.n <= 0 {
			return bad(p.key, "must be positive")
		}
	}
	if c.Records.MaxBytes < 0 {
		return bad("records.maxBytes", "must not be negative (0 = no bound)")
	}
	if c.Records.MaxAge < 0 {
		return bad("records.maxAge", "must not be negative (0 = no bound)")
	}
	if c.Pet.Agent.MaxSteps > 1000 {
		return bad("pet.agent.maxSteps", "must be at most 1000")
	}
	if c.WASM.MaxConcurrent < 0 {
		return bad("wasm.maxConcurrent", "must not be negative (0 = the number of CPUs)")
	}
	if c.WASM.MemoryPages > 65536 {
		return bad("wasm.memoryPages", "must be at most 65536 (4 GiB)")
	}
	if c.Lark.Agent.Timeout > 24*time.Hour {
		return bad("lark.agent.timeout", "must be at most 24h (a Delivery's longest deadline)")
	}
	if c.Lark.Agent.AskTimeout > c.Lark.Agent.Timeout {
		return bad("lark.agent.askTimeout", "must not be beyond lark.agent.timeout (%s)", c.Lark.Agent.Timeout)
	}
	if c.PublicURL != "" && !strings.HasPrefix(c.PublicURL, "http://") && !strings.HasPrefix(c.PublicURL, "https://") {
		return bad("publicUrl", "must start with http:// or https://")
	}
	for key, u := range map[string]string{"pet.claude.baseUrl": c.Pet.Claude.BaseURL, "pet.codex.baseUrl": c.Pet.Codex.BaseURL} {
		if u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return bad(key, "must start with http:// or https://")
		}
	}
	return nil
}

// Setting is one line of the masked view.
type Setting struct {
	Key    string `json:"key"`
	Env    string `json:"env"`
	Value  string `json:"value"`
	Secret bool   `json:"secret,omitempty"`
	Doc    string `json:"doc,omitempty"`
}

// Settings lists every setting with secrets masked, in declaration order.
func (c Config) Settings() []Setting {
	var out []Setting
	for _, f := range leaves(reflect.ValueOf(&c).Elem(), "") {
		val := fmt.Sprint(f.v.Interface())
		if f.v.Kind() == reflect.Slice {
			val = strings.Join(f.v.Interface().([]string), ",")
		}
		switch {
		case f.urlSecret:
			val = redact.URL(val)
		case f.secret:
			val = Mask(val)
		}
		out = append(out, Setting{Key: f.path, Env: f.env, Value: val, Secret: f.secret, Doc: f.doc})
	}
	return out
}

// Mask hides a secret: empty stays empty, anything else becomes "********".
func Mask(s string) string {
	if s == "" {
		return ""
	}
	return "********"
}

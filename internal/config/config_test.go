package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestEnvName(t *testing.T) {
	cases := []struct{ path, want string }{
		{"addr", "PIXIE_ADDR"},
		{"model.apiKey", "PIXIE_MODEL_API_KEY"},
		{"model.baseUrl", "PIXIE_MODEL_BASE_URL"},
		{"hints.maxPendingPerSession", "PIXIE_HINTS_MAX_PENDING_PER_SESSION"},
		{"judge.model.provider", "PIXIE_JUDGE_MODEL_PROVIDER"},
		{"proxy.anthropicUrl", "PIXIE_PROXY_ANTHROPIC_URL"},
		{"proxy.openaiUrl", "PIXIE_PROXY_OPENAI_URL"},
		{"hints.delivery", "PIXIE_HINTS_DELIVERY"},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			if got := envName(c.path); got != c.want {
				t.Fatalf("envName(%q) = %q, want %q", c.path, got, c.want)
			}
		})
	}
}

func TestPrecedence(t *testing.T) {
	home := t.TempDir()
	yaml := "addr: 127.0.0.1:1111\nlogLevel: debug\nmodel:\n  provider: openai\n  model: from-file\n  timeout: 5s\n"
	if err := os.WriteFile(filepath.Join(home, FileName), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"PIXIE_ADDR=127.0.0.1:2222", "PIXIE_MODEL_MODEL=from-env", "PIXIE_ALLOWED_HOSTS=a.example, b.example"}
	c, err := Load(home, os.Getenv, env, map[string]string{"addr": "127.0.0.1:3333"})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"flag beats env and file", c.Addr, "127.0.0.1:3333"},
		{"env beats file", c.Model.Model, "from-env"},
		{"file beats default", c.LogLevel, "debug"},
		{"file duration", c.Model.Timeout, 5 * time.Second},
		{"default kept", c.Hints.MaxPerStep, 20},
		{"env list", strings.Join(c.AllowedHosts, "|"), "a.example|b.example"},
		{"records bound by default", c.Records.MaxBytes, 256 << 20},
		{"records age by default", c.Records.MaxAge, 7 * 24 * time.Hour},
	}
	for _, ch := range checks {
		if fmt.Sprint(ch.got) != fmt.Sprint(ch.want) {
			t.Errorf("%s: got %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}

func TestErrorsNameTheKey(t *testing.T) {
	cases := []struct {
		name  string
		yaml  string
		env   []string
		flags map[string]string
		key   string
	}{
		{"unknown top key", "adress: x\n", nil, nil, "adress"},
		{"unknown nested key", "hints:\n  maxPerStp: 3\n", nil, nil, "hints.maxPerStp"},
		{"bad int", "hints:\n  maxPerStep: lots\n", nil, nil, "hints.maxPerStep"},
		{"zero limit", "hints:\n  maxPerStep: 0\n", nil, nil, "hints.maxPerStep"},
		{"bad addr", "addr: nowhere\n", nil, nil, "addr"},
		{"bad locale", "", []string{"PIXIE_HINTS_LOCALE=fr"}, nil, "hints.locale"},
		{"bad delivery", "", []string{"PIXIE_HINTS_DELIVERY=both"}, nil, "hints.delivery"},
		{"bad proxy upstream", "", []string{"PIXIE_PROXY_OPENAI_URL=localhost:8000"}, nil, "proxy.openaiUrl"},
		{"zero inject limit", "proxy:\n  injectLimit: 0\n", nil, nil, "proxy.injectLimit"},
		{"bad env duration", "", []string{"PIXIE_MODEL_TIMEOUT=soon"}, nil, "model.timeout"},
		{"judge model needs a name", "judge:\n  model:\n    provider: anthropic\n", nil, nil, "judge.model.model"},
		{"unknown flag key", "", nil, map[string]string{"nope": "1"}, "nope"},
		{"negative run slots", "wasm:\n  maxConcurrent: -1\n", nil, nil, "wasm.maxConcurrent"},
		{"zero run queue", "", []string{"PIXIE_WASM_MAX_QUEUED=0"}, nil, "wasm.maxQueued"},
		{"zero queue timeout", "", nil, map[string]string{"wasm.queueTimeout": "0s"}, "wasm.queueTimeout"},
		{"zero memory budget", "wasm:\n  memoryBudget: 0\n", nil, nil, "wasm.memoryBudget"},
		{"negative records bound", "records:\n  maxBytes: -1\n", nil, nil, "records.maxBytes"},
		{"negative records age", "", []string{"PIXIE_RECORDS_MAX_AGE=-1h"}, nil, "records.maxAge"},
		{"records age in days", "", nil, map[string]string{"records.maxAge": "7d"}, "records.maxAge"},
		{"memory limit under 64 MiB", "server:\n  memoryLimit: 67108863\n", nil, nil, "server.memoryLimit"},
		{"negative memory limit", "", []string{"PIXIE_SERVER_MEMORY_LIMIT=-1"}, nil, "server.memoryLimit"},
		{"zero lark agent steps", "lark:\n  agent:\n    maxSteps: 0\n", nil, nil, "lark.agent.maxSteps"},
		{"lark agent time limit past a day", "", []string{"PIXIE_LARK_AGENT_TIMEOUT=25h"}, nil, "lark.agent.timeout"},
		{"lark ask beyond the run", "lark:\n  agent:\n    timeout: 5m\n", nil, nil, "lark.agent.askTimeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			if c.yaml != "" {
				if err := os.WriteFile(filepath.Join(home, FileName), []byte(c.yaml), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Load(home, os.Getenv, c.env, c.flags)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *config.Error", err)
			}
			if ce.Key != c.key {
				t.Fatalf("error names %q, want %q (%v)", ce.Key, c.key, err)
			}
		})
	}
}

func TestSettingsMaskSecrets(t *testing.T) {
	c := Defaults("/h")
	c.Model.APIKey = "sk-secret"
	for _, s := range c.Settings() {
		if strings.Contains(s.Value, "sk-secret") {
			t.Fatalf("%s shows the secret", s.Key)
		}
		if s.Key == "model.apiKey" && s.Value != "********" {
			t.Fatalf("model.apiKey shown as %q", s.Value)
		}
	}
}

func ExampleConfig_Settings() {
	c := Defaults("/home/me/.pixie")
	for _, s := range c.Settings()[:2] {
		fmt.Println(s.Key, s.Env, s.Value)
	}
	// Output:
	// addr PIXIE_ADDR 127.0.0.1:7777
	// allowedHosts PIXIE_ALLOWED_HOSTS
}

func TestStoreSettings(t *testing.T) {
	home := t.TempDir()
	env := []string{"PIXIE_STORE_DRIVER=postgres", "PIXIE_STORE_POSTGRES_URL=postgres://pixie:hunter2-pw@db.internal:5432/pixie?sslmode=require"}
	c, err := Load(home, os.Getenv, env, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.Driver != "postgres" || !strings.Contains(c.Store.Postgres.URL, "hunter2-pw") {
		t.Fatalf("got %+v", c.Store)
	}
	var shown string
	for _, s := range c.Settings() {
		if strings.Contains(s.Value, "hunter2-pw") {
			t.Fatalf("%s shows the password: %s", s.Key, s.Value)
		}
		if s.Key == "store.postgres.url" {
			shown = s.Value
		}
	}
	if shown != "postgres://pixie:xxxxx@db.internal:5432/pixie?sslmode=require" {
		t.Fatalf("masked URL %q", shown)
	}
	d := Defaults(home)
	if d.Store.Driver != "badger" {
		t.Fatalf("default driver %q", d.Store.Driver)
	}
	for _, c := range []struct {
		name string
		env  []string
		key  string
	}{
		{"unknown driver", []string{"PIXIE_STORE_DRIVER=mysql"}, "store.driver"},
		{"postgres without url", []string{"PIXIE_STORE_DRIVER=postgres"}, "store.postgres.url"},
		{"bad replica url", []string{"PIXIE_STORE_POSTGRES_REPLICA_URL=10.0.0.1:7777"}, "store.postgres.replicaUrl"},
		{"zero pool", []string{"PIXIE_STORE_POSTGRES_MAX_CONNS=0"}, "store.postgres.maxConns"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(home, os.Getenv, c.env, nil)
			var ce *Error
			if !errors.As(err, &ce) || ce.Key != c.key {
				t.Fatalf("got %v, want an error naming %s", err, c.key)
			}
		})
	}
}

// The proxy's upstreams default to the vendors' public APIs and take the environment.
func TestProxyDefaultsAndEnv(t *testing.T) {
	home := t.TempDir()
	c, err := Load(home, os.Getenv, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Proxy.AnthropicURL != "https://api.anthropic.com" || c.Proxy.OpenAIURL != "https://api.openai.com" ||
		c.Proxy.InjectLimit != 32<<20 || c.Hints.Delivery != "auto" {
		t.Fatalf("defaults: %+v %q", c.Proxy, c.Hints.Delivery)
	}
	c, err = Load(home, os.Getenv, []string{"PIXIE_PROXY_ANTHROPIC_URL=http://127.0.0.1:9/anthropic", "PIXIE_HINTS_DELIVERY=proxy"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Proxy.AnthropicURL != "http://127.0.0.1:9/anthropic" || c.Hints.Delivery != "proxy" {
		t.Fatalf("env: %+v %q", c.Proxy, c.Hints.Delivery)
	}
}

// TestMemoryLimitEdges: server.memoryLimit takes 0 (none) and 64 MiB exactly; the default is
// DefaultMemoryLimit.
func TestMemoryLimitEdges(t *testing.T) {
	for _, c := range []struct {
		name string
		env  []string
		want int64
	}{
		{"default", nil, DefaultMemoryLimit},
		{"none", []string{"PIXIE_SERVER_MEMORY_LIMIT=0"}, 0},
		{"64 MiB", []string{"PIXIE_SERVER_MEMORY_LIMIT=67108864"}, 64 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Load(t.TempDir(), os.Getenv, c.env, nil)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Server.MemoryLimit != c.want {
				t.Fatalf("server.memoryLimit %d, want %d", cfg.Server.MemoryLimit, c.want)
			}
		})
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

const proxyTestToken = "tok-0123456789abcdef-never-in-a-file"

// proxyInitEnv is a fake user home with a Pixie home holding a token, and a project.
func proxyInitEnv(t *testing.T) (home, pixieHome, project string) {
	t.Helper()
	home = t.TempDir()
	pixieHome = filepath.Join(home, ".pixie")
	project = filepath.Join(home, "proj")
	for _, d := range []string{pixieHome, project} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(pixieHome, "token"), []byte(proxyTestToken), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("CODEX_HOME", filepath.Join(home, ".codex"))
	t.Setenv("PIXIE_SERVER_URL", "")
	t.Setenv("PIXIE_TOKEN", proxyTestToken)
	return home, pixieHome, project
}

// noTokenIn checks that no file under dir holds the admin token.
func noTokenIn(t *testing.T, dir string) {
	t.Helper()
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || strings.HasPrefix(p, filepath.Join(dir, ".pixie")) {
			return nil
		}
		if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(proxyTestToken)) {
			t.Errorf("%s holds the admin token", p)
		}
		return nil
	})
}

func TestInitClaudeProxyWrite(t *testing.T) {
	home, pixieHome, project := proxyInitEnv(t)
	settings := filepath.Join(project, ".claude", "settings.json")
	if err := os.MkdirAll(filepath.Dir(settings), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(settings, []byte(`{"env":{"FOO":"bar"},"model":"opus"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 { // a second run changes nothing
		var out, errOut bytes.Buffer
		if code := runInit(t.Context(), []string{"claude", "--proxy", "--write", "--dir", project, "--home", pixieHome, "--url", "http://127.0.0.1:7788"}, &out, &errOut); code != 0 {
			t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
		}
		if !strings.Contains(out.String(), "wrote the model-API proxy into "+settings) {
			t.Fatalf("output: %s", out.String())
		}
	}
	var got struct {
		Env          map[string]string `json:"env"`
		APIKeyHelper string            `json:"apiKeyHelper"`
		Model        string            `json:"model"`
		Hooks        map[string]any    `json:"hooks"`
	}
	raw, _ := os.ReadFile(settings)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Env["ANTHROPIC_BASE_URL"] != "http://127.0.0.1:7788/v1/proxy/anthropic" || got.APIKeyHelper != "printenv PIXIE_TOKEN" ||
		got.Env["FOO"] != "bar" || got.Model != "opus" || len(got.Hooks) == 0 {
		t.Fatalf("settings: %s", raw)
	}
	noTokenIn(t, home)
}

// A base URL or an API key helper of the user's own is not replaced: the file stays as it was.
func TestInitClaudeProxyRefusesForeignSettings(t *testing.T) {
	_, pixieHome, project := proxyInitEnv(t)
	settings := filepath.Join(project, ".claude", "settings.json")
	if err := os.MkdirAll(filepath.Dir(settings), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"env":{"ANTHROPIC_BASE_URL":"https://gateway.corp/anthropic"}}`, "proxy.anthropicUrl"},
		{`{"apiKeyHelper":"~/bin/get-key.sh"}`, "ANTHROPIC_CUSTOM_HEADERS"},
		{`{"env":"nope"}`, `"env" is not a JSON object`},
	} {
		if err := os.WriteFile(settings, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		code := runInit(t.Context(), []string{"claude", "--proxy", "--write", "--dir", project, "--home", pixieHome}, &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), tc.want) {
			t.Fatalf("%s: exit %d, %s", tc.body, code, errOut.String())
		}
		if raw, _ := os.ReadFile(settings); string(raw) != tc.body {
			t.Fatalf("the settings changed: %s", raw)
		}
		if _, err := os.Stat(filepath.Join(project, ".mcp.json")); err == nil {
			t.Fatal("the MCP entry was written although the proxy step failed")
		}
	}
}

func TestInitProxyPrints(t *testing.T) {
	_, pixieHome, project := proxyInitEnv(t)
	for _, host := range []string{"claude", "codex"} {
		var out, errOut bytes.Buffer
		if code := runInit(t.Context(), []string{host, "--proxy", "--dir", project, "--home", pixieHome}, &out, &errOut); code != 0 {
			t.Fatalf("%s: exit %d %s", host, code, errOut.String())
		}
		want := `"ANTHROPIC_BASE_URL": "http://127.0.0.1:7777/v1/proxy/anthropic"`
		if host == "codex" {
			want = `base_url = "http://127.0.0.1:7777/v1/proxy/openai/v1"`
		}
		if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "export PIXIE_TOKEN=") {
			t.Fatalf("%s printed:\n%s", host, out.String())
		}
		if strings.Contains(out.String(), proxyTestToken) {
			t.Fatalf("%s printed the token", host)
		}
	}
	if entries, _ := os.ReadDir(project); len(entries) != 0 {
		t.Fatal("printing wrote files")
	}
}

func TestInitCodexProxyWrite(t *testing.T) {
	home, pixieHome, project := proxyInitEnv(t)
	cfgPath := filepath.Join(home, ".codex", "config.toml")
	if err := os.MkdirAll(filepath.Dir(cfgPath), 0o755); err != nil {
		t.Fatal(err)
	}
	orig := "# mine\nmodel = \"gpt-5\"\nmodel_provider = \"openai\"\n\n[projects.\"/src\"]\ntrust_level = \"trusted\"\n"
	if err := os.WriteFile(cfgPath, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := runInit(t.Context(), []string{"codex", "--proxy", "--write", "--dir", project, "--home", pixieHome}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), `model_provider was "openai"`) {
		t.Fatalf("output: %s", out.String())
	}
	raw, _ := os.ReadFile(cfgPath)
	var c struct {
		Model          string `toml:"model"`
		ModelProvider  string `toml:"model_provider"`
		ModelProviders map[string]struct {
			BaseURL            string            `toml:"base_url"`
			WireAPI            string            `toml:"wire_api"`
			RequiresOpenAIAuth bool              `toml:"requires_openai_auth"`
			EnvHTTPHeaders     map[string]string `toml:"env_http_headers"`
		} `toml:"model_providers"`
		Projects map[string]map[string]string `toml:"projects"`
	}
	if _, err := toml.Decode(string(raw), &c); err != nil {
		t.Fatalf("%v\n%s", err, raw)
	}
	p := c.ModelProviders["pixie"]
	if c.Model != "gpt-5" || c.ModelProvider != "pixie" || p.BaseURL != "http://127.0.0.1:7777/v1/proxy/openai/v1" ||
		p.WireAPI != "responses" || !p.RequiresOpenAIAuth || p.EnvHTTPHeaders["X-Pixie-Token"] != "PIXIE_TOKEN" ||
		c.Projects["/src"]["trust_level"] != "trusted" || !strings.HasPrefix(string(raw), "# mine\n") {
		t.Fatalf("config.toml:\n%s", raw)
	}
	if st, _ := os.Stat(cfgPath); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode().Perm())
	}
	noTokenIn(t, home)
}

func TestMergeCodexProxy(t *testing.T) {
	o := initOptions{serverURL: "http://127.0.0.1:7777"}
	table := codexProxyTOML(o)
	for _, tc := range []struct {
		name, in, want, prev string
		fails                bool
	}{
		{name: "empty", in: "", want: "model_provider = \"pixie\"\n\n" + table},
		{name: "top keys kept, provider replaced", in: "model = \"m\"\nmodel_provider = \"openai\"\n",
			want: "model = \"m\"\nmodel_provider = \"pixie\"\n\n" + table, prev: "openai"},
		{name: "earlier Pixie table and its subtable replaced",
			in:   "model_provider = \"pixie\"\n\n[model_providers.pixie]\nbase_url = \"http://old\"\n\n[model_providers.pixie.http_headers]\nX = \"y\"\n\n[model_providers.other]\nbase_url = \"http://other\"\n",
			want: "model_provider = \"pixie\"\n\n[model_providers.other]\nbase_url = \"http://other\"\n\n" + table},
		{name: "a model_provider inside a table is not the top one",
			in:   "[profiles.fast]\nmodel_provider = \"openai\"\n",
			want: "model_provider = \"pixie\"\n[profiles.fast]\nmodel_provider = \"openai\"\n\n" + table},
		{name: "no final newline", in: "model = \"m\"", want: "model_provider = \"pixie\"\nmodel = \"m\"\n\n" + table},
		{name: "invalid TOML", in: "model = \n", fails: true},
		{name: "dotted keys for the same table", in: "model_providers.pixie.base_url = \"x\"\n", fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, prev, err := mergeCodexProxy([]byte(tc.in), o)
			if tc.fails {
				if err == nil {
					t.Fatalf("merged:\n%s", out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want || prev != tc.prev {
				t.Fatalf("got (prev %q)\n%s\nwant (prev %q)\n%s", prev, out, tc.prev, tc.want)
			}
		})
	}
}

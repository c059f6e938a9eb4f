package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"
)

// `pixie init claude|codex` (unless --no-proxy) points the host's model requests at Pixie's
// model-API proxy (/v1/proxy/anthropic, /v1/proxy/openai; docs/hints.md), so hints reach the
// model in one request and never enter the chat history, and the replacements hooks cannot make
// reach the model in place of the original (internal/rewrite). The hooks it writes beside say so
// (?proxy=1, pixie hook --proxy). The admin token is never written into a file: the host reads it
// from PIXIE_TOKEN in its environment when it sends a request.
//
//   - Claude Code (.claude/settings.json, --user: ~/.claude/settings.json): env.ANTHROPIC_BASE_URL
//     and apiKeyHelper "printenv PIXIE_TOKEN". Claude Code sends the helper's value as its API
//     credential (in x-api-key or Authorization, whichever its own credential does not use);
//     Pixie takes it as its token, removes it, and forwards the client's own key.
//   - Codex ($CODEX_HOME/config.toml, default ~/.codex/config.toml: Codex ignores model providers
//     in a project's config): a model provider "pixie" with env_http_headers X-Pixie-Token from
//     PIXIE_TOKEN and requires_openai_auth (Codex's own login goes upstream as it is), and
//     model_provider = "pixie".

// claudeProxyHelper is the apiKeyHelper written into Claude Code's settings.
const claudeProxyHelper = "printenv PIXIE_TOKEN"

// codexProxyProvider is the model provider id written into Codex's config.toml.
const codexProxyProvider = "pixie"

func proxyURL(o initOptions, api string) string { return o.serverURL + "/v1/proxy/" + api }

// claudeProxySettings are the settings the proxy set-up merges into Claude Code's settings.json.
func claudeProxySettings(o initOptions) map[string]any {
	return map[string]any{
		"env":          map[string]any{"ANTHROPIC_BASE_URL": proxyURL(o, "anthropic")},
		"apiKeyHelper": claudeProxyHelper,
	}
}

// mergeClaudeProxy puts the proxy settings into Claude Code's settings, refusing to replace a
// base URL or an API key helper of the user's own (forwarding to a gateway the user chose, with
// its credential, must be set up deliberately: proxy.anthropicUrl).
func mergeClaudeProxy(settings map[string]any, o initOptions) error {
	env, _ := settings["env"].(map[string]any)
	if settings["env"] != nil && env == nil {
		return errors.New(`"env" is not a JSON object`)
	}
	if env == nil {
		env = map[string]any{}
	}
	want := proxyURL(o, "anthropic")
	if cur, ok := env["ANTHROPIC_BASE_URL"].(string); ok && cur != want && !strings.Contains(cur, "/v1/proxy/anthropic") {
		return fmt.Errorf("env.ANTHROPIC_BASE_URL is already %q: to keep using it through Pixie, set proxy.anthropicUrl "+
			"(PIXIE_PROXY_ANTHROPIC_URL) to it, remove it from the settings, and run this again; or run it with --no-proxy", cur)
	}
	if cur, ok := settings["apiKeyHelper"].(string); ok && cur != claudeProxyHelper {
		return fmt.Errorf("apiKeyHelper is already %q: Pixie's proxy needs Claude Code to send PIXIE_TOKEN; remove it and run this "+
			"again, or run it with --no-proxy (then, to use the proxy anyway, start Claude Code with ANTHROPIC_BASE_URL=%s and "+
			"ANTHROPIC_CUSTOM_HEADERS=\"X-Pixie-Token: $PIXIE_TOKEN\")", cur, want)
	}
	env["ANTHROPIC_BASE_URL"] = want
	settings["env"] = env
	settings["apiKeyHelper"] = claudeProxyHelper
	return nil
}

// codexProxyTOML is the provider table the proxy set-up writes into Codex's config.toml.
func codexProxyTOML(o initOptions) string {
	q := func(v string) string { return tomlString(v) }
	return fmt.Sprintf(`[model_providers.%s]
name = "Pixie model-API proxy"
base_url = %s
wire_api = "responses"
requires_openai_auth = true
env_http_headers = { "X-Pixie-Token" = "PIXIE_TOKEN" }
`, codexProxyProvider, q(proxyURL(o, "openai")+"/v1"))
}

// tomlString is a TOML basic string (JSON's escapes are TOML's, for the characters that matter).
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

var (
	tomlTableHeader   = regexp.MustCompile(`^\s*\[`)
	tomlPixieTable    = regexp.MustCompile(`^\s*\[\s*model_providers\s*\.\s*"?` + codexProxyProvider + `"?\s*(\.|\])`)
	tomlModelProvider = regexp.MustCompile(`^\s*model_provider\s*=`)
)

// mergeCodexProxy returns config.toml with model_provider = "pixie" at the top level and
// Pixie's provider table (replacing an earlier one); prev is the model_provider it replaced. The
// result is parsed back: a file whose shape the edit cannot handle (dotted keys for the same
// table, a syntax error) is refused, never half-written.
func mergeCodexProxy(raw []byte, o initOptions) (out []byte, prev string, err error) {
	var before map[string]any
	if _, err := toml.Decode(string(raw), &before); err != nil {
		return nil, "", fmt.Errorf("it is not valid TOML (left unchanged): %v", err)
	}
	prev, _ = before["model_provider"].(string)
	lines := strings.SplitAfter(string(raw), "\n")
	var kept []string
	inPixie, seenTable, setTop := false, false, false
	for _, l := range lines {
		if l == "" {
			continue
		}
		if tomlTableHeader.MatchString(l) {
			seenTable = true
			inPixie = tomlPixieTable.MatchString(l)
			if inPixie {
				continue
			}
		}
		if inPixie {
			continue
		}
		if !seenTable && tomlModelProvider.MatchString(l) {
			if !setTop {
				kept = append(kept, "model_provider = "+tomlString(codexProxyProvider)+"\n")
				setTop = true
			}
			continue
		}
		kept = append(kept, l)
	}
	var b bytes.Buffer
	if !setTop {
		b.WriteString("model_provider = " + tomlString(codexProxyProvider) + "\n")
	}
	for _, l := range kept {
		b.WriteString(l)
	}
	if b.Len() > 0 && !bytes.HasSuffix(b.Bytes(), []byte("\n")) {
		b.WriteByte('\n')
	}
	if b.Len() > 0 {
		b.WriteByte('\n')
	}
	b.WriteString(codexProxyTOML(o))
	var after struct {
		ModelProvider  string `toml:"model_provider"`
		ModelProviders map[string]struct {
			BaseURL string `toml:"base_url"`
			WireAPI string `toml:"wire_api"`
		} `toml:"model_providers"`
	}
	if _, err := toml.Decode(b.String(), &after); err != nil {
		return nil, "", fmt.Errorf("the pixie model provider cannot be merged into it (left unchanged): %v; "+
			"add the printed table by hand (pixie init codex prints it), or run it with --no-proxy", err)
	}
	if after.ModelProvider != codexProxyProvider || after.ModelProviders[codexProxyProvider].BaseURL != proxyURL(o, "openai")+"/v1" {
		return nil, "", errors.New("the pixie model provider did not come out as written (left unchanged); add the printed table by hand")
	}
	if prev == codexProxyProvider {
		prev = ""
	}
	return b.Bytes(), prev, nil
}

// codexConfigPath is Codex's user configuration: $CODEX_HOME/config.toml, else
// ~/.codex/config.toml.
func codexConfigPath() (string, error) {
	if h := os.Getenv("CODEX_HOME"); h != "" {
		return filepath.Join(h, "config.toml"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".codex", "config.toml"), nil
}

// printProxy prints what the proxy set-up writes.
func printProxy(w io.Writer, codex bool, o initOptions, user bool, tokenFile string) {
	if codex {
		path, _ := codexConfigPath()
		fmt.Fprintf(w, "# %s: the model-API proxy (pixie init codex --write merges it; Codex reads model providers only from the user's config; --no-proxy leaves it out)\n", path)
		fmt.Fprintf(w, "model_provider = %s\n\n%s", tomlString(codexProxyProvider), codexProxyTOML(o))
	} else {
		where := ".claude/settings.json"
		if user {
			where = "~/.claude/settings.json"
		}
		s, _ := marshalIndent(claudeProxySettings(o))
		fmt.Fprintf(w, "# %s: the model-API proxy (merge into the settings; pixie init claude --write does it; --no-proxy leaves it out)\n%s", where, s)
	}
	fmt.Fprintln(w, "# the host sends $PIXIE_TOKEN to the proxy: start it with the admin token in it, e.g.")
	fmt.Fprintf(w, "#   export PIXIE_TOKEN=\"$(cat %s)\"\n", tokenFile)
}

// writeProxy merges the proxy settings into the host's configuration.
func writeProxy(stdout io.Writer, codex bool, o initOptions, claudeSettings string) error {
	if !codex {
		if err := mergeJSONFile(claudeSettings, func(m map[string]any) error { return mergeClaudeProxy(m, o) }); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote the model-API proxy into %s (ANTHROPIC_BASE_URL=%s, apiKeyHelper %q)\n",
			claudeSettings, proxyURL(o, "anthropic"), claudeProxyHelper)
		printDeliveryNote(stdout)
		return nil
	}
	path, err := codexConfigPath()
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	out, prev, err := mergeCodexProxy(raw, o)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := writeFileAtomic(path, out, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote the model-API proxy into %s (model_provider = %q, base_url %s/v1)\n", path, codexProxyProvider, proxyURL(o, "openai"))
	if prev != "" {
		fmt.Fprintf(stdout, "  model_provider was %q: to go back, set it again (Pixie's provider forwards to proxy.openaiUrl)\n", prev)
	}
	printDeliveryNote(stdout)
	return nil
}

// printDeliveryNote says what the proxy changes.
func printDeliveryNote(w io.Writer) {
	fmt.Fprintln(w, "  hints reach the model through the proxy, outside the chat history, from a session's first prompt on (the hooks")
	fmt.Fprintln(w, "  written with it deliver none), and replaced prompts and tool results reach the model in place of the original")
}

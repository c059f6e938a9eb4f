package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pixie-dev/pixie/internal/agentskill"
	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/hookcmd"
	"github.com/pixie-dev/pixie/internal/hooks"
)

func init() {
	register(&command{name: "init", args: "claude|codex", nargs: one, summary: "set up an agent host: print (or --write) the hooks, the MCP entry and the agent skill",
		help: initHelp, flags: initFlags})
}

const initHelp = `claude: prints the Claude Code settings that connect a project to Pixie: the hooks block for
.claude/settings.json (http hooks to POST /v1/hooks/claude-code, or command hooks running
pixie hook claude with --command) and the MCP server entry for .mcp.json (pixie mcp). With
--write it merges them into those files (other entries are kept) and installs the agent skill
pixie-gate-guide into .claude/skills/. With --user it targets ~/.claude/settings.json and
~/.claude/skills instead, and prints the claude mcp add command for the user scope.

codex: prints the Codex hooks (command hooks running pixie hook codex, for .codex/hooks.json) and
the MCP table for config.toml. With --write it merges the hooks into .codex/hooks.json (--user:
~/.codex/hooks.json), writes the MCP table into .codex/config.toml through codex app-server when
the codex command is found (else prints it), and installs the agent skill into .agents/skills/.
Codex runs a project's hooks only when the project is trusted and each hook's trust is recorded;
codex exec skips untrusted hooks without a word. --trust records both, as Codex's own hook review
does (through codex app-server).

Command hooks run pixie-hook, the adapter's own small program, when it lies beside this binary
and was built with it (make build puts both in bin/): it starts in about 2 ms, the pixie binary
in about 10; otherwise they run pixie hook, and init says why. Every hook and MCP entry carries
the absolute path of the program, the server URL and the Pixie home, so they reach the server
init was pointed at whatever the agent's environment. init asks that
server whether the preset exists and has gates, and warns when it does not (or cannot be asked).
pixie doctor checks the result end to end.

By default init also routes the host's model requests through Pixie's model-API proxy, so hints
reach the model in one request and stay out of the chat history, and the replacements hooks
cannot make (a user's message, a built-in tool's structured result) reach the model in place of
the original: Claude Code gets env.ANTHROPIC_BASE_URL=<url>/v1/proxy/anthropic and apiKeyHelper
"printenv PIXIE_TOKEN" in the same settings.json; Codex gets a model provider "pixie" (base_url
<url>/v1/proxy/openai/v1, X-Pixie-Token from PIXIE_TOKEN) and model_provider = "pixie" in
$CODEX_HOME/config.toml (Codex reads providers only from the user's config). The hooks then say
so (?proxy=1 on the http hooks' URL, --proxy on the command hooks), and never deliver hints: the
proxy does, from a session's first prompt on. The token itself is never written.

--no-proxy leaves the host's model requests alone: the hooks then deliver hints (into the
host's chat history) and hand replacements to the model as context. --proxy, the default, is
still accepted.`

// hookEvents are the Claude Code events Pixie handles, in the order they are written.
var hookEvents = []string{hooks.EventUserPromptSubmit, hooks.EventPreToolUse, hooks.EventPostToolUse, hooks.EventStop, hooks.EventSubagentStop}

// hookTimeoutSeconds is the hook timeout written into the settings: above the default gate
// time limit (60 s), so a slow model gate still decides.
const hookTimeoutSeconds = 90

// initOptions are what the settings are built from.
type initOptions struct {
	serverURL string // http://127.0.0.1:7777
	home      string // the Pixie home (its token file)
	preset    string
	command   bool   // command hooks instead of http hooks
	pixie     string // the pixie binary's absolute path
	host      string // "claude" or "codex": the adapter the command hooks run
	// adapter is pixie-hook beside pixie when it runs this binary's adapter code (hookcmd.Find):
	// the command hooks run it, and `pixie hook` otherwise.
	adapter string
	proxy   bool // the host's model requests go through the model-API proxy: the hooks say so
}

// initArgs are the flags of `pixie init`.
type initArgs struct {
	write, user, command, trust, proxy, noProxy bool
	preset, project, skillDir, serverURL, home  string
}

// runInit runs `pixie init …` (the tests' entry point).
func runInit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return executeVerb(ctx, "init", args, cmdIO{os.Stdin, stdout, stderr})
}

func initFlags(fs *flag.FlagSet) runFunc {
	f := &initArgs{}
	fs.BoolVar(&f.write, "write", false, "write the settings, the MCP entry and the agent skill (default: print them)")
	fs.BoolVar(&f.user, "user", false, "target the user's Claude Code folder (~/.claude) instead of the project")
	fs.StringVar(&f.preset, "preset", "", "the preset the hooks name (default hooks.defaultPreset)")
	fs.BoolVar(&f.command, "command", false, "command hooks (pixie hook claude) instead of http hooks")
	fs.BoolVar(&f.proxy, "proxy", false, "send the host's model requests through Pixie's model-API proxy (the default; see init_proxy.go)")
	fs.BoolVar(&f.noProxy, "no-proxy", false, "leave the host's model requests alone: the hooks deliver hints (into the chat history) and replacements as context")
	fs.StringVar(&f.project, "dir", "", "the project folder (default: the current directory)")
	fs.StringVar(&f.skillDir, "skill-dir", "", "the skills folder the agent skill goes into (default hooks.skillDir, else .claude/skills)")
	fs.StringVar(&f.serverURL, "url", "", "the Pixie server URL (default $PIXIE_SERVER_URL, else http://<addr> from the configuration)")
	fs.StringVar(&f.home, "home", "", "Pixie home (default $PIXIE_HOME, else ~/.pixie)")
	fs.BoolVar(&f.trust, "trust", false, "codex, with --write: record Codex's trust for the project and for Pixie's hooks (through codex app-server)")
	return func(ctx context.Context, io cmdIO, pos []string) error {
		if pos[0] != "claude" && pos[0] != "codex" {
			return usagef("the agent host is `claude` (Claude Code) or `codex`, not %q", pos[0])
		}
		if f.trust && (pos[0] != "codex" || !f.write) {
			return usagef("--trust is for pixie init codex --write")
		}
		if f.proxy && f.noProxy {
			return usagef("--proxy and --no-proxy exclude each other (the proxy is the default)")
		}
		f.proxy = !f.noProxy
		if code := initRun(ctx, pos[0], *f, io.stdout, io.stderr); code != 0 {
			return exitCode(code)
		}
		return nil
	}
}

func initRun(ctx context.Context, host string, f initArgs, stdout, stderr io.Writer) int {
	codex := host == "codex"
	h, err := config.ResolveHome(f.home, os.Getenv)
	if err != nil {
		return failTo(stderr, err)
	}
	if h, err = filepath.Abs(h); err != nil {
		return failTo(stderr, err)
	}
	cfg, err := config.Load(h, os.Getenv, os.Environ(), nil)
	if err != nil {
		return failTo(stderr, err)
	}
	self, err := pixieExecutable()
	if err != nil {
		return failTo(stderr, err)
	}
	o := initOptions{serverURL: f.serverURL, home: h, preset: f.preset, command: f.command || codex, pixie: self, host: host, proxy: f.proxy}
	if o.command {
		// The small adapter program starts in about 2 ms; the pixie binary in about 10.
		if o.adapter, err = hookcmd.Find(self); err != nil {
			fmt.Fprintf(stderr, "note: the command hooks run %s hook %s, which starts the whole pixie binary (about 10 ms of CPU per hook call more than pixie-hook): %v\n", self, host, err)
		}
	}
	if o.serverURL == "" {
		o.serverURL = os.Getenv("PIXIE_SERVER_URL")
	}
	if o.serverURL == "" {
		o.serverURL = "http://" + cfg.Addr
	}
	o.serverURL = strings.TrimRight(o.serverURL, "/")
	if u, err := url.Parse(o.serverURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return failTo(stderr, fmt.Errorf("the server URL %q is not an http(s) URL", o.serverURL))
	}
	if o.preset == "" {
		o.preset = cfg.Hooks.DefaultPreset
	}
	if err := hooks.CheckPreset(o.preset); err != nil {
		return failTo(stderr, err)
	}

	settings := claudeHooks(o)
	mcpEntry := mcpServerEntry(o)
	warnPreset(ctx, stderr, o)
	if !f.write {
		if codex {
			printCodex(stdout, o, settings)
			printCodexTrust(stdout, false)
		} else {
			printInit(stdout, o, settings, mcpEntry, f.user, filepath.Join(h, "token"))
		}
		if f.proxy {
			printProxy(stdout, codex, o, f.user, filepath.Join(h, "token"))
		}
		return 0
	}

	// Where things go.
	base := f.project
	if base == "" {
		if base, err = os.Getwd(); err != nil {
			return failTo(stderr, err)
		}
	}
	root := base
	if f.user {
		if root, err = os.UserHomeDir(); err != nil {
			return failTo(stderr, err)
		}
	}
	claudeDir := filepath.Join(root, ".claude")
	skills := f.skillDir
	if skills == "" && cfg.Hooks.SkillDir != "" {
		if skills, err = config.ExpandPath(cfg.Hooks.SkillDir); err != nil {
			return failTo(stderr, err)
		}
	}
	if skills == "" {
		skills = filepath.Join(claudeDir, "skills")
		if codex {
			skills = filepath.Join(root, ".agents", "skills")
		}
	}

	settingsPath := filepath.Join(claudeDir, "settings.json")
	if f.proxy {
		// First, so a configuration the proxy cannot be merged into stops before anything is written.
		if err := writeProxy(stdout, codex, o, settingsPath); err != nil {
			return failTo(stderr, err)
		}
	}
	if codex {
		settingsPath = filepath.Join(root, ".codex", "hooks.json")
		if ch := os.Getenv("CODEX_HOME"); f.user && ch != "" {
			settingsPath = filepath.Join(ch, "hooks.json")
		}
	}
	if err := mergeJSONFile(settingsPath, func(m map[string]any) error { return mergeHooks(m, settings) }); err != nil {
		return failTo(stderr, err)
	}
	fmt.Fprintln(stdout, "wrote the Pixie hooks into", settingsPath)
	switch {
	case codex && f.user:
		fmt.Fprintf(stdout, "add the MCP server to Codex's config.toml (~/.codex/config.toml):\n%s", codexMCP(o))
	case codex:
		file := filepath.Join(base, ".codex", "config.toml")
		if err := writeCodexMCP(file, codexMCP(o)); err != nil {
			return failTo(stderr, err)
		}
		fmt.Fprintln(stdout, "wrote the pixie MCP server into", file, "(Codex loads it once the project is trusted)")
	case f.user:
		fmt.Fprintln(stdout, "add the MCP server for every project with:")
		fmt.Fprintf(stdout, "  %s\n", claudeMCPAdd(o))
	default:
		mcpPath := filepath.Join(base, ".mcp.json")
		if err := mergeJSONFile(mcpPath, func(m map[string]any) error { return mergeMCP(m, mcpEntry) }); err != nil {
			return failTo(stderr, err)
		}
		fmt.Fprintln(stdout, "wrote the pixie MCP server into", mcpPath)
	}
	dir := filepath.Join(skills, agentskill.Name)
	rep, err := agentskill.Install(dir, version)
	if err != nil {
		return failTo(stderr, err)
	}
	if err := agentskill.Record(h, dir); err != nil {
		fmt.Fprintln(stderr, "pixie init: the skill is installed but `pixie serve` will not keep it updated:", err)
	}
	fmt.Fprintf(stdout, "installed the agent skill into %s (written %d, updated %d, unchanged %d, kept as you edited them: %s)\n",
		dir, len(rep.Written), len(rep.Updated), len(rep.Unchanged), listOrNone(rep.Kept))
	if codex {
		trusted := false
		if f.trust {
			hs, err := codexTrust(ctx, base, settingsPath, !f.user)
			if err != nil {
				printCodexTrust(stdout, false)
				return failTo(stderr, fmt.Errorf("the trust of Codex was not recorded: %w", err))
			} else {
				trusted = true
				fmt.Fprintf(stdout, "recorded Codex's trust for %d Pixie hooks%s (in Codex's config.toml, as its hook review does)\n", len(hs), map[bool]string{true: "", false: " and for the project " + base}[f.user])
			}
		}
		printCodexTrust(stdout, trusted)
	}
	if !o.command || f.proxy {
		fmt.Fprintln(stdout, "the http hooks and the model-API proxy read $PIXIE_TOKEN: start the agent with it set, for example")
		fmt.Fprintf(stdout, "  export PIXIE_TOKEN=\"$(cat %s)\"\n", filepath.Join(h, "token"))
	}
	fmt.Fprintln(stdout, "check the whole set-up with: pixie doctor --dir", shellQuote(base))
	return 0
}

// printCodexTrust explains Codex's trust: without it the hooks init wrote do not run.
func printCodexTrust(w io.Writer, trusted bool) {
	if trusted {
		fmt.Fprintln(w, "# Codex: changing these hooks (another preset or URL) makes them untrusted again: run init with --trust again.")
		return
	}
	fmt.Fprint(w, `# Codex runs a project's hooks only when the project is trusted AND each hook's trust is
# recorded (hooks.state."<file>:<event>:<group>:<handler>".trusted_hash in its config.toml).
# Until then codex exec skips the hooks WITHOUT A WORD: tool calls run ungated. Record the trust:
#   pixie init codex --write --trust    (through codex app-server, as Codex's hook review does)
#   or open the codex TUI in the project and review the hooks it offers.
# A changed hook (another preset or URL) is untrusted again. pixie doctor checks it.
`)
}

// warnPreset asks the server whether the preset exists and has enabled gates, and warns when
// it does not, or when the server cannot be asked (the hooks would then say so at every step).
func warnPreset(ctx context.Context, w io.Writer, o initOptions) {
	msg, fix, err := presetProblem(ctx, o.serverURL, o.home, o.preset)
	switch {
	case err != nil:
		fmt.Fprintf(w, "pixie init: warning: could not check the preset %q: %v\n", o.preset, err)
	case msg != "":
		fmt.Fprintf(w, "pixie init: warning: %s: %s\n", msg, fix)
	}
}

// presetProblem describes what is wrong with the preset on the server, and its fix ("" when
// it exists and has an enabled gate); err is set when the server cannot be asked.
func presetProblem(ctx context.Context, serverURL, home, preset string) (problem, fix string, err error) {
	c, err := newClient(clientFlags{url: serverURL, home: home})
	if err != nil {
		return "", "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var set struct {
		Gates []struct {
			Name    string `json:"name"`
			Enabled bool   `json:"enabled"`
		} `json:"gates"`
		Presets []struct {
			Name  string `json:"name"`
			Gates []struct {
				Gate    string `json:"gate"`
				Enabled bool   `json:"enabled"`
			} `json:"gates"`
		} `json:"presets"`
	}
	if err := c.do(ctx, "GET", "/v1/gates", nil, &set); err != nil {
		return "", "", err
	}
	enabled := map[string]bool{}
	for _, g := range set.Gates {
		enabled[g.Name] = g.Enabled
	}
	for _, p := range set.Presets {
		if p.Name != preset {
			continue
		}
		for _, a := range p.Gates {
			if a.Enabled && enabled[a.Gate] {
				return "", "", nil
			}
		}
		return fmt.Sprintf("the preset %q on %s has no enabled gate, so the hooks check nothing yet", preset, serverURL),
			"attach a gate to it (pixie gate apply -f gates.yaml)", nil
	}
	return fmt.Sprintf("the preset %q does not exist on %s, so the hooks check nothing (and say so at every step)", preset, serverURL),
		"create it (pixie gate apply -f gates.yaml), or point the hooks at an existing one (pixie init … --preset P)", nil
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// pixieExecutable is this binary's absolute path with symlinks resolved: what every hook and
// MCP entry runs, so they do not depend on the agent's PATH.
func pixieExecutable() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("cannot find this binary's path: %w", err)
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return "", fmt.Errorf("cannot resolve this binary's path: %w", err)
	}
	return filepath.Abs(self)
}

// claudeHooks builds the "hooks" object of Claude Code's settings.
func claudeHooks(o initOptions) map[string]any {
	out := map[string]any{}
	for _, ev := range hookEvents {
		var h map[string]any
		if o.command {
			h = map[string]any{
				"type":    "command",
				"command": hookCommand(o),
				"timeout": hookTimeoutSeconds,
			}
		} else {
			u := o.serverURL + "/v1/hooks/claude-code?preset=" + url.QueryEscape(o.preset)
			if o.proxy {
				u += "&proxy=1"
			}
			h = map[string]any{
				"type":           "http",
				"url":            u,
				"headers":        map[string]any{"Authorization": "Bearer $PIXIE_TOKEN"},
				"allowedEnvVars": []any{"PIXIE_TOKEN"},
				"timeout":        hookTimeoutSeconds,
			}
		}
		group := map[string]any{"hooks": []any{h}}
		if ev == hooks.EventPreToolUse || ev == hooks.EventPostToolUse {
			group["matcher"] = "*"
		}
		out[ev] = []any{group}
	}
	return out
}

// hookCommand is the command hook: the adapter for the host with the preset, the server URL
// and the home (its token file), so it reaches the server init was pointed at whatever the
// agent's environment holds.
func hookCommand(o initOptions) string {
	host := o.host
	if host == "" {
		host = "claude"
	}
	adapter := shellQuote(o.pixie) + " hook"
	if o.adapter != "" {
		adapter = shellQuote(o.adapter)
	}
	c := fmt.Sprintf("%s %s --preset %s --url %s --home %s --timeout %ds", adapter, host,
		shellQuote(o.preset), shellQuote(o.serverURL), shellQuote(o.home), hookTimeoutSeconds-5)
	if o.proxy {
		c += " --proxy"
	}
	return c
}

// mcpEnv is the MCP server's environment: Codex hands MCP servers only a default environment
// plus this table, so the server URL and the home (its token file) go in it.
func mcpEnv(o initOptions) map[string]any {
	return map[string]any{"PIXIE_SERVER_URL": o.serverURL, "PIXIE_HOME": o.home}
}

// mcpServerEntry is the pixie entry of .mcp.json's mcpServers.
func mcpServerEntry(o initOptions) map[string]any {
	return map[string]any{
		"type":    "stdio",
		"command": o.pixie,
		"args":    []any{"mcp"},
		"env":     mcpEnv(o),
	}
}

// claudeMCPAdd is the claude mcp add command for the user scope.
func claudeMCPAdd(o initOptions) string {
	return fmt.Sprintf("claude mcp add --scope user pixie -e PIXIE_SERVER_URL=%s -e PIXIE_HOME=%s -- %s mcp",
		shellQuote(o.serverURL), shellQuote(o.home), shellQuote(o.pixie))
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// isPixieHook reports whether a hook handler of the settings is one Pixie wrote.
func isPixieHook(h any) bool {
	m, ok := h.(map[string]any)
	if !ok {
		return false
	}
	if u, ok := m["url"].(string); ok && strings.Contains(u, "/v1/hooks/claude-code") {
		return true
	}
	c, _ := m["command"].(string)
	return isPixieCommand(c)
}

// isPixieCommand reports whether a hook command runs Pixie's adapter: `… hook claude|codex`
// (the pixie binary) or `…/pixie-hook claude|codex`.
func isPixieCommand(c string) bool {
	if strings.Contains(c, " hook claude") || strings.Contains(c, " hook codex") {
		return true
	}
	w := shellWords(c)
	return len(w) > 1 && filepath.Base(w[0]) == hookcmd.Name && (w[1] == "claude" || w[1] == "codex")
}

// mergeHooks puts Pixie's hooks into settings: for each event, Pixie's handlers already there
// are replaced (so a second run updates the preset or the URL), and every other hook is kept.
func mergeHooks(settings map[string]any, ours map[string]any) error {
	all, _ := settings["hooks"].(map[string]any)
	if settings["hooks"] != nil && all == nil {
		return errors.New(`"hooks" is not a JSON object`)
	}
	if all == nil {
		all = map[string]any{}
	}
	for _, ev := range hookEvents {
		cur, _ := all[ev].([]any)
		if all[ev] != nil && cur == nil {
			return fmt.Errorf(`"hooks.%s" is not a JSON array`, ev)
		}
		var kept []any
		for _, g := range cur {
			gm, ok := g.(map[string]any)
			if !ok {
				kept = append(kept, g)
				continue
			}
			hs, _ := gm["hooks"].([]any)
			var rest []any
			for _, h := range hs {
				if !isPixieHook(h) {
					rest = append(rest, h)
				}
			}
			if len(hs) > 0 && len(rest) == 0 {
				continue // the group held only Pixie's hook
			}
			if len(rest) != len(hs) {
				c := map[string]any{}
				for k, v := range gm {
					c[k] = v
				}
				c["hooks"] = rest
				gm = c
			}
			kept = append(kept, gm)
		}
		all[ev] = append(kept, ours[ev].([]any)...)
	}
	settings["hooks"] = all
	return nil
}

// mergeMCP puts the pixie entry into .mcp.json's mcpServers, keeping the other servers.
func mergeMCP(doc map[string]any, entry map[string]any) error {
	servers, _ := doc["mcpServers"].(map[string]any)
	if doc["mcpServers"] != nil && servers == nil {
		return errors.New(`"mcpServers" is not a JSON object`)
	}
	if servers == nil {
		servers = map[string]any{}
	}
	servers["pixie"] = entry
	doc["mcpServers"] = servers
	return nil
}

// mergeJSONFile applies change to the JSON object in path (an absent file is {}) and writes it
// back atomically. A file that is not a JSON object is left alone and reported.
func mergeJSONFile(path string, change func(map[string]any) error) error {
	doc := map[string]any{}
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		if len(bytes.TrimSpace(raw)) > 0 {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			if err := dec.Decode(&doc); err != nil || doc == nil {
				return fmt.Errorf("%s is not a JSON object (left unchanged): %v", path, err)
			}
		}
	}
	if err := change(doc); err != nil {
		return fmt.Errorf("%s: %w (left unchanged)", path, err)
	}
	out, err := marshalIndent(doc)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, out, 0o644)
}

// writeFileAtomic replaces path with data through a temporary file in the same folder, so a
// reader sees the old file or the new one, never half of it. An existing file keeps its mode; a
// new one gets mode.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), mode)
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}

// marshalIndent encodes v with two-space indentation, without HTML escaping.
func marshalIndent(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func printInit(w io.Writer, o initOptions, settings, mcpEntry map[string]any, user bool, tokenFile string) {
	where := ".claude/settings.json"
	if user {
		where = "~/.claude/settings.json"
	}
	s, _ := marshalIndent(map[string]any{"hooks": settings})
	fmt.Fprintf(w, "# %s: the Pixie hooks (merge into \"hooks\"; pixie init claude --write does it)\n%s\n", where, s)
	if user {
		fmt.Fprintf(w, "# the MCP server, for every project:\n%s\n", claudeMCPAdd(o))
	} else {
		m, _ := marshalIndent(map[string]any{"mcpServers": map[string]any{"pixie": mcpEntry}})
		fmt.Fprintf(w, "# .mcp.json: the Pixie MCP server (hint_send, hint_status, judge)\n%s\n", m)
	}
	if !o.command {
		fmt.Fprintln(w, "# the http hooks send $PIXIE_TOKEN: start Claude Code with the admin token in it, e.g.")
		fmt.Fprintf(w, "#   export PIXIE_TOKEN=\"$(cat %s)\"\n", tokenFile)
	}
}

// codexMCP is the config.toml table of the MCP server for Codex.
func codexMCP(o initOptions) string {
	q := func(v string) string { b, _ := json.Marshal(v); return string(b) } // a TOML basic string
	return fmt.Sprintf("[mcp_servers.pixie]\ncommand = %s\nargs = [\"mcp\"]\nenv = { PIXIE_SERVER_URL = %s, PIXIE_HOME = %s }\n", q(o.pixie), q(o.serverURL), q(o.home))
}

func printCodex(w io.Writer, o initOptions, settings map[string]any) {
	s, _ := marshalIndent(map[string]any{"hooks": settings})
	fmt.Fprintf(w, "# .codex/hooks.json: the Pixie hooks (pixie init codex --write merges them)\n%s\n", s)
	fmt.Fprintf(w, "# .codex/config.toml: the Pixie MCP server (hint_send, hint_status, judge)\n%s", codexMCP(o))
}

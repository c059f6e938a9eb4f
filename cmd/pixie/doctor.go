package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pixie-dev/pixie/internal/companion"
	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/hookcmd"
)

func init() {
	register(&command{name: "doctor", summary: "check a project's Pixie set-up end to end (server, token, hooks, preset, Codex trust, MCP server)",
		help: doctorHelp, flags: doctorFlags})
}

const doctorHelp = `Checks that the agent hosts set up in a project (by pixie init) really reach Pixie, and prints
one line per check: "ok" or "problem", each problem with its fix. It checks that the server
answers, that the token works, that the hooks of every Pixie event are present and point at this
server and an existing preset with gates (Claude Code: .claude/settings.json, then
~/.claude/settings.json; Codex: .codex/hooks.json, then $CODEX_HOME/hooks.json), that the
binary they run exists, that Codex has recorded its trust for the project and for each hook
(through codex app-server; without it codex exec skips them silently), and that the MCP server
of each host starts and answers with the environment the host gives it. Then it prints, as
"warning" lines, the set-up problems the server has seen in hook calls from anywhere (GET
/v1/gates/setup): presets hooks asked for that do not exist, no default preset, hook calls
without a valid token. Exit 1 when a problem was found (warnings alone exit 0).`

func doctorFlags(fs *flag.FlagSet) runFunc {
	var cf clientFlags
	cf.add(fs)
	dir := fs.String("dir", "", "the project folder (default: the current directory)")
	return func(ctx context.Context, io cmdIO, _ []string) error {
		d := *dir
		if d == "" {
			var err error
			if d, err = os.Getwd(); err != nil {
				return err
			}
		}
		d, err := filepath.Abs(d)
		if err != nil {
			return err
		}
		r := &doctorReport{w: io.stdout}
		runDoctor(ctx, r, cf, d)
		if r.problems > 0 {
			fmt.Fprintf(io.stdout, "%d problem(s) found\n", r.problems)
			return exitCode(1)
		}
		if r.warnings > 0 {
			fmt.Fprintf(io.stdout, "no problem found (%d warning(s) above)\n", r.warnings)
			return nil
		}
		fmt.Fprintln(io.stdout, "no problem found")
		return nil
	}
}

// doctorReport prints the checks.
type doctorReport struct {
	w        io.Writer
	problems int
	warnings int
	adapters map[string]bool // the command hooks' programs already checked (adapterSpeed)
}

func (r *doctorReport) ok(format string, a ...any) {
	fmt.Fprintf(r.w, "ok       %s\n", fmt.Sprintf(format, a...))
}

// warn prints a line that is not this project's problem (the server's report of other hook
// calls); it does not make doctor fail.
func (r *doctorReport) warn(line string) {
	r.warnings++
	fmt.Fprintf(r.w, "warning  %s\n", line)
}

func (r *doctorReport) problem(what, fix string) {
	r.problems++
	fmt.Fprintf(r.w, "problem  %s; fix: %s\n", what, fix)
}

// sandboxStart reports what each hook script run starts (the server's /v1/info): the small
// sandbox init beside pixie, or, with a warning, the whole pixie binary.
func sandboxStart(r *doctorReport, info map[string]any) {
	sb, _ := info["sandbox"].(map[string]any)
	switch start, _ := sb["start"].(string); start {
	case "init":
		r.ok("hook scripts start the sandbox init (%s)", strings.Join(anyStrings(sb["command"]), " "))
	case "pixie":
		reason, _ := sb["startReason"].(string)
		r.warn(fmt.Sprintf("every hook script run starts the whole pixie binary, about 10 ms of CPU more than the sandbox init (%s); fix: build pixie-sandbox beside pixie (make build, or CGO_ENABLED=0 go build -o DIR/ ./cmd/pixie-sandbox with pixie's DIR) and restart the server", reason))
	}
}

func anyStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// hookRef is one Pixie hook handler found in a host's settings.
type hookRef struct {
	host    string // "claude" or "codex"
	event   string
	file    string
	kind    string // "http" or "command"
	url     string // the server base URL it reaches
	preset  string
	home    string // command hooks: --home
	binary  string // command hooks: the program
	adapter string // command hooks: the adapter's host argument (claude or codex)
	proxy   bool   // the hook says its host goes through the model-API proxy (?proxy=1, --proxy)
}

func runDoctor(ctx context.Context, r *doctorReport, cf clientFlags, dir string) {
	home, err := config.ResolveHome(cf.home, os.Getenv)
	if err != nil {
		r.problem("the Pixie home cannot be resolved: "+err.Error(), "pass --home or set PIXIE_HOME")
		return
	}
	base := cf.url
	if base == "" {
		base = os.Getenv("PIXIE_SERVER_URL")
	}
	if base == "" {
		addr := "127.0.0.1:7777"
		if c, err := config.Load(home, os.Getenv, os.Environ(), nil); err == nil {
			addr = c.Addr
		}
		base = "http://" + addr
	}
	base = strings.TrimRight(base, "/")

	// The server and the token.
	hc := &http.Client{Timeout: 5 * time.Second}
	serverUp := false
	if resp, err := hc.Get(base + "/healthz"); err != nil {
		r.problem(fmt.Sprintf("the Pixie server at %s does not answer (%v)", base, err), "start it (pixie serve), or pass --url with its address")
	} else {
		resp.Body.Close()
		serverUp = resp.StatusCode == http.StatusOK
		if serverUp {
			r.ok("the Pixie server at %s answers", base)
		} else {
			r.problem(fmt.Sprintf("%s/healthz answers HTTP %d", base, resp.StatusCode), "check that the address is a Pixie server")
		}
	}
	cf.url, cf.home = base, home
	if serverUp {
		if c, err := newClient(cf); err != nil {
			r.problem("no admin token: "+err.Error(), "run doctor on the server's machine with its home (--home), or pass --token")
		} else {
			var info map[string]any
			if err := c.do(ctx, "GET", "/v1/info", nil, &info); err != nil {
				r.problem("the token is refused: "+err.Error(), "use the token file of the server's home (--home), or the admin token (--token)")
			} else {
				r.ok("the token works")
				sandboxStart(r, info)
			}
		}
	}

	// The hooks of each host.
	refs, hosts := findHooks(dir)
	if len(hosts) == 0 {
		r.problem("no Pixie hooks for "+dir, "run pixie init claude --write or pixie init codex --write in the project")
		return
	}
	presets := map[string]bool{}
	for _, host := range hosts {
		checkProxySetup(r, host, dir, refs)
		byEvent := map[string]hookRef{}
		for _, h := range refs {
			if h.host == host {
				if _, seen := byEvent[h.event]; !seen {
					byEvent[h.event] = h
				}
			}
		}
		for _, ev := range hookEvents {
			h, ok := byEvent[ev]
			if !ok {
				r.problem(fmt.Sprintf("%s: no Pixie hook for %s", hostTitle(host), ev), "run pixie init "+host+" --write")
				continue
			}
			if checkHook(r, h, base, home) {
				r.ok("%s: the %s hook (%s) reaches %s with the preset %q", hostTitle(host), ev, h.file, base, h.preset)
			}
			presets[h.preset] = true
		}
	}
	if serverUp {
		names := make([]string, 0, len(presets))
		for p := range presets {
			names = append(names, p)
		}
		sort.Strings(names)
		for _, p := range names {
			msg, fix, err := presetProblem(ctx, base, home, p)
			switch {
			case err != nil:
				r.problem(fmt.Sprintf("the preset %q could not be checked: %v", p, err), "fix the token problem above")
			case msg != "":
				r.problem(msg, fix)
			default:
				r.ok("the preset %q exists and has an enabled gate", p)
			}
		}
		// What the server saw in hook calls from anywhere; this project's presets were checked
		// above.
		if c, err := newClient(cf); err == nil {
			if rep, ok, err := getSetup(ctx, c); err == nil && ok {
				for _, l := range setupWarnings(rep, presets) {
					r.warn(l)
				}
			}
		}
	}

	// Codex's trust, and each host's MCP server.
	for _, host := range hosts {
		switch host {
		case "codex":
			checkCodex(ctx, r, dir)
		case "claude":
			checkClaudeMCP(ctx, r, dir)
		}
	}
}

func hostTitle(h string) string {
	if h == "codex" {
		return "Codex"
	}
	return "Claude Code"
}

// checkHook reports the problems of one hook; it returns true when there are none.
func checkHook(r *doctorReport, h hookRef, base, home string) bool {
	good := true
	where := fmt.Sprintf("%s: the %s hook in %s", hostTitle(h.host), h.event, h.file)
	if h.url == "" {
		r.problem(where+" names no server URL, so it reaches whatever PIXIE_SERVER_URL the agent has (or none)", "run pixie init "+h.host+" --write --url "+base)
		good = false
	} else if strings.TrimRight(h.url, "/") != base {
		r.problem(fmt.Sprintf("%s reaches %s, not %s", where, h.url, base), "run pixie init "+h.host+" --write --url "+base+" (or run doctor with --url "+h.url+")")
		good = false
	}
	if h.preset == "" {
		r.problem(where+" names no preset", "run pixie init "+h.host+" --write --preset P")
		good = false
	}
	if h.kind == "command" {
		if st, err := os.Stat(h.binary); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			r.problem(fmt.Sprintf("%s runs %s, which is not an executable file", where, h.binary), "run pixie init "+h.host+" --write with the pixie binary you use")
			good = false
		} else {
			adapterSpeed(r, h)
		}
		if h.adapter != h.host {
			r.problem(fmt.Sprintf("%s runs the %s adapter (pixie hook %s), whose answers %s may drop", where, h.adapter, h.adapter, hostTitle(h.host)), "run pixie init "+h.host+" --write")
			good = false
		}
		if h.home == "" {
			r.problem(where+" names no Pixie home, so it reads the token file of whatever PIXIE_HOME the agent has", "run pixie init "+h.host+" --write --home "+home)
			good = false
		} else if h.home != home {
			r.problem(fmt.Sprintf("%s uses the home %s, not %s", where, h.home, home), "run pixie init "+h.host+" --write --home "+home+" (or run doctor with --home "+h.home+")")
			good = false
		}
	}
	return good
}

// adapterSpeed warns, once per hook file, when command hooks start the whole pixie binary
// (pixie hook) rather than pixie-hook, or a pixie-hook built from other sources than this
// pixie (which pixie init would not have written).
func adapterSpeed(r *doctorReport, h hookRef) {
	key := h.file + "\x00" + h.binary
	if r.adapters[key] {
		return
	}
	if r.adapters == nil {
		r.adapters = map[string]bool{}
	}
	r.adapters[key] = true
	if filepath.Base(h.binary) == hookcmd.Name {
		if _, err := companion.Find(h.binary, hookcmd.Name, hookcmd.Fingerprint()); err != nil {
			r.warn(fmt.Sprintf("%s's hooks run %s, which this pixie would not use (%v); fix: run pixie init %s --write", h.file, h.binary, err, h.host))
		}
		return
	}
	fix := "build pixie-hook beside pixie (make build) and run pixie init " + h.host + " --write"
	if _, err := hookcmd.Find(h.binary); err == nil {
		fix = "run pixie init " + h.host + " --write (pixie-hook is beside " + h.binary + ")"
	}
	r.warn(fmt.Sprintf("%s's hooks run %s hook, which starts the whole pixie binary for every hook call (about 10 ms of CPU more than pixie-hook); fix: %s", h.file, h.binary, fix))
}

// checkProxySetup compares what the host's hooks say about the model-API proxy with where the
// host's model requests go, as far as its settings tell (the agent's environment can also set a
// base URL, which doctor cannot see: a mismatch is a warning).
func checkProxySetup(r *doctorReport, host, dir string, refs []hookRef) {
	saysProxy, saysNot := false, false
	for _, h := range refs {
		if h.host == host {
			saysProxy = saysProxy || h.proxy
			saysNot = saysNot || !h.proxy
		}
	}
	routed, where := hostUsesProxy(host, dir)
	switch {
	case saysProxy && !routed:
		r.warn(fmt.Sprintf("%s: the hooks leave hints and replacements to the model-API proxy, but %s does not send the model requests through it, "+
			"so hints never reach the model and replacements of prompts and built-in tool results are lost unless the agent's environment sets the base URL; "+
			"fix: run pixie init %s --write (or --no-proxy)", hostTitle(host), where, host))
	case routed && saysNot:
		r.warn(fmt.Sprintf("%s: the model requests go through the model-API proxy (%s), but some hooks do not say so: they deliver a hint pending at a "+
			"new session's first prompt into the chat history, and hand replacements to the model as context; fix: run pixie init %s --write", hostTitle(host), where, host))
	case routed:
		r.ok("%s: the model requests go through the model-API proxy (%s), and the hooks say so", hostTitle(host), where)
	}
}

// hostUsesProxy reports whether the host's settings send its model requests to Pixie's
// model-API proxy, and names the settings it read.
func hostUsesProxy(host, dir string) (bool, string) {
	userHome, _ := os.UserHomeDir()
	if host == "codex" {
		path, err := codexConfigPath()
		if err != nil {
			return false, "Codex's config.toml"
		}
		var c struct {
			ModelProvider string `toml:"model_provider"`
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return false, path
		}
		if _, err := toml.Decode(string(raw), &c); err != nil {
			return false, path
		}
		return c.ModelProvider == codexProxyProvider, path
	}
	files := []string{filepath.Join(dir, ".claude", "settings.local.json"), filepath.Join(dir, ".claude", "settings.json")}
	if userHome != "" {
		files = append(files, filepath.Join(userHome, ".claude", "settings.json"))
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var doc struct {
			Env map[string]any `json:"env"`
		}
		if json.Unmarshal(raw, &doc) != nil {
			continue
		}
		if u, ok := doc.Env["ANTHROPIC_BASE_URL"].(string); ok {
			return strings.Contains(u, "/v1/proxy/anthropic"), f
		}
	}
	return false, "Claude Code's settings"
}

// findHooks reads Pixie's hook handlers from the hosts' settings: the project's first, then the
// user's. hosts lists the hosts with at least one.
func findHooks(dir string) ([]hookRef, []string) {
	userHome, _ := os.UserHomeDir()
	codexHome := os.Getenv("CODEX_HOME")
	if codexHome == "" && userHome != "" {
		codexHome = filepath.Join(userHome, ".codex")
	}
	files := []struct{ host, path string }{
		{"claude", filepath.Join(dir, ".claude", "settings.json")},
		{"claude", filepath.Join(dir, ".claude", "settings.local.json")},
		{"codex", filepath.Join(dir, ".codex", "hooks.json")},
	}
	if userHome != "" {
		files = append(files, struct{ host, path string }{"claude", filepath.Join(userHome, ".claude", "settings.json")})
	}
	if codexHome != "" {
		files = append(files, struct{ host, path string }{"codex", filepath.Join(codexHome, "hooks.json")})
	}
	var refs []hookRef
	seen := map[string]bool{}
	var hosts []string
	for _, f := range files {
		raw, err := os.ReadFile(f.path)
		if err != nil {
			continue
		}
		var doc struct {
			Hooks map[string][]struct {
				Hooks []map[string]any `json:"hooks"`
			} `json:"hooks"`
		}
		if json.Unmarshal(raw, &doc) != nil {
			continue
		}
		for ev, groups := range doc.Hooks {
			for _, g := range groups {
				for _, h := range g.Hooks {
					if !isPixieHook(h) {
						continue
					}
					refs = append(refs, parseHookRef(f.host, ev, f.path, h))
					if !seen[f.host] {
						seen[f.host] = true
						hosts = append(hosts, f.host)
					}
				}
			}
		}
	}
	sort.Strings(hosts)
	return refs, hosts
}

func parseHookRef(host, event, file string, h map[string]any) hookRef {
	ref := hookRef{host: host, event: event, file: file}
	if u, ok := h["url"].(string); ok {
		ref.kind = "http"
		if pu, err := url.Parse(u); err == nil {
			ref.preset = pu.Query().Get("preset")
			ref.proxy = pu.Query().Get("proxy") == "1"
			pu.RawQuery, pu.Path = "", ""
			ref.url = pu.String()
		}
		return ref
	}
	ref.kind = "command"
	c, _ := h["command"].(string)
	words := shellWords(c)
	first := 1
	if len(words) > 0 {
		ref.binary = words[0]
		if filepath.Base(ref.binary) == hookcmd.Name && len(words) > 1 { // pixie-hook claude|codex …
			ref.adapter, first = words[1], 2
		}
	}
	for i := first; i < len(words); i++ {
		next := func() string {
			if i+1 < len(words) {
				i++
				return words[i]
			}
			return ""
		}
		switch w := words[i]; {
		case w == "hook":
			ref.adapter = next()
		case w == "--url":
			ref.url = next()
		case w == "--preset":
			ref.preset = next()
		case w == "--home":
			ref.home = next()
		case w == "--proxy" || w == "--proxy=true":
			ref.proxy = true
		case strings.HasPrefix(w, "--url="):
			ref.url = w[len("--url="):]
		case strings.HasPrefix(w, "--preset="):
			ref.preset = w[len("--preset="):]
		case strings.HasPrefix(w, "--home="):
			ref.home = w[len("--home="):]
		}
	}
	return ref
}

// shellWords splits a command line as sh does for the quoting init writes ('…', "…", \).
func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	in, quote, esc := false, rune(0), false
	for _, r := range s {
		switch {
		case esc:
			cur.WriteRune(r)
			esc, in = false, true
		case quote != 0:
			if r == quote {
				quote = 0
			} else if r == '\\' && quote == '"' {
				esc = true
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == '\\':
			esc = true
		case r == ' ' || r == '\t' || r == '\n':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// checkCodex checks Codex's trust for the project's hooks and that its MCP server starts.
func checkCodex(ctx context.Context, r *doctorReport, dir string) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	a, err := startCodexApp(ctx, dir)
	if err != nil {
		r.problem("Codex's trust could not be checked: "+err.Error(), "install Codex or set PIXIE_CODEX_BIN, then run pixie doctor again")
		return
	}
	defer a.Close()
	hs, _, err := a.Hooks(dir)
	if err != nil {
		r.problem("Codex's hooks could not be listed: "+err.Error(), "run codex once in the project to check its configuration")
		return
	}
	var ours []codexHook
	for _, h := range hs {
		if isPixieCodexHook(h, "") {
			ours = append(ours, h)
		}
	}
	projectFile := filepath.Join(dir, ".codex", "hooks.json")
	if _, err := os.Stat(projectFile); err == nil {
		listed := false
		for _, h := range ours {
			if filepath.Clean(h.SourcePath) == projectFile {
				listed = true
			}
		}
		if !listed {
			r.problem("Codex does not load "+projectFile+": the project is not trusted, so codex exec runs without Pixie's hooks and says nothing", "pixie init codex --write --trust (or run codex in the project and trust it)")
		}
	}
	for _, h := range ours {
		switch {
		case !h.Enabled:
			r.problem(fmt.Sprintf("Codex: the hook %s is disabled", h.Key), "enable it in the codex TUI's hook review, or remove hooks.state."+tomlKey(h.Key)+".enabled from Codex's config.toml")
		case h.TrustStatus == "trusted" || h.TrustStatus == "managed":
			r.ok("Codex trusts the hook %s", h.Key)
		default:
			r.problem(fmt.Sprintf("Codex has not recorded trust for the hook %s (%s): codex exec skips it without a word", h.Key, h.TrustStatus), "pixie init codex --write --trust (or review the hooks in the codex TUI)")
		}
	}
	cfg, err := a.Config(dir)
	if err != nil {
		r.problem("Codex's configuration could not be read: "+err.Error(), "run codex once in the project to check its configuration")
		return
	}
	servers, _ := cfg["mcp_servers"].(map[string]any)
	entry, _ := servers["pixie"].(map[string]any)
	if entry == nil {
		r.problem("Codex has no pixie MCP server for "+dir, "pixie init codex --write (it writes .codex/config.toml; Codex loads it once the project is trusted)")
		return
	}
	// Codex hands an MCP server only a default environment plus its env table.
	env := []string{"HOME=" + os.Getenv("HOME"), "PATH=" + os.Getenv("PATH")}
	checkMCP(ctx, r, "Codex", entry, env)
}

// checkClaudeMCP checks that the pixie MCP server of .mcp.json starts.
func checkClaudeMCP(ctx context.Context, r *doctorReport, dir string) {
	path := filepath.Join(dir, ".mcp.json")
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		r.problem("Claude Code: no .mcp.json in "+dir+" (the pixie MCP server may be in the user scope, which doctor does not read)", "pixie init claude --write, or claude mcp list to check the user scope")
		return
	}
	var doc struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	if err != nil || json.Unmarshal(raw, &doc) != nil {
		r.problem(path+" is not a JSON object", "fix or remove it, then pixie init claude --write")
		return
	}
	entry := doc.MCPServers["pixie"]
	if entry == nil {
		r.problem("Claude Code: "+path+" has no pixie server", "pixie init claude --write")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	checkMCP(ctx, r, "Claude Code", entry, os.Environ())
}

// checkMCP starts an MCP server entry ({command, args, env}) with base plus its env, and calls
// hint_status through it.
func checkMCP(ctx context.Context, r *doctorReport, host string, entry map[string]any, base []string) {
	command, _ := entry["command"].(string)
	var args []string
	if as, ok := entry["args"].([]any); ok {
		for _, a := range as {
			if s, ok := a.(string); ok {
				args = append(args, s)
			}
		}
	}
	env := append([]string(nil), base...)
	if m, ok := entry["env"].(map[string]any); ok {
		for k, v := range m {
			env = append(env, fmt.Sprintf("%s=%v", k, v))
		}
	}
	if command == "" {
		r.problem(host+": the pixie MCP server has no command", "pixie init "+map[string]string{"Codex": "codex", "Claude Code": "claude"}[host]+" --write")
		return
	}
	cmd := exec.Command(command, args...)
	cmd.Env = env
	client := mcp.NewClient(&mcp.Implementation{Name: "pixie-doctor", Version: version}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err != nil {
		r.problem(fmt.Sprintf("%s: the pixie MCP server (%s) does not start: %v", host, command, err), "pixie init "+map[string]string{"Codex": "codex", "Claude Code": "claude"}[host]+" --write with the pixie binary you use")
		return
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hint_status", Arguments: map[string]any{}})
	switch {
	case err != nil:
		r.problem(fmt.Sprintf("%s: the pixie MCP server does not answer: %v", host, err), "check that its env reaches the server (PIXIE_SERVER_URL, PIXIE_HOME)")
	case res.IsError:
		text := ""
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text += tc.Text
			}
		}
		r.problem(fmt.Sprintf("%s: the pixie MCP server starts but cannot reach the Pixie server: %s", host, text), "pixie init "+map[string]string{"Codex": "codex", "Claude Code": "claude"}[host]+" --write --url URL --home HOME (its env carries both)")
	default:
		r.ok("%s: the pixie MCP server starts and reaches the Pixie server", host)
	}
}

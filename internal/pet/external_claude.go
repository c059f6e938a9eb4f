package pet

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/runtime/sandbox"
)

// claude prepares a Claude Code Run: the Skill installed in a private CLAUDE_CONFIG_DIR (in
// the writable state) as an ordinary Claude Code Skill and invoked as /<name>, a settings file
// of the Run (read-only to the CLI) with Pixie's command hooks and nothing that could turn them
// off, and claude -p under Pixie's sandbox at the Skill's policy, streaming its events
// (stream-json) on stdout.
func (r *externalRun) claude(sc *scan, pc PetContext) (proc, error) {
	cfgDir := filepath.Join(r.state, "claude")
	if err := installSkill(filepath.Join(cfgDir, "skills"), sc.name, sc.staged); err != nil {
		return proc{}, prepErr(err)
	}
	if r.cli.APIKey == "" {
		linkLogin(filepath.Join(userConfigDir("CLAUDE_CONFIG_DIR", ".claude"), ".credentials.json"), filepath.Join(cfgDir, ".credentials.json"))
	}
	// Flag settings outrank user settings, which the CLI could write in its own configuration
	// folder (and reloads when they change): disableAllHooks stays false.
	settings := map[string]any{"disableAllHooks": false, "hooks": r.hooksObject("claude", nil)}
	raw, _ := json.MarshalIndent(settings, "", "  ")
	settingsFile := filepath.Join(r.conf, "settings.json")
	if err := os.WriteFile(settingsFile, raw, 0o600); err != nil {
		return proc{}, prepErr(err)
	}
	args := []string{"-p", "--output-format", "stream-json", "--verbose",
		// Only the Run's own configuration: no project or local settings of the cwd.
		"--setting-sources", "user", "--settings", settingsFile, "--strict-mcp-config",
		"--no-session-persistence",
		// The sandbox and the gates decide, not permission prompts nobody could answer.
		"--permission-mode", "bypassPermissions"}
	if r.cli.Model != "" {
		args = append(args, "--model", r.cli.Model)
	}
	env := []string{"CLAUDE_CONFIG_DIR=" + cfgDir,
		// The run is sandboxed (bypassPermissions is refused to root otherwise).
		"IS_SANDBOX=1",
		"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
	if r.cli.BaseURL != "" {
		env = append(env, "ANTHROPIC_BASE_URL="+r.cli.BaseURL)
	}
	if r.cli.APIKey != "" {
		env = append(env, "ANTHROPIC_API_KEY="+r.cli.APIKey)
	}
	o := sandbox.Options{Policy: r.policy, Writable: []string{r.state}, Readable: []string{sc.staged}}
	return proc{argv: r.sandboxArgs(o, r.bin, args...), env: env, stdin: "/" + sc.name + " " + prompt(pc), line: r.claudeLine}, nil
}

// claudeEvent is the part of a stream-json event Pet reads.
type claudeEvent struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
	Message struct {
		ID      string            `json:"id"`
		Content []json.RawMessage `json:"content"`
	} `json:"message"`
	// result
	Result  string `json:"result"`
	IsError bool   `json:"is_error"`
	Errors  []any  `json:"errors"`
	Usage   *struct {
		InputTokens              int `json:"input_tokens"`
		OutputTokens             int `json:"output_tokens"`
		CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	} `json:"usage"`
}

// claudeBlock is a content block of an assistant or user message.
type claudeBlock struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// claudeLine reads one stream-json event: tool calls from assistant messages (one step per
// message id), their results from user messages, the answer and the usage from the result.
func (r *externalRun) claudeLine(line []byte, cut bool) {
	now := time.Now()
	var ev claudeEvent
	if cut || json.Unmarshal(line, &ev) != nil {
		return
	}
	switch ev.Type {
	case "assistant":
		for _, raw := range ev.Message.Content {
			var b claudeBlock
			if json.Unmarshal(raw, &b) != nil || b.Type != "tool_use" {
				continue
			}
			r.addCall(b.ID, b.Name, b.Input, r.stepOf(ev.Message.ID), now)
		}
	case "user":
		for _, raw := range ev.Message.Content {
			var b claudeBlock
			if json.Unmarshal(raw, &b) != nil || b.Type != "tool_result" {
				continue
			}
			r.setResult(b.ToolUseID, blockText(b.Content), b.IsError, now)
		}
	case "result":
		if ev.Usage != nil {
			r.usage = &model.Usage{InputTokens: ev.Usage.InputTokens + ev.Usage.CacheCreationInputTokens + ev.Usage.CacheReadInputTokens, OutputTokens: ev.Usage.OutputTokens}
		}
		if ev.IsError || (ev.Subtype != "" && ev.Subtype != "success") {
			msg := ev.Result
			if msg == "" {
				msg = ev.Subtype
				if len(ev.Errors) > 0 {
					e, _ := json.Marshal(ev.Errors)
					msg += ": " + string(e)
				}
			}
			r.failure = r.red.clean(lastLine(msg))
			return
		}
		r.output = ev.Result
	}
}

// blockText is a tool result's content as text: a string, or the text parts of a list of
// blocks (an image part is named, not kept).
func blockText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return string(raw)
	}
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteString("\n")
		}
		if p.Type == "text" {
			b.WriteString(p.Text)
		} else {
			b.WriteString("[" + p.Type + "]")
		}
	}
	return b.String()
}

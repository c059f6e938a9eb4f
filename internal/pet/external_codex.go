package pet

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pixie-dev/pixie/internal/codexapp"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/sandbox"
)

// codexKeyEnv carries Codex's provider key (the provider's env_key).
const codexKeyEnv = "PIXIE_PET_CODEX_KEY"

// codexSandbox maps a Skill's policy to Codex's own sandbox mode.
func codexSandbox(p runtime.Policy) string {
	switch p {
	case runtime.PolicyWorkspaceWrite:
		return "workspace-write"
	case runtime.PolicyFull:
		return "danger-full-access"
	}
	return "read-only"
}

// codex prepares a Codex Run: a private CODEX_HOME with a config.toml naming the model
// provider, Pixie's command hooks in hooks.json (their trust recorded through codex app-server,
// as Codex's hook review does), the Skill installed as a Codex Skill and invoked as $<name>, and
// codex exec with Codex's own sandbox at the Skill's policy, itself run by Pixie's sandbox under
// the full policy with the Pixie home masked (Codex's bubblewrap cannot start under Landlock).
func (r *externalRun) codex(ctx context.Context, sc *scan, pc PetContext) (proc, error) {
	home := filepath.Join(r.state, "codex")
	tmp := filepath.Join(r.state, "tmp")
	if err := installSkill(filepath.Join(home, "skills"), sc.name, sc.staged); err != nil {
		return proc{}, prepErr(err)
	}
	if r.cli.APIKey == "" && r.cli.BaseURL == "" {
		linkLogin(filepath.Join(userConfigDir("CODEX_HOME", ".codex"), "auth.json"), filepath.Join(home, "auth.json"))
	}
	q := func(v string) string { b, _ := json.Marshal(v); return string(b) } // a TOML basic string
	var cfg strings.Builder
	if r.cli.Model != "" {
		fmt.Fprintf(&cfg, "model = %s\n", q(r.cli.Model))
	}
	if r.cli.BaseURL != "" {
		fmt.Fprintf(&cfg, "model_provider = \"pixie-pet\"\n")
	}
	// The commands the model runs never write outside the cwd and the Run's own temporary
	// directory: not /tmp, where the Run's configuration lies.
	fmt.Fprintf(&cfg, "\n[sandbox_workspace_write]\nexclude_slash_tmp = true\nexclude_tmpdir_env_var = true\nwritable_roots = [%s]\n", q(tmp))
	if r.cli.BaseURL != "" {
		fmt.Fprintf(&cfg, "\n[model_providers.pixie-pet]\nname = \"Pixie Pet\"\nbase_url = %s\nwire_api = \"responses\"\n", q(r.cli.BaseURL))
		if r.cli.APIKey != "" {
			fmt.Fprintf(&cfg, "env_key = %s\n", q(codexKeyEnv))
		}
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg.String()), 0o600); err != nil {
		return proc{}, prepErr(err)
	}
	hooksFile := filepath.Join(home, "hooks.json")
	raw, _ := json.MarshalIndent(map[string]any{"hooks": r.hooksObject("codex", nil)}, "", "  ")
	if err := os.WriteFile(hooksFile, raw, 0o600); err != nil {
		return proc{}, prepErr(err)
	}
	env := []string{"CODEX_HOME=" + home}
	if r.cli.APIKey != "" {
		if r.cli.BaseURL != "" {
			env = append(env, codexKeyEnv+"="+r.cli.APIKey)
		} else {
			env = append(env, "OPENAI_API_KEY="+r.cli.APIKey)
		}
	}
	if err := r.trustCodexHooks(ctx, home, hooksFile); err != nil {
		return proc{}, err
	}
	args := []string{"exec", "--json", "--skip-git-repo-check", "--cd", r.cwd, "--sandbox", codexSandbox(r.policy)}
	if r.cli.Model != "" {
		args = append(args, "--model", r.cli.Model)
	}
	args = append(args, "-")
	o := sandbox.Options{Policy: runtime.PolicyFull, Mask: true, Readable: []string{sc.staged}}
	return proc{argv: r.sandboxArgs(o, r.bin, args...), env: env, stdin: "$" + sc.name + " " + prompt(pc), line: r.codexLine}, nil
}

// trustCodexHooks records Codex's trust for the hooks of the Run's CODEX_HOME (codex exec skips
// untrusted hooks without a word), with the code pixie init codex --trust uses.
func (r *externalRun) trustCodexHooks(ctx context.Context, home, hooksFile string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	env := append(r.baseEnv(nil), "CODEX_HOME="+home)
	c, err := codexapp.Start(ctx, codexapp.Options{Command: r.bin, Dir: r.conf, Env: env, Version: "pixie-pet"})
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "cannot record Codex's trust for Pixie's hooks: %s", r.red.clean(err.Error()))
	}
	defer c.Close()
	if _, err := codexapp.Trust(c, r.conf, hooksFile, false, func(codexapp.Hook) bool { return true }); err != nil {
		return errs.Wrap(errs.Unavailable, err, "cannot record Codex's trust for Pixie's hooks: %s", r.red.clean(err.Error()))
	}
	return nil
}

// codexEvent is the part of a codex exec --json event Pet reads.
type codexEvent struct {
	Type string `json:"type"`
	Item struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"item"`
	Usage *struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	Message string `json:"message"`
}

// codexLine reads one --json event: the last agent message is the answer, turn.completed the
// usage, turn.failed and error the failure. (Tool calls come from the session file, which also
// holds the calls a hook denied: the --json stream leaves those out.)
func (r *externalRun) codexLine(line []byte, cut bool) {
	var ev codexEvent
	if cut || json.Unmarshal(line, &ev) != nil {
		return
	}
	switch ev.Type {
	case "item.completed":
		if ev.Item.Type == "agent_message" {
			r.output = ev.Item.Text
		}
	case "turn.completed":
		if ev.Usage != nil {
			u := model.Usage{InputTokens: ev.Usage.InputTokens, OutputTokens: ev.Usage.OutputTokens}
			if r.usage != nil {
				u = r.usage.Add(u)
			}
			r.usage = &u
		}
	case "turn.failed":
		if ev.Error != nil {
			r.failure = r.red.clean(lastLine(ev.Error.Message))
		}
	case "error":
		r.failure = r.red.clean(lastLine(ev.Message))
	}
}

// rolloutLine is one line of Codex's session file.
type rolloutLine struct {
	Timestamp time.Time `json:"timestamp"`
	Type      string    `json:"type"`
	Payload   struct {
		Type      string          `json:"type"`
		Name      string          `json:"name"`
		Arguments string          `json:"arguments"`
		Input     string          `json:"input"`
		Action    json.RawMessage `json:"action"`
		CallID    string          `json:"call_id"`
		Output    json.RawMessage `json:"output"`
	} `json:"payload"`
}

// readRollout reads the tool calls and their results from the Run's session file: one step per
// model response (a token_usage_record closes it).
func (r *externalRun) readRollout() {
	path, err := findOne(filepath.Join(r.state, "codex", "sessions"), "rollout-*.jsonl")
	if err != nil {
		if !errors.Is(err, errNoRollout) {
			r.s.log.Warn("pet: cannot read Codex's session file", "err", err)
		}
		return
	}
	f, err := os.Open(path)
	if err != nil {
		r.s.log.Warn("pet: cannot read Codex's session file", "err", err)
		return
	}
	defer f.Close()
	step := 1
	br := bufio.NewReaderSize(io.LimitReader(f, maxStream), 64<<10)
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(buf)+len(chunk) <= maxLine {
			buf = append(buf, chunk...)
		} else {
			buf = append(buf[:0], "{}"...) // too long to be a line Pet reads
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		var l rolloutLine
		if json.Unmarshal(buf, &l) == nil {
			switch {
			case l.Type == "token_usage_record":
				step++
			case l.Type == "response_item":
				p := l.Payload
				switch p.Type {
				case "function_call":
					r.addCall(p.CallID, p.Name, []byte(p.Arguments), step, l.Timestamp)
				case "custom_tool_call":
					in, _ := json.Marshal(map[string]string{"input": p.Input})
					r.addCall(p.CallID, p.Name, in, step, l.Timestamp)
				case "local_shell_call", "web_search_call":
					name := strings.TrimSuffix(p.Type, "_call")
					r.addCall(p.CallID, name, p.Action, step, l.Timestamp)
				case "function_call_output", "custom_tool_call_output":
					r.setResult(p.CallID, codexOutput(p.Output), false, l.Timestamp)
				}
			}
		}
		buf = buf[:0]
		if err != nil {
			return
		}
	}
}

// codexOutput is a function_call_output's output: a string, or an object with its content.
func codexOutput(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &o) == nil && len(o.Content) > 0 {
		return blockText(o.Content)
	}
	return string(raw)
}

// prepErr is a failure to lay out the Run's private directories.
func prepErr(err error) error {
	return errs.Wrap(errs.Unavailable, err, "cannot prepare the run's directories: %s", errText(err))
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/hooks"
	"github.com/pixie-dev/pixie/server"
)

func init() {
	register(&command{name: "hook", args: "claude|codex < hook-input.json", nargs: one, summary: "agent hook adapter for Claude Code and Codex (hook input JSON on stdin)",
		help: hookHelp, flags: hookFlags, usageCode: hookExitUsage})
}

const hookHelp = `Runs as a Claude Code (claude) or Codex (codex) command hook: the hook input JSON on stdin is
sent to the Pixie server (POST /v1/hooks/claude-code?host=…), and its answer, in the fields that
host applies, is printed on stdout with exit 0. Events Pixie does not handle answer {} without
contacting the server.

When the server cannot answer (down, unreachable, timed out, or refusing the call, such as a
missing token) the adapter fails open (prints a systemMessage saying the step went on unchecked,
exit 0) or closed (exit 2 with the reason on stderr: the prompt, tool call or tool result is
blocked). Stop and SubagentStop always fail open: blocking
there would make the agent keep working. The default comes from hooks.failOpen in pixie.yaml
(PIXIE_HOOKS_FAIL_OPEN); the flags override it.

--proxy says the host's model requests go through Pixie's model-API proxy (pixie init writes it
with the proxy settings): the answers then carry no hints, which the proxy adds to the model
request outside the chat history, and the replacements a hook cannot make (a user's message, a
built-in tool's structured result) are made by the proxy in the request the model gets.`

// Exit codes of the command adapter (Claude Code's command hook protocol).
const (
	hookExitOK    = 0 // the answer (or {}) is on stdout
	hookExitBlock = 2 // blocked: stderr is the reason
	hookExitUsage = 1 // bad flags or bad input: a non-blocking error for the host
)

// hookArgs are the flags of `pixie hook`.
type hookArgs struct {
	cf                   clientFlags
	preset               string
	timeout              time.Duration
	failOpen, failClosed bool
	host                 string // hooks.HostClaudeCode or hooks.HostCodex (the verb's argument)
	proxy                bool   // the host goes through the model-API proxy (?proxy=1)
}

func hookFlags(fs *flag.FlagSet) runFunc {
	f := &hookArgs{}
	f.cf.add(fs)
	f.cf.tokenEnv = []string{"PIXIE_TOKEN"}
	fs.StringVar(&f.preset, "preset", "", "the session's preset (default: hooks.defaultPreset of the server)")
	fs.DurationVar(&f.timeout, "timeout", 0, "server call timeout (default hooks.timeout, 30s)")
	fs.BoolVar(&f.failOpen, "fail-open", false, "when the server cannot answer, let the step go on")
	fs.BoolVar(&f.failClosed, "fail-closed", false, "when the server cannot answer, block the step (exit 2)")
	fs.BoolVar(&f.proxy, "proxy", false, "the host's model requests go through Pixie's model-API proxy: hints and the replacements a hook cannot make are left to it (pixie init writes it with the proxy)")
	return func(ctx context.Context, io cmdIO, pos []string) error {
		if pos[0] != "claude" && pos[0] != "codex" {
			return usagef("the adapter is `pixie hook claude` (Claude Code) or `pixie hook codex` (Codex), not %q", pos[0])
		}
		f.host = hooks.HostClaudeCode
		if pos[0] == "codex" {
			f.host = hooks.HostCodex
		}
		if code := runHookWith(ctx, *f, io.stdin, io.stdout, io.stderr); code != 0 {
			return exitCode(code)
		}
		return nil
	}
}

func runHookWith(ctx context.Context, f hookArgs, stdin io.Reader, stdout, stderr io.Writer) int {
	if f.failOpen && f.failClosed {
		fmt.Fprintln(stderr, "pixie hook: --fail-open and --fail-closed exclude each other")
		return hookExitUsage
	}
	if err := hooks.CheckPreset(f.preset); err != nil {
		fmt.Fprintln(stderr, "pixie hook:", err)
		return hookExitUsage
	}

	input, err := io.ReadAll(io.LimitReader(stdin, hooks.MaxInputSize+1))
	if err != nil {
		fmt.Fprintln(stderr, "pixie hook: read stdin:", err)
		return hookExitUsage
	}
	if len(input) > hooks.MaxInputSize {
		fmt.Fprintf(stderr, "pixie hook: the hook input is over %d bytes\n", hooks.MaxInputSize)
		return hookExitUsage
	}
	var head struct {
		Event string `json:"hook_event_name"`
	}
	if err := json.Unmarshal(input, &head); err != nil || head.Event == "" {
		fmt.Fprintln(stderr, "pixie hook: stdin is not a hook input (a JSON object with hook_event_name)")
		return hookExitUsage
	}
	if !hooks.IsHandled(head.Event) {
		fmt.Fprintln(stdout, "{}")
		return hookExitOK
	}

	// Settings: flags, then the configuration (file and PIXIE_* environment).
	open, limit := false, 30*time.Second
	if home, err := config.ResolveHome(f.cf.home, os.Getenv); err == nil {
		if c, err := config.Load(home, os.Getenv, os.Environ(), nil); err == nil {
			open, limit = c.Hooks.FailOpen, c.Hooks.Timeout
		} else {
			fmt.Fprintln(stderr, "pixie hook: configuration ignored:", err)
		}
	}
	switch {
	case f.failOpen:
		open = true
	case f.failClosed:
		open = false
	}
	if f.timeout > 0 {
		limit = f.timeout
	}
	if limit <= 0 {
		limit = 30 * time.Second
	}
	if head.Event == hooks.EventStop || head.Event == hooks.EventSubagentStop {
		open = true
	}

	answer, err := hookCall(ctx, f.cf, f.host, f.preset, f.proxy, input, limit)
	if errs.Is(err, errs.TooLarge) {
		// Too large to check is not a server failure: the step goes on, and the user is told.
		out := hooks.Output{SystemMessage: "Pixie did not check this step: " + err.Error()}
		stdout.Write(out.Marshal())
		fmt.Fprintln(stdout)
		return hookExitOK
	}
	if err != nil {
		if open {
			fmt.Fprintf(stderr, "pixie hook: %v; failing open (the step goes on without Pixie)\n", err)
			out := hooks.Output{SystemMessage: "Pixie could not check this step, so it went on unchecked (fail-open): " + err.Error() + ". pixie doctor checks the set-up."}
			stdout.Write(out.Marshal())
			fmt.Fprintln(stdout)
			return hookExitOK
		}
		fmt.Fprintf(stderr, "Pixie could not check this step, so it is blocked (fail-closed): %v\n", err)
		return hookExitBlock
	}
	// The answer goes out in one write, and only then are the hints it carries confirmed: when
	// the host cannot read it (stdout closed or full), they go back to the queue for the next
	// step instead of being consumed unseen. If the adapter dies before either, the take's
	// lease returns them (docs/hints.md).
	_, werr := stdout.Write(append(bytes.TrimSpace(answer.body), '\n'))
	if answer.take == "" {
		if werr != nil {
			fmt.Fprintln(stderr, "pixie hook: cannot write the answer:", werr)
			return hookExitUsage
		}
		return hookExitOK
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if werr != nil {
		if _, err := answer.client.hintClose(cctx, "rollback", answer.take); err != nil {
			fmt.Fprintf(stderr, "pixie hook: cannot write the answer (%v), and returning its hints failed (%v); they come back when their lease runs out\n", werr, err)
		} else {
			fmt.Fprintf(stderr, "pixie hook: cannot write the answer (%v); the hints it carried were returned to the queue\n", werr)
		}
		return hookExitUsage
	}
	if _, err := answer.client.hintClose(cctx, "confirm", answer.take); err != nil {
		fmt.Fprintf(stderr, "pixie hook: the answer went out but confirming its hints failed (%v); they will be delivered again when their lease runs out\n", err)
	}
	return hookExitOK
}

// hookAnswer is the server's answer to a hook call, and the hint take it holds open (empty
// when the answer carries no hints).
type hookAnswer struct {
	body   []byte
	take   string
	client *apiClient
}

// hookBody collects the answer's body and its take header.
type hookBody struct {
	bytes.Buffer
	take string
}

func (b *hookBody) readHeader(h http.Header) { b.take = h.Get(server.HintTakeHeader) }

// hintClose confirms or rolls back a take (what is "confirm" or "rollback").
func (c *apiClient) hintClose(ctx context.Context, what, take string) (int, error) {
	var out struct {
		Confirmed int `json:"confirmed"`
		Restored  int `json:"restored"`
	}
	err := c.do(ctx, http.MethodPost, "/v1/hints/"+what, map[string]string{"takeId": take}, &out)
	return out.Confirmed + out.Restored, err
}

// hookCall posts the input to the server within limit and returns the answer. It asks the
// server to hold the answer's hint take open (the caller confirms it after writing the answer).
func hookCall(ctx context.Context, cf clientFlags, host, preset string, viaProxy bool, input []byte, limit time.Duration) (hookAnswer, error) {
	c, err := newClient(cf)
	if err != nil {
		return hookAnswer{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	// claude leaves the host to the input (Codex always sends turn_id, Claude Code never does),
	// so a Codex hook still written as `pixie hook claude` gets answers Codex applies.
	q := url.Values{}
	if host == hooks.HostCodex {
		q.Set("host", host)
	}
	if preset != "" {
		q.Set("preset", preset)
	}
	if viaProxy {
		q.Set("proxy", "1")
	}
	path := "/v1/hooks/claude-code"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(input))
	if err != nil {
		return hookAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(server.AdapterHeader, "1")
	req.Header.Set(server.HintHoldHeader, "1")
	var out hookBody
	if err := c.send(req, &out); err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return hookAnswer{}, fmt.Errorf("the Pixie server at %s did not answer within %s", c.base, limit)
		}
		return hookAnswer{}, err
	}
	if !json.Valid(out.Bytes()) {
		if out.take != "" { // nothing of it reaches the host: its hints go back
			cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer ccancel()
			_, _ = c.hintClose(cctx, "rollback", out.take)
		}
		return hookAnswer{}, fmt.Errorf("the Pixie server at %s answered something that is not JSON", c.base)
	}
	return hookAnswer{body: out.Bytes(), take: out.take, client: c}, nil
}

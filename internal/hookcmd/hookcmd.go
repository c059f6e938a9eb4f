// Package hookcmd is the command hook adapter: `pixie hook claude|codex` and pixie-hook
// (cmd/pixie-hook), the small program that pixie init writes into the hosts' settings when it
// lies beside pixie, run exactly this code. It reads the hook input on stdin, posts it to the
// server (POST /v1/hooks/claude-code), and prints the answer in the fields the host applies, or
// fails open or closed when the server cannot answer (docs/agents/claude-code.md, "The command
// adapter").
//
// It holds the hint take the answer carries: the answer goes out in one write, and only then is
// the take confirmed, or rolled back when the answer could not be written.
//
// Its imports stay small (internal/hookwire, internal/serverref, internal/minihttp, no net/http,
// no crypto, no YAML): a host runs the adapter once per hook event, and its start is most of
// what it adds to the hook (docs/bench.md, "The command adapter"). What only the whole pixie
// binary has, the configuration reader and TLS, comes in a Binary: pixie passes its own, and
// pixie-hook asks pixie for the settings (and hands an https call to `pixie hook`).
package hookcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/companion"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/hookwire"
	"github.com/pixie-dev/pixie/internal/minihttp"
	"github.com/pixie-dev/pixie/internal/pixiehome"
	"github.com/pixie-dev/pixie/internal/serverref"
)

// Help says what the adapter does, after its synopsis.
const Help = `Runs as a Claude Code (claude) or Codex (codex) command hook: the hook input JSON on stdin is
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

// Synopsis is the adapter's arguments after its name.
const Synopsis = "claude|codex [flags] < hook-input.json"

// Exit codes of the command adapter (Claude Code's command hook protocol).
const (
	ExitOK    = 0 // the answer (or {}) is on stdout
	ExitBlock = 2 // blocked: stderr is the reason
	ExitUsage = 1 // bad flags or bad input: a non-blocking error for the host
)

// Args are the adapter's flags.
type Args struct {
	Client               serverref.Flags
	Preset               string
	Timeout              time.Duration
	FailOpen, FailClosed bool
	// Proxy says the host goes through the model-API proxy (?proxy=1).
	Proxy bool
}

// Define defines the adapter's flags on fs.
func (a *Args) Define(fs *flag.FlagSet) {
	serverref.DefineFlags(fs, &a.Client.URL, &a.Client.Token, &a.Client.Home)
	a.Client.TokenEnv = []string{"PIXIE_TOKEN"}
	fs.StringVar(&a.Preset, "preset", "", "the session's preset (default: hooks.defaultPreset of the server)")
	fs.DurationVar(&a.Timeout, "timeout", 0, "server call timeout (default hooks.timeout, 30s)")
	fs.BoolVar(&a.FailOpen, "fail-open", false, "when the server cannot answer, let the step go on")
	fs.BoolVar(&a.FailClosed, "fail-closed", false, "when the server cannot answer, block the step (exit 2)")
	fs.BoolVar(&a.Proxy, "proxy", false, "the host's model requests go through Pixie's model-API proxy: hints and the replacements a hook cannot make are left to it (pixie init writes it with the proxy)")
}

// Settings are the configuration's values the adapter uses (config.Load's addr,
// hooks.failOpen and hooks.timeout: the file and the PIXIE_* environment).
type Settings struct {
	Addr     string
	FailOpen bool
	Timeout  time.Duration
}

// Binary is what the program running the adapter brings beyond this package. The pixie binary
// gives both from its own packages; pixie-hook, which must start small, asks pixie for the
// settings and hands https calls to it.
type Binary struct {
	// Settings reads the configuration of home. It is asked only when a flag does not already
	// say: the address without --url (or $PIXIE_SERVER_URL), the time limit without --timeout,
	// and fail-open or closed when the server cannot answer and no flag says which.
	Settings func(ctx context.Context, home string) (Settings, error)
	// DialTLS opens a TLS connection for an https server URL (nil: Handoff, else an error).
	DialTLS func(ctx context.Context, network, addr, serverName string) (net.Conn, error)
	// Handoff, when DialTLS is nil, runs the call in a program that has it (pixie-hook: exec
	// `pixie hook` with the same arguments, stdin still unread). It returns only on failure.
	Handoff func() error
}

// Host returns the host the adapter's argument names: hookwire.HostClaudeCode for claude,
// hookwire.HostCodex for codex.
func Host(arg string) (string, error) {
	switch arg {
	case "claude":
		return hookwire.HostClaudeCode, nil
	case "codex":
		return hookwire.HostCodex, nil
	}
	return "", fmt.Errorf("the adapter is `pixie hook claude` (Claude Code) or `pixie hook codex` (Codex), not %q", arg)
}

// Run runs the adapter for host with the input on stdin and returns its exit code. version is
// the CLI's, named when the server seems older; bin is what the running program brings.
func Run(ctx context.Context, a Args, host string, stdin io.Reader, stdout, stderr io.Writer, version string, bin Binary) int {
	if a.FailOpen && a.FailClosed {
		fmt.Fprintln(stderr, "pixie hook: --fail-open and --fail-closed exclude each other")
		return ExitUsage
	}
	if err := hookwire.CheckPreset(a.Preset); err != nil {
		fmt.Fprintln(stderr, "pixie hook:", err)
		return ExitUsage
	}
	if bin.DialTLS == nil && bin.Handoff != nil && isHTTPS(serverref.URLFlagOrEnv(a.Client)) {
		// Before stdin is read: the program handed to reads the same input. When it cannot be
		// started, the call goes on and fails as a server that cannot be reached does (open or
		// closed, as configured), rather than as a usage error the host would let pass.
		err := bin.Handoff()
		fmt.Fprintln(stderr, "pixie hook: an https server URL needs `pixie hook`, and it could not be started:", err)
	}

	input, err := io.ReadAll(io.LimitReader(stdin, hookwire.MaxInputSize+1))
	if err != nil {
		fmt.Fprintln(stderr, "pixie hook: read stdin:", err)
		return ExitUsage
	}
	if len(input) > hookwire.MaxInputSize {
		fmt.Fprintf(stderr, "pixie hook: the hook input is over %d bytes\n", hookwire.MaxInputSize)
		return ExitUsage
	}
	var head struct {
		Event string `json:"hook_event_name"`
	}
	if err := json.Unmarshal(input, &head); err != nil || head.Event == "" {
		fmt.Fprintln(stderr, "pixie hook: stdin is not a hook input (a JSON object with hook_event_name)")
		return ExitUsage
	}
	if !hookwire.IsHandled(head.Event) {
		fmt.Fprintln(stdout, "{}")
		return ExitOK
	}

	// Settings: flags, then the configuration (file and PIXIE_* environment), read only when a
	// flag does not say (and at most once). When it cannot be read, fail closed with 30 s.
	settings := sync.OnceValue(func() Settings {
		s := Settings{Timeout: 30 * time.Second}
		home, err := pixiehome.Resolve(a.Client.Home, os.Getenv)
		if err == nil && bin.Settings != nil {
			var got Settings
			if got, err = bin.Settings(ctx, home); err == nil {
				s = got
			}
		} else if err == nil {
			err = errors.New("this program cannot read it")
		}
		if err != nil {
			fmt.Fprintln(stderr, "pixie hook: configuration ignored:", err)
		}
		return s
	})
	limit := a.Timeout
	if limit <= 0 {
		limit = settings().Timeout
	}
	if limit <= 0 {
		limit = 30 * time.Second
	}
	failOpen := func() bool {
		switch {
		case head.Event == hookwire.EventStop || head.Event == hookwire.EventSubagentStop:
			return true
		case a.FailOpen:
			return true
		case a.FailClosed:
			return false
		}
		return settings().FailOpen
	}
	addr := func(string) (string, error) {
		if s := settings(); s.Addr != "" {
			return s.Addr, nil
		}
		return "", errors.New("no addr in the configuration")
	}

	answer, err := call(ctx, a.Client, version, host, a.Preset, a.Proxy, input, limit, addr, bin)
	if errs.Is(err, errs.TooLarge) {
		// Too large to check is not a server failure: the step goes on, and the user is told.
		stdout.Write(hookwire.SystemMessage("Pixie did not check this step: " + err.Error()))
		fmt.Fprintln(stdout)
		return ExitOK
	}
	if err != nil {
		if failOpen() {
			fmt.Fprintf(stderr, "pixie hook: %v; failing open (the step goes on without Pixie)\n", err)
			stdout.Write(hookwire.SystemMessage("Pixie could not check this step, so it went on unchecked (fail-open): " + err.Error() + ". pixie doctor checks the set-up."))
			fmt.Fprintln(stdout)
			return ExitOK
		}
		fmt.Fprintf(stderr, "Pixie could not check this step, so it is blocked (fail-closed): %v\n", err)
		return ExitBlock
	}
	// The answer goes out in one write, and only then are the hints it carries confirmed: when
	// the host cannot read it (stdout closed or full), they go back to the queue for the next
	// step instead of being consumed unseen. If the adapter dies before either, the take's
	// lease returns them (docs/hints.md).
	_, werr := stdout.Write(append(bytes.TrimSpace(answer.body), '\n'))
	if answer.take == "" {
		if werr != nil {
			fmt.Fprintln(stderr, "pixie hook: cannot write the answer:", werr)
			return ExitUsage
		}
		return ExitOK
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if werr != nil {
		if _, err := hintClose(cctx, answer.server, "rollback", answer.take); err != nil {
			fmt.Fprintf(stderr, "pixie hook: cannot write the answer (%v), and returning its hints failed (%v); they come back when their lease runs out\n", werr, err)
		} else {
			fmt.Fprintf(stderr, "pixie hook: cannot write the answer (%v); the hints it carried were returned to the queue\n", werr)
		}
		return ExitUsage
	}
	if _, err := hintClose(cctx, answer.server, "confirm", answer.take); err != nil {
		fmt.Fprintf(stderr, "pixie hook: the answer went out but confirming its hints failed (%v); they will be delivered again when their lease runs out\n", err)
	}
	return ExitOK
}

func isHTTPS(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && strings.EqualFold(u.Scheme, "https")
}

// answer is the server's answer to a hook call, and the hint take it holds open (empty when
// the answer carries no hints).
type answer struct {
	body   []byte
	take   string
	server server
}

// server is the resolved server with the client that reaches it.
type server struct {
	serverref.Ref
	http minihttp.Client
}

// send sends one request with the token and returns the answer's body and headers; a non-2xx
// answer is an *errs.Error with the server's code and message.
func (s server) send(ctx context.Context, method, path string, header [][2]string, body []byte) (*minihttp.Response, error) {
	header = append(header, [2]string{"Authorization", "Bearer " + s.Token})
	resp, err := s.http.Do(ctx, minihttp.Request{Method: method, URL: s.Base + path, Header: header, Body: body})
	if err != nil {
		return nil, s.Unreachable(err)
	}
	if resp.Status/100 != 2 {
		return nil, s.AnswerError(resp.Status, resp.Body)
	}
	return resp, nil
}

// hintClose confirms or rolls back a take (what is "confirm" or "rollback").
func hintClose(ctx context.Context, s server, what, take string) (int, error) {
	in, err := json.Marshal(map[string]string{"takeId": take})
	if err != nil {
		return 0, err
	}
	resp, err := s.send(ctx, "POST", "/v1/hints/"+what, [][2]string{{"Content-Type", "application/json"}}, in)
	if err != nil {
		return 0, err
	}
	var out struct {
		Confirmed int `json:"confirmed"`
		Restored  int `json:"restored"`
	}
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		return 0, fmt.Errorf("decode answer: %w", err)
	}
	return out.Confirmed + out.Restored, nil
}

// call posts the input to the server within limit and returns the answer. It asks the server
// to hold the answer's hint take open (the caller confirms it after writing the answer).
func call(ctx context.Context, f serverref.Flags, version, host, preset string, viaProxy bool, input []byte, limit time.Duration, addr serverref.AddrFunc, bin Binary) (answer, error) {
	ref, err := serverref.Resolve(f, version, addr)
	if err != nil {
		return answer{}, err
	}
	s := server{Ref: ref, http: minihttp.Client{DialTLS: bin.DialTLS}}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	// claude leaves the host to the input (Codex always sends turn_id, Claude Code never does),
	// so a Codex hook still written as `pixie hook claude` gets answers Codex applies.
	q := url.Values{}
	if host == hookwire.HostCodex {
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
	resp, err := s.send(ctx, "POST", path, [][2]string{{"Content-Type", "application/json"}, {hookwire.AdapterHeader, "1"}, {hookwire.HintHoldHeader, "1"}}, input)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return answer{}, fmt.Errorf("the Pixie server at %s did not answer within %s", s.Base, limit)
		}
		return answer{}, err
	}
	take := resp.Get(hookwire.HintTakeHeader)
	if !json.Valid(resp.Body) {
		if take != "" { // nothing of it reaches the host: its hints go back
			cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer ccancel()
			_, _ = hintClose(cctx, s, "rollback", take)
		}
		return answer{}, fmt.Errorf("the Pixie server at %s answered something that is not JSON", s.Base)
	}
	return answer{body: resp.Body, take: take, server: s}, nil
}

// Main is pixie-hook's main: `pixie-hook claude|codex [flags] < hook-input.json`, the same as
// `pixie hook claude|codex [flags]`. Flags may come before or after the host. It returns the
// exit code: ExitUsage (with the problem and the synopsis on stderr) for wrong arguments. With
// the single argument companion.FingerprintArg it prints Fingerprint (for Find).
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, version string, bin Binary) int {
	if len(args) == 1 && args[0] == companion.FingerprintArg {
		fmt.Fprintln(stdout, Fingerprint())
		return ExitOK
	}
	var a Args
	fs := flag.NewFlagSet("pixie-hook", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a.Define(fs)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(stdout, "usage: pixie-hook %s\n\n%s\n\nFlags:\n", Synopsis, Help)
				fs.SetOutput(stdout)
				fs.PrintDefaults()
				return ExitOK
			}
			return usage(stderr, err.Error())
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			pos = append(pos, args[1:]...)
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	if len(pos) != 1 {
		return usage(stderr, fmt.Sprintf("want 1 argument (claude or codex), got %d", len(pos)))
	}
	host, err := Host(pos[0])
	if err != nil {
		return usage(stderr, err.Error())
	}
	return Run(ctx, a, host, stdin, stdout, stderr, version, bin)
}

func usage(stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "pixie-hook: %s\nusage: pixie-hook %s\n", strings.TrimSpace(msg), Synopsis)
	return ExitUsage
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/hint"
)

func init() {
	register(verb{name: "hint", usage: "the hint queue: pixie hint send TEXT [--session S] | ls | rm ID | watch", run: cmdHint})
}

const hintUsage = `usage:
  pixie hint send TEXT [--session S]   queue a hint (TEXT "-" reads stdin); no --session: every session
  pixie hint ls [--all] [--json]       pending hints (--all: and recently consumed)
  pixie hint rm ID                     cancel a pending hint
  pixie hint watch [--json]            follow the event stream until interrupted
connection flags (every subcommand): --url, --token, --home`

// cmdHint runs `pixie hint …`.
func cmdHint(ctx context.Context, args []string) int {
	return runHint(ctx, args, os.Stdin, os.Stdout, os.Stderr)
}

func runHint(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, hintUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("hint "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.add(fs)
	session := fs.String("session", "", "target session id (send); empty means every session")
	all := fs.Bool("all", false, "also list recently consumed hints (ls)")
	asJSON := fs.Bool("json", false, "print JSON (ls, watch)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return 2
	}
	want := map[string]int{"send": 1, "ls": 0, "rm": 1, "watch": 0}
	n, known := want[sub]
	if !known {
		fmt.Fprintf(stderr, "pixie hint: unknown subcommand %q\n%s\n", sub, hintUsage)
		return 2
	}
	if len(pos) != n {
		fmt.Fprintf(stderr, "pixie hint %s: want %d argument(s), got %d\n%s\n", sub, n, len(pos), hintUsage)
		return 2
	}
	c, err := newClient(cf)
	if err != nil {
		return failTo(stderr, err)
	}
	switch sub {
	case "send":
		err = hintSend(ctx, c, stdin, stdout, pos[0], *session)
	case "ls":
		err = hintList(ctx, c, stdout, *all, *asJSON)
	case "rm":
		err = c.do(ctx, http.MethodDelete, "/v1/hints/"+url.PathEscape(pos[0]), nil, nil)
		if err == nil {
			fmt.Fprintln(stdout, "cancelled", pos[0])
		}
	case "watch":
		err = hintWatch(ctx, c, stdout, stderr, *asJSON)
	}
	if err != nil {
		return failTo(stderr, err)
	}
	return 0
}

// parseInterspersed parses flags that may come after positional arguments
// (`send "text" --session s`) and returns the positionals.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func failTo(w io.Writer, err error) int {
	fmt.Fprintln(w, "pixie:", err)
	return 1
}

func hintSend(ctx context.Context, c *apiClient, stdin io.Reader, stdout io.Writer, text, session string) error {
	if text == "-" {
		raw, err := io.ReadAll(io.LimitReader(stdin, 1<<20))
		if err != nil {
			return fmt.Errorf("read stdin: %w", err)
		}
		text = string(raw)
	}
	var r struct {
		OK      bool        `json:"ok"`
		HintID  string      `json:"hintId"`
		Running bool        `json:"running"`
		Dropped []hint.Hint `json:"dropped"`
	}
	if err := c.do(ctx, http.MethodPost, "/v1/hints", map[string]string{"text": text, "sessionId": session}, &r); err != nil {
		return err
	}
	who := "every session"
	if session != "" {
		who = "session " + session
	}
	when := "the next task step will pick it up"
	if r.Running {
		when = "the agent will see it at its next step"
	}
	fmt.Fprintf(stdout, "queued %s for %s: %s\n", r.HintID, who, when)
	for _, d := range r.Dropped {
		fmt.Fprintf(stdout, "dropped %s (the oldest pending hint, over the backlog cap): %s\n", d.ID, oneLine(d.Text, 60))
	}
	return nil
}

func hintList(ctx context.Context, c *apiClient, stdout io.Writer, all, asJSON bool) error {
	var snap hint.Snapshot
	if err := c.do(ctx, http.MethodGet, "/v1/hints/state", nil, &snap); err != nil {
		return err
	}
	if !all {
		snap.Consumed = []hint.Hint{}
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(snap)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tSESSION\tCREATED\tTEXT")
	for _, h := range append(snap.Pending, snap.Consumed...) {
		sess := h.SessionID
		if sess == "" {
			sess = "(all)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", h.ID, h.State, sess, h.CreatedAt.Local().Format(time.DateTime), oneLine(h.Text, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d pending (revision %d)\n", len(snap.Pending), snap.Revision)
	return nil
}

// hintWatch follows the event stream, printing each frame, and reconnects after the delay the
// server asked for when the connection drops. It returns nil when ctx ends, and an error when
// the server refuses the stream (auth, missing route).
func hintWatch(ctx context.Context, c *apiClient, stdout, stderr io.Writer, asJSON bool) error {
	retry := 3 * time.Second
	for {
		err := watchOnce(ctx, c, stdout, asJSON, &retry)
		if ctx.Err() != nil {
			return nil
		}
		var ce *errs.Error
		if errors.As(err, &ce) && ce.Code != errs.Unavailable {
			return err
		}
		fmt.Fprintf(stderr, "pixie: stream interrupted (%v); reconnecting in %v\n", err, retry)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retry):
		}
	}
}

func watchOnce(ctx context.Context, c *apiClient, stdout io.Writer, asJSON bool, retry *time.Duration) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/hints/events", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "text/event-stream")
	// No client timeout: the stream is meant to stay open.
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "cannot reach the Pixie server at %s", c.base)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var eb struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(raw, &eb) == nil && eb.Error.Code != "" {
			return errs.New(errs.Code(eb.Error.Code), "HTTP %d: %s", resp.StatusCode, eb.Error.Message)
		}
		return errs.New(errs.Upstream, "HTTP %d from the event stream", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	var event string
	var data []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return errs.Wrap(errs.Unavailable, err, "the event stream ended")
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if len(data) > 0 {
				printFrame(stdout, event, strings.Join(data, "\n"), asJSON)
			}
			event, data = "", nil
		case strings.HasPrefix(line, ":"):
			// comments: the opening line and heartbeat pings
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				event = value
			case "data":
				data = append(data, value)
			case "retry":
				if ms, err := strconv.Atoi(value); err == nil && ms > 0 {
					*retry = time.Duration(ms) * time.Millisecond
				}
			}
		}
	}
}

func printFrame(w io.Writer, event, data string, asJSON bool) {
	if asJSON {
		raw, _ := json.Marshal(map[string]any{"event": event, "data": json.RawMessage(data)})
		fmt.Fprintln(w, string(raw))
		return
	}
	switch event {
	case hint.EventState:
		var s hint.Snapshot
		if json.Unmarshal([]byte(data), &s) == nil {
			fmt.Fprintf(w, "state     revision %d: %d pending, %d recently consumed\n", s.Revision, len(s.Pending), len(s.Consumed))
			return
		}
	case hint.EventHint:
		var a hint.Action
		if json.Unmarshal([]byte(data), &a) == nil {
			sess := a.Hint.SessionID
			if sess == "" {
				sess = "(all)"
			}
			extra := ""
			if a.Reason != "" {
				extra = " (" + a.Reason + ")"
			}
			fmt.Fprintf(w, "%-9s %s %s%s: %s\n", a.Kind, a.Hint.ID, sess, extra, oneLine(a.Hint.Text, 60))
			return
		}
	}
	fmt.Fprintf(w, "%s %s\n", event, data)
}

// oneLine shows text on one line, cut to n code points.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

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
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/hint"
)

func init() {
	register(&command{name: "hint", summary: "the hint queue: send, ls, rm, watch", subs: []*command{
		{name: "send", args: "TEXT", nargs: one, summary: `queue a hint (TEXT "-" reads stdin)`,
			help: `Queues a hint (TEXT "-" reads stdin). With --session it waits for that session's next
step. Without --session it is a global hint: the first session that takes a step sees it, once
(it is not copied to every session).`,
			flags: func(fs *flag.FlagSet) runFunc {
				session := fs.String("session", "", "the target session id; empty: the first session that takes a step")
				return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, pos []string) error {
					return hintSend(ctx, c, io.stdin, io.stdout, pos[0], *session)
				})
			}},
		{name: "ls", summary: "pending hints (--all: and recently consumed)", flags: func(fs *flag.FlagSet) runFunc {
			all := fs.Bool("all", false, "also list recently consumed hints")
			asJSON := fs.Bool("json", false, "print JSON")
			return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, _ []string) error {
				return hintList(ctx, c, io.stdout, *all, *asJSON)
			})
		}},
		{name: "rm", args: "ID", nargs: one, summary: "cancel a pending hint", flags: func(fs *flag.FlagSet) runFunc {
			return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, pos []string) error {
				if err := c.do(ctx, http.MethodDelete, "/v1/hints/"+url.PathEscape(pos[0]), nil, nil); err != nil {
					return err
				}
				fmt.Fprintln(io.stdout, "cancelled", pos[0])
				return nil
			})
		}},
		{name: "watch", summary: "follow the event stream until interrupted", flags: func(fs *flag.FlagSet) runFunc {
			asJSON := fs.Bool("json", false, "print JSON")
			return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, _ []string) error {
				return hintWatch(ctx, c, io.stdout, io.stderr, *asJSON)
			})
		}},
	}})
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
	if session == "" {
		// A global hint is taken once, by whichever session steps first (spec: hint.md).
		fmt.Fprintf(stdout, "queued %s as a global hint: the first session that takes a step sees it, once (it is not copied to every session)\n", r.HintID)
	} else {
		when := "the next task step will pick it up"
		if r.Running {
			when = "the agent will see it at its next step"
		}
		fmt.Fprintf(stdout, "queued %s for session %s: %s\n", r.HintID, session, when)
	}
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
		return writeJSON(stdout, snap)
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
	if err := c.ready(); err != nil {
		return err
	}
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
	if err := c.ready(); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+"/v1/hints/events", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "text/event-stream")
	// No client timeout: the stream is meant to stay open.
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return c.Unreachable(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return c.AnswerError(resp.StatusCode, raw)
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

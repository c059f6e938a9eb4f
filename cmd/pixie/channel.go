package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
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

	"github.com/pixie-dev/pixie/internal/channel/lark"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/server"
)

// larkLeaf is one `pixie lark` subcommand: key is its name in larkRun ("allow add"), defs
// defines the flags it takes.
func larkLeaf(key, args string, nargs [2]int, summary string, defs func(fs *flag.FlagSet, f *larkFlags)) *command {
	name := key
	if i := strings.LastIndexByte(key, ' '); i >= 0 {
		name = key[i+1:]
	}
	return &command{name: name, args: args, nargs: nargs, summary: summary, flags: func(fs *flag.FlagSet) runFunc {
		f := &larkFlags{}
		if defs != nil {
			defs(fs, f)
		}
		return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, pos []string) error {
			return larkRun(ctx, c, key, pos, *f, io.stdin, io.stdout)
		})
	}}
}

func larkJSON(fs *flag.FlagSet, f *larkFlags) { fs.BoolVar(&f.asJSON, "json", false, "print JSON") }

func larkReason(fs *flag.FlagSet, f *larkFlags) {
	fs.StringVar(&f.reason, "reason", "", "the reason recorded")
}

func init() {
	register(&command{name: "lark", summary: "the Lark channel: binding, allowlist, pairing, Loci, sessions, the external executor", subs: []*command{
		larkLeaf("status", "", [2]int{}, "binding, availability and why not, drop counts", larkJSON),
		larkLeaf("bind", "", [2]int{}, "bind a bot; reads the app secret, the verification token and (optionally) the encrypt key from stdin, one per line",
			func(fs *flag.FlagSet, f *larkFlags) { fs.StringVar(&f.appID, "app-id", "", "the app id (cli_…)") }),
		larkLeaf("unbind", "", [2]int{}, "remove the binding and its secrets", nil),
		larkLeaf("pair", "", [2]int{}, "mint a five-minute /pair code (or --cancel the pending one)",
			func(fs *flag.FlagSet, f *larkFlags) {
				fs.BoolVar(&f.cancel, "cancel", false, "cancel the pending code")
			}),
		{name: "allow", summary: "the allowlist", subs: []*command{
			larkLeaf("allow ls", "", [2]int{}, "who may ask", larkJSON),
			larkLeaf("allow add", "OPEN_ID", one, "allow someone", func(fs *flag.FlagSet, f *larkFlags) {
				fs.StringVar(&f.name, "name", "", "a display label")
				fs.BoolVar(&f.owner, "owner", false, "mark as the owner (the person the Q&A group action adds)")
			}),
			larkLeaf("allow rm", "OPEN_ID", one, "remove someone", nil),
			larkLeaf("allow owner", "OPEN_ID", one, "make someone the owner", nil),
		}},
		larkLeaf("loci", "", [2]int{}, "every Locus with its sessions and current delivery", larkJSON),
		{name: "locus", summary: "one Locus", subs: []*command{
			larkLeaf("locus show", "ID", one, "one Locus", nil),
			larkLeaf("locus archive", "ID", one, "archive a Locus", larkReason),
			larkLeaf("locus cancel", "ID", one, "cancel a Locus's current delivery", larkReason),
			larkLeaf("locus tier", "ID read|shell", two, "the tool tier of its child", nil),
			larkLeaf("locus executor", "ID builtin|external", two, "who serves its deliveries", nil),
		}},
		larkLeaf("sessions", "", [2]int{}, "main sessions (/bind targets)", larkJSON),
		{name: "session", summary: "one main session", subs: []*command{
			larkLeaf("session add", "ID", one, "add a main session", func(fs *flag.FlagSet, f *larkFlags) {
				fs.StringVar(&f.workspace, "workspace", "", "the session's workspace (absolute)")
			}),
			larkLeaf("session archive", "ID", one, "archive a main session", nil),
		}},
		larkLeaf("delivery", "CHILD", one, "the current delivery of a child (external executor)", func(fs *flag.FlagSet, f *larkFlags) {
			fs.IntVar(&f.wait, "wait", 0, "wait up to this many seconds for one (max 60)")
		}),
		larkLeaf("finish", "CHILD DELIVERY", two, "end a delivery with --reply TEXT|- or --no-reply REASON", func(fs *flag.FlagSet, f *larkFlags) {
			fs.Func("reply", `the reply body ("-" reads stdin)`, func(v string) error { f.reply, f.replySet = v, true; return nil })
			fs.Func("no-reply", "end without a reply, for this reason", func(v string) error { f.noReply, f.noReplySet = v, true; return nil })
		}),
		larkLeaf("wait", "CHILD DELIVERY", two, "move a delivery's deadline", func(fs *flag.FlagSet, f *larkFlags) {
			fs.IntVar(&f.extend, "extend", 0, "seconds from now (default 3600, capped at 24h after acceptance)")
		}),
		larkLeaf("question", "ID", one, "a child's question to its main session: its state and answer", nil),
		larkLeaf("answer", "QUESTION", one, "answer a child's question as its main session: --session S --answer TEXT|-", func(fs *flag.FlagSet, f *larkFlags) {
			fs.StringVar(&f.session, "session", "", "the main session the question was sent to (default $CLAUDE_CODE_SESSION_ID)")
			fs.StringVar(&f.answer, "answer", "", `the answer ("-" reads stdin)`)
		}),
		larkLeaf("qa", "SESSION", one, "open (or return) the session's Q&A group", func(fs *flag.FlagSet, f *larkFlags) {
			fs.StringVar(&f.workspace, "workspace", "", "the session's workspace (absolute)")
			fs.StringVar(&f.openID, "open-id", "", "the person to add (default: the allowlist's owner)")
		}),
	}})
}

type larkFlags struct {
	asJSON, owner, cancel                  bool
	appID, name, reason, workspace, openID string
	session, answer                        string
	reply, noReply                         string
	wait, extend                           int
	replySet, noReplySet                   bool
}

// runLark runs `pixie lark …` (the tests' entry point).
func runLark(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return executeVerb(ctx, "lark", args, cmdIO{stdin, stdout, stderr})
}

func larkRun(ctx context.Context, c *apiClient, cmd string, pos []string, f larkFlags, stdin io.Reader, stdout io.Writer) error {
	const base = "/v1/channel/lark"
	esc := url.PathEscape
	show := func(method, path string, in any) error {
		var out map[string]any
		if err := c.do(ctx, method, base+path, in, &out); err != nil {
			return err
		}
		_ = writeJSON(stdout, out)
		return nil
	}
	switch cmd {
	case "status":
		var st lark.Status
		if err := c.do(ctx, http.MethodGet, base, nil, &st); err != nil {
			return err
		}
		if f.asJSON {
			_ = writeJSON(stdout, st)
			return nil
		}
		printLarkStatus(stdout, st)
	case "bind":
		if f.appID == "" {
			return errs.New(errs.Invalid, "--app-id is required")
		}
		lines, err := larkSecretLines(stdin, 3)
		if err != nil {
			return err
		}
		if len(lines) < 2 {
			return errs.New(errs.Invalid, "stdin must hold the app secret and the verification token (and optionally the encrypt key), one per line")
		}
		req := lark.BindRequest{AppID: f.appID, AppSecret: lines[0], VerificationToken: lines[1]}
		if len(lines) > 2 {
			req.EncryptKey = lines[2]
		}
		var st lark.Status
		if err := c.do(ctx, http.MethodPut, base+"/binding", req, &st); err != nil {
			return err
		}
		printLarkStatus(stdout, st)
	case "unbind":
		return c.do(ctx, http.MethodDelete, base+"/binding", nil, nil)
	case "pair":
		if f.cancel {
			return c.do(ctx, http.MethodDelete, base+"/pairing", nil, nil)
		}
		var pc lark.PairingCode
		if err := c.do(ctx, http.MethodPost, base+"/pairing", nil, &pc); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Send this to the bot in a direct chat before %s (single use):\n\n  %s\n\nAnyone who sends it is added to the allowlist.\n",
			pc.ExpiresAt.Local().Format("15:04:05"), pc.Command)
	case "allow ls":
		var al struct {
			Entries []lark.AllowEntry `json:"entries"`
		}
		if err := c.do(ctx, http.MethodGet, base+"/allowlist", nil, &al); err != nil {
			return err
		}
		if f.asJSON {
			_ = writeJSON(stdout, al)
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "OPEN_ID\tNAME\tOWNER\tVIA\tADDED")
		for _, e := range al.Entries {
			fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\n", e.OpenID, e.Name, e.Owner, e.Via, e.AddedAt.Local().Format(time.DateTime))
		}
		return tw.Flush()
	case "allow add":
		return show(http.MethodPost, "/allowlist", lark.AllowRequest{OpenID: pos[0], Name: f.name, Owner: f.owner})
	case "allow rm":
		return c.do(ctx, http.MethodDelete, base+"/allowlist/"+esc(pos[0]), nil, nil)
	case "allow owner":
		return show(http.MethodPatch, "/allowlist/"+esc(pos[0]), map[string]bool{"owner": true})
	case "loci":
		var ls struct {
			Loci []lark.LocusView `json:"loci"`
		}
		if err := c.do(ctx, http.MethodGet, base+"/loci", nil, &ls); err != nil {
			return err
		}
		if f.asJSON {
			_ = writeJSON(stdout, ls)
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "LOCUS\tENTRY\tSTATE\tSESSION\tCHILD\tEXECUTOR\tTIER\tCURRENT\tQUEUED")
		for _, l := range ls.Loci {
			cur := "-"
			if l.Current != "" {
				cur = l.Current
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", l.ID, l.Entry, l.State, larkShort(l.MainSessionID), l.ChildID, l.Executor, l.ToolTier, cur, l.Queued)
		}
		return tw.Flush()
	case "locus show":
		return show(http.MethodGet, "/loci/"+esc(pos[0]), nil)
	case "locus archive":
		return show(http.MethodPost, "/loci/"+esc(pos[0])+"/archive", map[string]string{"reason": f.reason})
	case "locus cancel":
		return show(http.MethodPost, "/loci/"+esc(pos[0])+"/cancel", map[string]string{"reason": f.reason})
	case "locus tier":
		return show(http.MethodPatch, "/loci/"+esc(pos[0]), lark.LocusUpdate{ToolTier: pos[1]})
	case "locus executor":
		return show(http.MethodPatch, "/loci/"+esc(pos[0]), lark.LocusUpdate{Executor: pos[1]})
	case "sessions":
		var ss struct {
			Sessions []lark.Session `json:"sessions"`
		}
		if err := c.do(ctx, http.MethodGet, base+"/sessions", nil, &ss); err != nil {
			return err
		}
		if f.asJSON {
			_ = writeJSON(stdout, ss)
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SHORT\tID\tWORKSPACE\tAUTO\tARCHIVED\tQA GROUP")
		for _, s := range ss.Sessions {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%v\t%s\n", s.ShortID, s.ID, s.Workspace, s.Auto, s.Archived, s.QAChatID)
		}
		return tw.Flush()
	case "session add":
		return show(http.MethodPost, "/sessions", lark.SessionRequest{ID: pos[0], Workspace: f.workspace})
	case "session archive":
		return show(http.MethodPost, "/sessions/"+esc(pos[0])+"/archive", nil)
	case "delivery":
		return show(http.MethodGet, "/children/"+esc(pos[0])+"/delivery?wait="+strconv.Itoa(f.wait), nil)
	case "finish":
		req := lark.FinishRequest{DeliveryID: pos[1]}
		switch {
		case f.replySet == f.noReplySet:
			return errs.New(errs.Invalid, "give exactly one of --reply and --no-reply")
		case f.replySet && f.reply == "-":
			raw, err := io.ReadAll(io.LimitReader(stdin, 1<<20))
			if err != nil {
				return err
			}
			req.Reply = string(raw)
		case f.replySet:
			req.Reply = f.reply
		default:
			req.NoReply, req.Reason = true, f.noReply
		}
		return show(http.MethodPost, "/children/"+esc(pos[0])+"/finish", req)
	case "wait":
		return show(http.MethodPost, "/children/"+esc(pos[0])+"/wait", lark.WaitRequest{DeliveryID: pos[1], ExtendSeconds: int64(f.extend)})
	case "question":
		return show(http.MethodGet, "/questions/"+esc(pos[0]), nil)
	case "answer":
		session := f.session
		if session == "" {
			session = os.Getenv("CLAUDE_CODE_SESSION_ID")
		}
		if session == "" {
			return errs.New(errs.Invalid, "name the main session the question was sent to: --session S")
		}
		text := f.answer
		if text == "-" {
			raw, err := io.ReadAll(io.LimitReader(stdin, 1<<20))
			if err != nil {
				return err
			}
			text = string(raw)
		}
		raw, err := json.Marshal(lark.AnswerRequest{Answer: text})
		if err != nil {
			return err
		}
		if err := c.ready(); err != nil { // resolves c.Base
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Base+base+"/questions/"+esc(pos[0])+"/answer", bytes.NewReader(raw))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(server.SessionHeader, session)
		var out map[string]any
		if err := c.send(req, &out); err != nil {
			return err
		}
		_ = writeJSON(stdout, out)
		return nil
	case "qa":
		return show(http.MethodPost, "/qa-group", lark.QASource{SessionID: pos[0], Workspace: f.workspace, OpenID: f.openID})
	}
	return nil
}

// readSecretLines reads up to n non-empty lines from r (secrets never come from argv, where
// other users could see them).
func larkSecretLines(r io.Reader, n int) ([]string, error) {
	sc := bufio.NewScanner(io.LimitReader(r, 64<<10))
	var out []string
	for sc.Scan() && len(out) < n {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}

func printLarkStatus(w io.Writer, st lark.Status) {
	state := "available"
	if !st.Available {
		state = "unavailable: " + st.Problem
	}
	fmt.Fprintf(w, "Lark channel: %s\n", state)
	if st.Bound {
		fmt.Fprintf(w, "  app %s, bot %s (%s), encrypted: %v\n", st.AppID, st.BotOpenID, st.BotName, st.Encrypted)
	}
	fmt.Fprintf(w, "  executor %s, model configured: %v, allowlisted: %d, owner: %s\n", st.Executor, st.ModelConfigured, st.Allowlisted, orDash(st.OwnerOpenID))
	if st.Pairing.Pending && st.Pairing.ExpiresAt != nil {
		fmt.Fprintf(w, "  a pairing code is pending until %s\n", st.Pairing.ExpiresAt.Local().Format("15:04:05"))
	}
	for _, warn := range st.Warnings {
		fmt.Fprintf(w, "  warning: %s\n", warn)
	}
	for _, d := range st.Drops {
		fmt.Fprintf(w, "  dropped %-15s %d\n", d.Reason, d.Count)
	}
}

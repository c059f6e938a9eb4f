package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/pet"
	"github.com/pixie-dev/pixie/runtime"
)

// petLeaf is one `pixie pet` subcommand: key is its name in petCLI.run ("skills ls"), defs
// defines the flags it takes.
func petLeaf(key, args string, nargs [2]int, summary string, defs ...func(fs *flag.FlagSet, f *petFlags)) *command {
	name := key
	if i := strings.LastIndexByte(key, ' '); i >= 0 {
		name = key[i+1:]
	}
	return &command{name: name, args: args, nargs: nargs, summary: summary, flags: func(fs *flag.FlagSet) runFunc {
		f := &petFlags{}
		for _, d := range defs {
			d(fs, f)
		}
		return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, pos []string) error {
			p := petCLI{c: c, f: *f, stdin: io.stdin, out: io.stdout, errw: io.stderr}
			code, err := p.run(ctx, key, pos)
			if err != nil {
				return err
			}
			if code != 0 {
				return exitCode(code)
			}
			return nil
		})
	}}
}

func petJSON(fs *flag.FlagSet, f *petFlags) { fs.BoolVar(&f.asJSON, "json", false, "print JSON") }

func petWorkspace(usage string) func(fs *flag.FlagSet, f *petFlags) {
	return func(fs *flag.FlagSet, f *petFlags) { fs.StringVar(&f.workspace, "workspace", "", usage) }
}

func init() {
	register(&command{name: "pet", summary: "Pet: Skills, invocations, tasks, environment values, the wheel", subs: []*command{
		{name: "skills", summary: "Skills", subs: []*command{
			petLeaf("skills inspect", "PATH", one, "read-only look at a Skill directory (name, description, files)"),
			petLeaf("skills register", "PATH", one, "inspect, confirm (or --yes), then register the link name → PATH", func(fs *flag.FlagSet, f *petFlags) {
				fs.BoolVar(&f.enable, "enable", false, "enable at once")
				fs.BoolVar(&f.shortcut, "shortcut", false, "put on the wheel at once")
				fs.BoolVar(&f.yes, "yes", false, "do not ask for confirmation")
				fs.StringVar(&f.executor, "executor", "", "what runs an instruction Skill: builtin (the Pixie model, the default), claude (Claude Code) or codex (Codex)")
			}),
			petLeaf("skills ls", "", [2]int{}, "registered Skills with their live state", petJSON),
			petLeaf("skills enable", "NAME", one, "project into the Pet workspace"),
			petLeaf("skills disable", "NAME", one, "remove from the Pet workspace"),
			petLeaf("skills shortcut", "NAME on|off", two, "show on / hide from the wheel"),
			petLeaf("skills executor", "NAME builtin|claude|codex", two, "what runs an instruction Skill: the Pixie model, Claude Code or Codex"),
			petLeaf("skills rm", "NAME", one, "unregister (the directory is not touched)"),
		}},
		petLeaf("rebuild", "", [2]int{}, "rebuild the projection (the only cure for drift)"),
		petLeaf("invoke", "SKILL", one, "invoke a Skill on a snapshot (--scope session:ID|workspace:ID|independent)", petJSON, func(fs *flag.FlagSet, f *petFlags) {
			fs.StringVar(&f.scope, "scope", "", "session:ID, workspace:ID or independent (required)")
			fs.StringVar(&f.workspace, "workspace", "", "the source workspace")
			fs.StringVar(&f.cwd, "cwd", "", "the source's working directory")
			fs.StringVar(&f.title, "title", "", "the source's title")
			fs.StringVar(&f.selText, "selection", "", `the selected text ("-" reads stdin)`)
			fs.StringVar(&f.transcript, "transcript", "", "a file holding a transcript excerpt")
		}),
		petLeaf("retry", "INVOCATION", one, "add a Run to a transiently failed invocation", petJSON),
		petLeaf("tasks", "[TASK]", optional, "tasks (or one task with its invocations and runs)", petJSON, func(fs *flag.FlagSet, f *petFlags) {
			fs.BoolVar(&f.all, "all", false, "archived ones too")
			fs.StringVar(&f.scope, "scope", "", "only this scope")
		}),
		petLeaf("archive", "TASK", one, "close a task; the next invocation starts a new epoch"),
		{name: "env", summary: "environment values", subs: []*command{
			petLeaf("env set", "KEY VALUE|-", two, `set a value (VALUE "-" reads stdin; no --workspace: global)`, petWorkspace("the workspace scope (default: global)")),
			petLeaf("env ls", "", [2]int{}, "values, masked", petJSON, petWorkspace("only this workspace's scope"), func(fs *flag.FlagSet, f *petFlags) {
				fs.BoolVar(&f.global, "global", false, "only the global scope")
			}),
			petLeaf("env rm", "KEY", one, "remove a value", petWorkspace("the workspace scope (default: global)")),
		}},
		petLeaf("wheel", "", [2]int{}, "the wheel with availability", petJSON),
		petLeaf("diagnostics", "", [2]int{}, "diagnostics (JSON)"),
	}})
}

// petFlags are every flag of the pet subcommands (each defines the ones it uses).
type petFlags struct {
	enable, shortcut, yes, asJSON, all    bool
	global                                bool
	scope, workspace, cwd, title, selText string
	transcript, executor                  string
}

type petCLI struct {
	c     *apiClient
	f     petFlags
	stdin io.Reader
	out   io.Writer
	errw  io.Writer
}

func (p petCLI) run(ctx context.Context, cmd string, pos []string) (int, error) {
	c := p.c
	switch cmd {
	case "skills inspect":
		var in pet.Inspection
		if err := c.do(ctx, http.MethodPost, "/v1/pet/skills/inspect", map[string]string{"path": petAbs(pos[0])}, &in); err != nil {
			return 1, err
		}
		p.printInspection(in)
	case "skills register":
		return p.registerSkill(ctx, petAbs(pos[0]))
	case "skills ls":
		var list struct {
			Skills []pet.SkillView `json:"skills"`
		}
		if err := c.do(ctx, http.MethodGet, "/v1/pet/skills", nil, &list); err != nil {
			return 1, err
		}
		if p.f.asJSON {
			return 0, p.json(list)
		}
		tw := tabwriter.NewWriter(p.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tKIND\tEXECUTOR\tSANDBOX\tENABLED\tSHORTCUT\tPROJECTION\tAVAILABLE\tPATH")
		for _, s := range list.Skills {
			avail := "yes"
			if !s.Available {
				avail = "no: " + s.Reason
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%v\t%s\t%s\t%s\n", s.Name, orDash(string(s.Kind)), orDash(s.Executor), orDash(string(s.Sandbox)), s.Enabled, s.Shortcut, s.Projection, avail, s.Path)
		}
		return 0, tw.Flush()
	case "skills enable", "skills disable":
		on := cmd == "skills enable"
		return 0, p.patchSkill(ctx, pos[0], map[string]any{"enabled": on})
	case "skills shortcut":
		var on bool
		switch pos[1] {
		case "on":
			on = true
		case "off":
		default:
			return 2, errs.New(errs.Invalid, "shortcut takes on or off, not %q", pos[1])
		}
		return 0, p.patchSkill(ctx, pos[0], map[string]any{"shortcut": on})
	case "skills executor":
		// The server validates the value (an unknown one, or an external executor for a script
		// or WASM Skill, is refused).
		return 0, p.patchSkill(ctx, pos[0], map[string]any{"executor": pos[1]})
	case "skills rm":
		if err := c.do(ctx, http.MethodDelete, "/v1/pet/skills/"+url.PathEscape(pos[0]), nil, nil); err != nil {
			return 1, err
		}
		fmt.Fprintf(p.out, "removed %s (its directory is untouched)\n", pos[0])
	case "rebuild":
		var rep pet.RebuildReport
		if err := c.do(ctx, http.MethodPost, "/v1/pet/projection/rebuild", nil, &rep); err != nil {
			return 1, err
		}
		fmt.Fprintf(p.out, "projection rebuilt: created %s; kept %s; removed %s; drift cleared for %s\n",
			petList(rep.Created), petList(rep.Kept), petList(rep.Removed), petList(rep.Cleared))
	case "invoke":
		return p.invoke(ctx, pos[0])
	case "retry":
		var v pet.InvocationView
		if err := c.do(ctx, http.MethodPost, "/v1/pet/invocations/"+url.PathEscape(pos[0])+"/retry", nil, &v); err != nil {
			return 1, err
		}
		return p.printInvocation(v)
	case "tasks":
		if len(pos) == 1 {
			var tv pet.TaskView
			if err := c.do(ctx, http.MethodGet, "/v1/pet/tasks/"+url.PathEscape(pos[0]), nil, &tv); err != nil {
				return 1, err
			}
			if p.f.asJSON {
				return 0, p.json(tv)
			}
			p.printTask(tv)
			return 0, nil
		}
		q := url.Values{}
		if p.f.all {
			q.Set("archived", "true")
		}
		if p.f.scope != "" {
			q.Set("scope", p.f.scope)
		}
		var tl struct {
			Tasks []pet.Task `json:"tasks"`
		}
		if err := c.do(ctx, http.MethodGet, "/v1/pet/tasks?"+q.Encode(), nil, &tl); err != nil {
			return 1, err
		}
		if p.f.asJSON {
			return 0, p.json(tl)
		}
		tw := tabwriter.NewWriter(p.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TASK\tSCOPE\tEPOCH\tINVOCATIONS\tSTATE\tUPDATED")
		for _, t := range tl.Tasks {
			state := "open"
			if t.Archived {
				state = "archived"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", t.ID, t.Scope, t.Epoch, t.Invocations, state, t.UpdatedAt.Local().Format(time.DateTime))
		}
		return 0, tw.Flush()
	case "archive":
		var t pet.Task
		if err := c.do(ctx, http.MethodPost, "/v1/pet/tasks/"+url.PathEscape(pos[0])+"/archive", nil, &t); err != nil {
			return 1, err
		}
		fmt.Fprintf(p.out, "archived task %s (%s, epoch %d); the next invocation from %s starts epoch %d\n", t.ID, t.Scope, t.Epoch, t.Scope, t.Epoch+1)
	case "env set":
		value := pos[1]
		if value == "-" {
			raw, err := io.ReadAll(io.LimitReader(p.stdin, pet.MaxEnvValueLen+2))
			if err != nil {
				return 1, fmt.Errorf("read stdin: %w", err)
			}
			value = strings.TrimSuffix(strings.TrimSuffix(string(raw), "\n"), "\r")
		}
		var en pet.EnvEntry
		body := map[string]string{"value": value, "workspace": p.f.workspace}
		if err := c.do(ctx, http.MethodPut, "/v1/pet/env/"+url.PathEscape(pos[0]), body, &en); err != nil {
			return 1, err
		}
		fmt.Fprintf(p.out, "set %s in the %s scope (Skills read $%s)\n", en.Key, en.Scope, en.Var)
	case "env ls":
		q := url.Values{}
		switch {
		case p.f.workspace != "" && p.f.global:
			return 2, errs.New(errs.Invalid, "give --workspace or --global, not both")
		case p.f.workspace != "":
			q.Set("scope", "workspace:"+p.f.workspace)
		case p.f.global:
			q.Set("scope", pet.GlobalScope)
		}
		var el struct {
			Env []pet.EnvEntry `json:"env"`
		}
		if err := c.do(ctx, http.MethodGet, "/v1/pet/env?"+q.Encode(), nil, &el); err != nil {
			return 1, err
		}
		if p.f.asJSON {
			return 0, p.json(el)
		}
		tw := tabwriter.NewWriter(p.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SCOPE\tKEY\tVARIABLE\tVALUE")
		for _, e := range el.Env {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Scope, e.Key, e.Var, e.Value)
		}
		if err := tw.Flush(); err != nil {
			return 1, err
		}
		fmt.Fprintln(p.out, "(values are masked for display only; this is not a credential store)")
	case "env rm":
		path := "/v1/pet/env/" + url.PathEscape(pos[0])
		if p.f.workspace != "" {
			path += "?workspace=" + url.QueryEscape(p.f.workspace)
		}
		if err := c.do(ctx, http.MethodDelete, path, nil, nil); err != nil {
			return 1, err
		}
		fmt.Fprintf(p.out, "removed %s\n", pos[0])
	case "wheel":
		var w pet.Wheel
		if err := c.do(ctx, http.MethodGet, "/v1/pet/wheel", nil, &w); err != nil {
			return 1, err
		}
		if p.f.asJSON {
			return 0, p.json(w)
		}
		tw := tabwriter.NewWriter(p.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "RING\tSLOT\tKIND\tLABEL\tAVAILABLE")
		for _, e := range w.Entries {
			avail := "yes"
			if !e.Available {
				avail = "no: " + e.Reason
			}
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\n", e.Ring, e.Slot, e.Kind, e.Label, avail)
		}
		if err := tw.Flush(); err != nil {
			return 1, err
		}
		if len(w.Overflow) > 0 {
			fmt.Fprintf(p.out, "did not fit (%d entries at most): %s\n", w.Capacity, strings.Join(w.Overflow, ", "))
		}
	case "diagnostics":
		var d pet.Diagnostics
		if err := c.do(ctx, http.MethodGet, "/v1/pet/diagnostics", nil, &d); err != nil {
			return 1, err
		}
		return 0, p.json(d)
	}
	return 0, nil
}

func (p petCLI) json(v any) error { return writeJSON(p.out, v) }

func (p petCLI) patchSkill(ctx context.Context, name string, body map[string]any) error {
	var v pet.SkillView
	if err := p.c.do(ctx, http.MethodPatch, "/v1/pet/skills/"+url.PathEscape(name), body, &v); err != nil {
		return err
	}
	state := "available"
	if !v.Available {
		state = "unavailable: " + v.Reason
	}
	fmt.Fprintf(p.out, "%s: enabled=%v shortcut=%v executor=%s projection=%s (%s)\n", v.Name, v.Enabled, v.Shortcut, v.Executor, v.Projection, state)
	return nil
}

func (p petCLI) printInspection(in pet.Inspection) {
	fmt.Fprintf(p.out, "name:        %s\ndescription: %s\nkind:        %s\nsandbox:     %s\npath:        %s\nfiles:       %d (%d bytes)\n",
		in.Name, in.Description, in.Kind, sandboxText(in.Sandbox), in.Path, len(in.Files), in.TotalSize)
	for _, f := range in.Files {
		fmt.Fprintf(p.out, "  %8d  %s\n", f.Size, f.Path)
	}
	if in.Registered {
		fmt.Fprintf(p.out, "already registered as %s → %s\n", in.Name, in.RegisteredPath)
	}
}

// registerSkill inspects the directory, shows it, asks for confirmation (unless --yes), and
// registers exactly what was inspected (the fingerprint travels with the request).
func (p petCLI) registerSkill(ctx context.Context, path string) (int, error) {
	var in pet.Inspection
	if err := p.c.do(ctx, http.MethodPost, "/v1/pet/skills/inspect", map[string]string{"path": path}, &in); err != nil {
		return 1, err
	}
	p.printInspection(in)
	if !p.f.yes {
		grant := ""
		if in.Sandbox != "" && in.Sandbox != runtime.PolicyReadOnly {
			grant = fmt.Sprintf(", granting the %s sandbox", in.Sandbox)
		}
		fmt.Fprintf(p.out, "Register %s → %s%s? [y/N] ", in.Name, in.Path, grant)
		line, _ := bufio.NewReader(p.stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			fmt.Fprintln(p.out)
			return 1, errs.New(errs.Invalid, "not registered: registration was not confirmed (answer y, or pass --yes)")
		}
	}
	// The confirmation covers the sandbox policy shown: it travels with the request, and the
	// server refuses it if the Skill now asks for another.
	req := pet.RegisterRequest{Path: in.Path, Confirm: true, Fingerprint: in.Fingerprint, Sandbox: in.Sandbox, Enabled: p.f.enable, Shortcut: p.f.shortcut, Executor: p.f.executor}
	var v pet.SkillView
	if err := p.c.do(ctx, http.MethodPost, "/v1/pet/skills", req, &v); err != nil {
		return 1, err
	}
	fmt.Fprintf(p.out, "registered %s → %s (sandbox=%s enabled=%v shortcut=%v executor=%s)\n", v.Name, v.Path, v.Sandbox, v.Enabled, v.Shortcut, v.Executor)
	return 0, nil
}

func (p petCLI) invoke(ctx context.Context, skill string) (int, error) {
	if p.f.scope == "" {
		return 2, errs.New(errs.Invalid, "--scope is required: session:ID, workspace:ID or independent")
	}
	snap := pet.Snapshot{Scope: p.f.scope, WorkspaceID: p.f.workspace, Title: p.f.title, Selection: p.f.selText, CapturedAt: time.Now().UTC()}
	if p.f.cwd != "" {
		snap.Cwd = petAbs(p.f.cwd)
	}
	if snap.Selection == "-" {
		raw, err := io.ReadAll(io.LimitReader(p.stdin, pet.MaxSelectionLen+1))
		if err != nil {
			return 1, fmt.Errorf("read stdin: %w", err)
		}
		snap.Selection = string(raw)
	}
	if p.f.transcript != "" {
		raw, err := os.ReadFile(p.f.transcript)
		if err != nil {
			return 1, fmt.Errorf("read the transcript: %w", err)
		}
		snap.Transcript = string(raw)
	}
	var v pet.InvocationView
	if err := p.c.do(ctx, http.MethodPost, "/v1/pet/invocations", pet.InvokeRequest{Skill: skill, Snapshot: snap}, &v); err != nil {
		return 1, err
	}
	return p.printInvocation(v)
}

// printInvocation prints an invocation's latest result; a failed one exits 1.
func (p petCLI) printInvocation(v pet.InvocationView) (int, error) {
	r := v.Latest()
	code := 0
	if v.Status != pet.StatusSucceeded {
		code = 1
	}
	if p.f.asJSON {
		return code, p.json(v)
	}
	fmt.Fprintf(p.errw, "invocation %s (task %s, %s, epoch %d, #%d), run %d: %s\n", v.ID, v.TaskID, v.Scope, v.Epoch, v.Seq, r.N, v.Status)
	p.printToolCalls(r)
	if r.Output != "" {
		fmt.Fprintln(p.out, r.Output)
	}
	if r.Error != nil {
		hint := ""
		if r.Transient {
			hint = fmt.Sprintf(" (transient: pixie pet retry %s)", v.ID)
		}
		fmt.Fprintf(p.errw, "error (%s): %s%s\n", r.Error.Code, r.Error.Message, hint)
	}
	return code, nil
}

// printToolCalls prints a Run's sandbox policy and its agent's tool calls, one line each, on
// stderr.
func (p petCLI) printToolCalls(r pet.Run) {
	if r.Sandbox != "" && (r.Executor == pet.KindInstructions || len(r.ToolCalls) > 0) {
		fmt.Fprintf(p.errw, "sandbox %s, %d model turns, %d tool calls\n", r.Sandbox, r.Steps, len(r.ToolCalls))
	}
	for _, c := range r.ToolCalls {
		state := "ok"
		if c.IsError {
			state = "error"
		}
		gate := ""
		if c.Gate != "" {
			gate = " [" + petClip(c.Gate) + "]"
		}
		fmt.Fprintf(p.errw, "  tool #%d (turn %d) %s %s → %s: %s%s\n", c.N, c.Step, c.Name, petClip(string(c.Input)), state, petClip(c.Output), gate)
	}
}

// sandboxText says what a sandbox policy a Skill asks for means.
func sandboxText(p runtime.Policy) string {
	switch p {
	case runtime.PolicyWorkspaceWrite:
		return string(p) + " (its commands may change files in the snapshot's folder; registering grants it)"
	case "":
		return "-"
	}
	return string(p) + " (its commands may read, not change files)"
}

func (p petCLI) printTask(tv pet.TaskView) {
	state := "open"
	if tv.Archived {
		state = "archived"
	}
	fmt.Fprintf(p.out, "task %s: %s, epoch %d, %s, executor session %s\n", tv.ID, tv.Scope, tv.Epoch, state, tv.ExecutorSession)
	for _, iv := range tv.InvocationList {
		fmt.Fprintf(p.out, "  #%d %s %s %s (captured %s, %q)\n", iv.Seq, iv.ID, iv.Skill, iv.Status,
			iv.Snapshot.CapturedAt.Local().Format(time.DateTime), iv.Snapshot.Title)
		for _, r := range iv.Runs {
			detail := petClip(r.Output)
			if r.Error != nil {
				detail = string(r.Error.Code) + ": " + petClip(r.Error.Message)
			}
			executor := string(r.Executor)
			if r.ExternalExecutor != "" {
				executor += "/" + r.ExternalExecutor
			}
			fmt.Fprintf(p.out, "     run %d %s %s %s %dms %d tool calls %s\n", r.N, executor, orDash(string(r.Sandbox)), r.Status, r.DurationMS, len(r.ToolCalls), detail)
		}
	}
}

func petAbs(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/pet"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/sandbox"
	"github.com/pixie-dev/pixie/runtime/wasm"
)

func init() {
	register(verb{name: "pet", usage: "Pet: pixie pet skills inspect|register|ls|enable|disable|shortcut|rm, invoke, retry, tasks, archive, env set|ls|rm, wheel, diagnostics, rebuild", run: cmdPet})
}

const petUsage = `usage:
  pixie pet skills inspect PATH                 read-only look at a Skill directory (name, description, files)
  pixie pet skills register PATH [--enable] [--shortcut] [--yes]
                                                inspect, confirm (or --yes), then register the link name → PATH
  pixie pet skills ls [--json]                  registered Skills with their live state
  pixie pet skills enable|disable NAME          project into / remove from the Pet workspace
  pixie pet skills shortcut NAME on|off         show on / hide from the wheel
  pixie pet skills rm NAME                      unregister (the directory is not touched)
  pixie pet rebuild                             rebuild the projection (the only cure for drift)
  pixie pet invoke SKILL --scope session:ID|workspace:ID|independent
        [--workspace ID] [--cwd DIR] [--title T] [--selection TEXT|-] [--transcript FILE] [--json]
  pixie pet retry INVOCATION [--json]           add a Run to a transiently failed invocation
  pixie pet tasks [TASK] [--all] [--scope S] [--json]
  pixie pet archive TASK                        close a task; the next invocation starts a new epoch
  pixie pet env set KEY VALUE|- [--workspace ID]   (VALUE "-" reads stdin; no --workspace: global)
  pixie pet env ls [--workspace ID | --global] [--json]
  pixie pet env rm KEY [--workspace ID]
  pixie pet wheel [--json]
  pixie pet diagnostics
connection flags (every subcommand): --url, --token, --home`

// cmdPet runs `pixie pet …`.
func cmdPet(ctx context.Context, args []string) int {
	return runPet(ctx, args, os.Stdin, os.Stdout, os.Stderr)
}

// petFlags are every flag of the pet subcommands (each uses its own).
type petFlags struct {
	cf                                    clientFlags
	enable, shortcut, yes, asJSON, all    bool
	global                                bool
	scope, workspace, cwd, title, selText string
	transcript                            string
}

func runPet(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, petUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, args := args[0], args[1:]
	if cmd == "skills" || cmd == "env" {
		if len(args) == 0 {
			fmt.Fprintf(stderr, "pixie pet %s: a subcommand is required\n%s\n", cmd, petUsage)
			return 2
		}
		cmd, args = cmd+" "+args[0], args[1:]
	}
	want := map[string][2]int{ // positional arguments: min, max
		"skills inspect": {1, 1}, "skills register": {1, 1}, "skills ls": {0, 0}, "skills enable": {1, 1},
		"skills disable": {1, 1}, "skills shortcut": {2, 2}, "skills rm": {1, 1}, "rebuild": {0, 0},
		"invoke": {1, 1}, "retry": {1, 1}, "tasks": {0, 1}, "archive": {1, 1},
		"env set": {2, 2}, "env ls": {0, 0}, "env rm": {1, 1}, "wheel": {0, 0}, "diagnostics": {0, 0},
	}
	n, known := want[cmd]
	if !known {
		fmt.Fprintf(stderr, "pixie pet: unknown subcommand %q\n%s\n", cmd, petUsage)
		return 2
	}
	var f petFlags
	fs := flag.NewFlagSet("pet "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	f.cf.add(fs)
	fs.BoolVar(&f.enable, "enable", false, "register: enable at once")
	fs.BoolVar(&f.shortcut, "shortcut", false, "register: put on the wheel at once")
	fs.BoolVar(&f.yes, "yes", false, "register: do not ask for confirmation")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON")
	fs.BoolVar(&f.all, "all", false, "tasks: archived ones too")
	fs.BoolVar(&f.global, "global", false, "env ls: only the global scope")
	fs.StringVar(&f.scope, "scope", "", "invoke: session:ID, workspace:ID or independent; tasks: filter")
	fs.StringVar(&f.workspace, "workspace", "", "the source workspace (invoke), or the env scope")
	fs.StringVar(&f.cwd, "cwd", "", "invoke: the source's working directory")
	fs.StringVar(&f.title, "title", "", "invoke: the source's title")
	fs.StringVar(&f.selText, "selection", "", `invoke: the selected text ("-" reads stdin)`)
	fs.StringVar(&f.transcript, "transcript", "", "invoke: a file holding a transcript excerpt")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) < n[0] || len(pos) > n[1] {
		fmt.Fprintf(stderr, "pixie pet %s: wrong number of arguments\n%s\n", cmd, petUsage)
		return 2
	}
	c, err := newClient(f.cf)
	if err != nil {
		return failTo(stderr, err)
	}
	p := petCLI{c: c, f: f, stdin: stdin, out: stdout, errw: stderr}
	code, err := p.run(ctx, cmd, pos)
	if err != nil {
		return petFail(stderr, err)
	}
	return code
}

// petFail prints an error with its details (a refused Skill's problems, one per line).
func petFail(w io.Writer, err error) int {
	fmt.Fprintln(w, "pixie:", err)
	var e *errs.Error
	if errors.As(err, &e) && e.Details != nil {
		if raw, err := json.Marshal(e.Details); err == nil {
			var problems []pet.Problem
			if json.Unmarshal(raw, &problems) == nil && len(problems) > 0 && problems[0].Reason != "" {
				for _, p := range problems {
					if p.Path != "" {
						fmt.Fprintf(w, "  %s: %s\n", p.Path, p.Reason)
					} else {
						fmt.Fprintf(w, "  %s\n", p.Reason)
					}
				}
			}
		}
	}
	return 1
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
		fmt.Fprintln(tw, "NAME\tKIND\tENABLED\tSHORTCUT\tPROJECTION\tAVAILABLE\tPATH")
		for _, s := range list.Skills {
			avail := "yes"
			if !s.Available {
				avail = "no: " + s.Reason
			}
			fmt.Fprintf(tw, "%s\t%s\t%v\t%v\t%s\t%s\t%s\n", s.Name, petOrDash(string(s.Kind)), s.Enabled, s.Shortcut, s.Projection, avail, s.Path)
		}
		return 0, tw.Flush()
	case "skills enable", "skills disable":
		on := cmd == "skills enable"
		return 0, p.patchSkill(ctx, pos[0], map[string]bool{"enabled": on})
	case "skills shortcut":
		var on bool
		switch pos[1] {
		case "on":
			on = true
		case "off":
		default:
			return 2, errs.New(errs.Invalid, "shortcut takes on or off, not %q", pos[1])
		}
		return 0, p.patchSkill(ctx, pos[0], map[string]bool{"shortcut": on})
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

func (p petCLI) json(v any) error {
	enc := json.NewEncoder(p.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (p petCLI) patchSkill(ctx context.Context, name string, body map[string]bool) error {
	var v pet.SkillView
	if err := p.c.do(ctx, http.MethodPatch, "/v1/pet/skills/"+url.PathEscape(name), body, &v); err != nil {
		return err
	}
	state := "available"
	if !v.Available {
		state = "unavailable: " + v.Reason
	}
	fmt.Fprintf(p.out, "%s: enabled=%v shortcut=%v projection=%s (%s)\n", v.Name, v.Enabled, v.Shortcut, v.Projection, state)
	return nil
}

func (p petCLI) printInspection(in pet.Inspection) {
	fmt.Fprintf(p.out, "name:        %s\ndescription: %s\nkind:        %s\npath:        %s\nfiles:       %d (%d bytes)\n",
		in.Name, in.Description, in.Kind, in.Path, len(in.Files), in.TotalSize)
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
		fmt.Fprintf(p.out, "Register %s → %s? [y/N] ", in.Name, in.Path)
		line, _ := bufio.NewReader(p.stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			fmt.Fprintln(p.out)
			return 1, errs.New(errs.Invalid, "not registered: registration was not confirmed (answer y, or pass --yes)")
		}
	}
	req := pet.RegisterRequest{Path: in.Path, Confirm: true, Fingerprint: in.Fingerprint, Enabled: p.f.enable, Shortcut: p.f.shortcut}
	var v pet.SkillView
	if err := p.c.do(ctx, http.MethodPost, "/v1/pet/skills", req, &v); err != nil {
		return 1, err
	}
	fmt.Fprintf(p.out, "registered %s → %s (enabled=%v shortcut=%v)\n", v.Name, v.Path, v.Enabled, v.Shortcut)
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
			fmt.Fprintf(p.out, "     run %d %s %s %dms %s\n", r.N, r.Executor, r.Status, r.DurationMS, detail)
		}
	}
}

func petClip(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return s
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

func petList(s []string) string {
	if len(s) == 0 {
		return "nothing"
	}
	return strings.Join(s, ", ")
}

func petOrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// probedBash lets Pet ask the bash executor whether it can run scripts here: the sandboxed
// policies need Landlock (runtime/sandbox), the full policy only bash.
type probedBash struct{ runtime.Executor }

var _ pet.Prober = probedBash{}

// Probe implements pet.Prober.
func (b probedBash) Probe(_ context.Context, policy runtime.Policy) error {
	if policy == runtime.PolicyFull {
		return nil
	}
	if err := sandbox.Probe(); err != nil {
		return errs.Wrap(errs.Unavailable, err, "scripts cannot be sandboxed here (%s policy): %v", policy, err)
	}
	return nil
}

var _ wasm.Source = (*pet.ModuleFiles)(nil)

// newPet builds the Pet service: scripts run on the rule dispatcher's bash executor (behind a
// Landlock probe), skill.wasm files on a WASM executor of Pet's own that loads modules by path
// (pet.ModuleFiles), instruction Skills on the Pixie model. A missing executor is not fatal: its
// Skills show as unavailable, with the reason. helpers (the gate service) gives script and WASM
// Skills the helper gate rules get; nil leaves them without one. The returned func releases the
// WASM executor.
func newPet(ctx context.Context, cfg config.Config, log *slog.Logger, st *store.Store, rules runtime.Dispatcher, m model.Model, helpers pet.HelperOpener) (*pet.Service, func(), error) {
	exec := runtime.Dispatcher{}
	if bx, ok := rules[runtime.KindScript]; ok {
		exec[runtime.KindScript] = probedBash{bx}
	}
	closer := func() {}
	wx, err := wasm.New(ctx, wasm.Config{
		CacheDir:      filepath.Join(cfg.Home, homeCache, "pet"),
		MaxModuleSize: pet.DefaultMaxSkillModule,
		MemoryPages:   uint32(cfg.WASM.MemoryPages),
		MaxInput:      cfg.WASM.MaxInput,
		MaxOutput:     cfg.WASM.MaxOutput,
		MaxHostCalls:  cfg.WASM.MaxHostCalls,
		PoolSize:      -1, // a Skill runs now and then: no idle instances
	}, &pet.ModuleFiles{})
	if err != nil {
		log.Warn("WASM Skills are unavailable", "err", err)
	} else {
		exec[runtime.KindModule] = wx
		closer = func() { _ = wx.Close(context.Background()) }
	}
	svc, err := pet.New(st, exec, m, pet.Config{
		Home: cfg.Home, Workspace: cfg.Pet.Workspace, MaxSkillFiles: cfg.Pet.MaxSkillFiles,
		MaxSkillFileSize: cfg.Pet.MaxSkillFileSize, MaxSkillSize: cfg.Pet.MaxSkillSize, Logger: log,
		Helpers: helpers,
	})
	if err != nil {
		closer()
		return nil, nil, err
	}
	return svc, closer, nil
}

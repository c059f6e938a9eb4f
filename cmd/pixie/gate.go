package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"go.yaml.in/yaml/v3"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/yamlline"
)

func init() {
	register(&command{name: "gate", summary: "Pixie gates: list, show, apply, try, templates, sessions, records", subs: []*command{
		{name: "list", summary: "gates, their points, rules and presets, then the set-up problems hooks ran into (missing presets)", flags: func(fs *flag.FlagSet) runFunc {
			asJSON := fs.Bool("json", false, "print JSON")
			return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, _ []string) error {
				return gateList(ctx, c, io.stdout, *asJSON)
			})
		}},
		{name: "show", args: "NAME", nargs: one, summary: "one gate as YAML (or JSON)", flags: func(fs *flag.FlagSet) runFunc {
			asJSON := fs.Bool("json", false, "print JSON")
			return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, pos []string) error {
				return gateShow(ctx, c, io.stdout, pos[0], *asJSON)
			})
		}},
		{name: "apply", summary: "save gates and presets from YAML or JSON; --prune removes what the file leaves out",
			help: `Saves the gates and presets of a YAML or JSON file ("-" reads stdin) and prints what it
adds, changes and removes. A gate or preset of the file replaces the saved one of that name or is
added; saved ones the file does not name are kept (and listed as kept) unless --prune is given,
which makes the saved set exactly the file. The file is decoded strictly: a misspelt key is
refused with its path and line. A refused save lists every problem by field, and saves nothing;
a save is also refused when the set changed since it was read (run apply again).`,
			flags: func(fs *flag.FlagSet) runFunc {
				file := fs.String("f", "", "the YAML or JSON file (- reads stdin)")
				prune := fs.Bool("prune", false, "remove saved gates and presets the file does not name")
				dryRun := fs.Bool("dry-run", false, "print what would change, and save nothing")
				return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, _ []string) error {
					if *file == "" {
						return usagef("needs -f FILE")
					}
					return gateApply(ctx, c, io.stdin, io.stdout, *file, *prune, *dryRun)
				})
			}},
		{name: "try", args: "NAME|-f FILE", nargs: optional, summary: "run a saved or draft gate on a sample; nothing is recorded",
			help: `Runs a saved gate (NAME) or a draft (-f FILE, YAML or JSON) on a sample text with the
real model. Nothing is recorded. Exits 1 when the trial reports an error.`,
			flags: func(fs *flag.FlagSet) runFunc {
				file := fs.String("f", "", "a draft gate in YAML or JSON (- reads stdin)")
				target := fs.String("target", "", "the sample text")
				targetFile := fs.String("target-file", "", "read the sample text from this file")
				tool := fs.String("tool", "", "the tool name at tool points")
				toolArgs := fs.String("args", "", "the tool arguments JSON")
				structured := fs.Bool("structured", false, "the tool result carries a structured value")
				agent := fs.String("agent", "", "root or child")
				asJSON := fs.Bool("json", false, "print JSON")
				return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, pos []string) error {
					if (len(pos) == 1) == (*file != "") {
						return usagef("needs a saved gate's NAME or -f FILE, not both")
					}
					if (*target == "") == (*targetFile == "") {
						return usagef("needs --target TEXT or --target-file FILE")
					}
					s := gate.Sample{Target: *target, Agent: *agent, Structured: *structured}
					if *targetFile != "" {
						raw, err := readInput(io.stdin, *targetFile)
						if err != nil {
							return err
						}
						s.Target = string(raw)
					}
					if *tool != "" || *toolArgs != "" {
						s.Tool = &gate.Tool{Name: *tool}
						if *toolArgs != "" {
							if !json.Valid([]byte(*toolArgs)) {
								return usagef("--args must be JSON")
							}
							s.Tool.Args = json.RawMessage(*toolArgs)
						}
					}
					name := ""
					if len(pos) == 1 {
						name = pos[0]
					}
					return gateTry(ctx, c, io.stdin, io.stdout, name, *file, s, *asJSON)
				})
			}},
		{name: "templates", args: "[ID]", nargs: optional, summary: "the gate templates Studio starts from (ID: one as YAML, ready for gate apply)",
			flags: func(fs *flag.FlagSet) runFunc {
				asJSON := fs.Bool("json", false, "print JSON")
				return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, pos []string) error {
					return gateTemplates(ctx, c, io.stdout, pos, *asJSON)
				})
			}},
		{name: "sessions", summary: "the sessions that have records, newest first, with their last run",
			flags: func(fs *flag.FlagSet) runFunc {
				limit := fs.Int("limit", 0, "sessions per page (default 50)")
				cursor := fs.String("cursor", "", "the next-page cursor a previous page printed")
				asJSON := fs.Bool("json", false, "print JSON")
				return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, _ []string) error {
					return gateSessions(ctx, c, io.stdout, *cursor, *limit, *asJSON)
				})
			}},
		{name: "records", args: "--session S | RUN_ID", nargs: optional, summary: "a session's run records, newest first (or one record in full)",
			flags: func(fs *flag.FlagSet) runFunc {
				session := fs.String("session", "", "the session")
				limit := fs.Int("limit", 0, "records per page (default 50)")
				cursor := fs.String("cursor", "", "the next-page cursor a previous page printed")
				asJSON := fs.Bool("json", false, "print JSON")
				return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, pos []string) error {
					if (len(pos) == 1) == (*session != "") {
						return usagef("needs --session S or a RUN_ID")
					}
					if len(pos) == 1 {
						var rec json.RawMessage
						if err := c.do(ctx, http.MethodGet, "/v1/gates/records/"+url.PathEscape(pos[0]), nil, &rec); err != nil {
							return err
						}
						return printIndented(io.stdout, rec)
					}
					return gateRecords(ctx, c, io.stdout, *session, *cursor, *limit, *asJSON)
				})
			}},
	}})
}

// runGate runs `pixie gate …` (the tests' entry point).
func runGate(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return executeVerb(ctx, "gate", args, cmdIO{stdin, stdout, stderr})
}

func readInput(stdin io.Reader, path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(io.LimitReader(stdin, 8<<20))
	}
	return os.ReadFile(path)
}

// yamlToJSON converts a YAML (or JSON) document to JSON, so the server's decoding (and its
// defaults for absent fields) applies unchanged.
func yamlToJSON(raw []byte, name string) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(raw, &v); err != nil {
		if name == "-" {
			name = "stdin"
		}
		err = yamlline.Fix(raw, err)
		return nil, errs.Wrap(errs.Invalid, err, "%s is not YAML: %v", name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "cannot convert to JSON: %v", err)
	}
	return out, nil
}

func gateList(ctx context.Context, c *apiClient, w io.Writer, asJSON bool) error {
	var set gate.Set
	if err := c.do(ctx, http.MethodGet, "/v1/gates", nil, &set); err != nil {
		return err
	}
	if asJSON {
		return writeJSON(w, set)
	}
	presets := map[string][]string{}
	for _, p := range set.Presets {
		for _, a := range p.Gates {
			name := p.Name
			if !a.Enabled {
				name += " (off)"
			}
			presets[a.Gate] = append(presets[a.Gate], name)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPOINT\tENABLED\tRULE\tPRESETS")
	for _, g := range set.Gates {
		rule := "-"
		if g.Rule != nil {
			rule = string(g.Rule.Kind) + ":" + g.Rule.Name
		}
		ps := strings.Join(presets[g.Name], ", ")
		if ps == "" {
			ps = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\n", g.Name, g.Point, g.Enabled, rule, ps)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "revision %d\n", set.Revision)
	switch r, ok, err := getSetup(ctx, c); {
	case err != nil:
		fmt.Fprintf(w, "warning: the set-up problems the server has seen could not be read: %v\n", err)
	case ok:
		printSetupWarnings(w, r)
	default: // a server without GET /v1/gates/setup
		warnDefaultPreset(ctx, c, w, set)
	}
	return nil
}

// warnDefaultPreset says when no preset has the name hooks use when they name none: their
// sessions would run no gate, silently.
func warnDefaultPreset(ctx context.Context, c *apiClient, w io.Writer, set gate.Set) {
	var info struct {
		Hooks struct {
			DefaultPreset string `json:"defaultPreset"`
		} `json:"hooks"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/info", nil, &info); err != nil || info.Hooks.DefaultPreset == "" {
		return
	}
	for _, p := range set.Presets {
		if p.Name == info.Hooks.DefaultPreset {
			return
		}
	}
	fmt.Fprintf(w, "warning: no preset is called %q: hooks that name no preset use it (hooks.defaultPreset), so their sessions run no gates; add it to your gates file, or set the hooks' preset with pixie init claude --preset NAME\n", info.Hooks.DefaultPreset)
}

func gateShow(ctx context.Context, c *apiClient, w io.Writer, name string, asJSON bool) error {
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodGet, "/v1/gates/definitions/"+url.PathEscape(name), nil, &raw); err != nil {
		return err
	}
	if asJSON {
		return printIndented(w, raw)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return enc.Close()
}

func gateApply(ctx context.Context, c *apiClient, stdin io.Reader, w io.Writer, file string, prune, dryRun bool) error {
	raw, err := readInput(stdin, file)
	if err != nil {
		return err
	}
	body, err := yamlToJSON(raw, file)
	if err != nil {
		return err
	}
	name := file
	if name == "-" {
		name = "stdin"
	}
	if len(bytes.TrimSpace(body)) == 0 || string(bytes.TrimSpace(body)) == "null" {
		return errs.New(errs.Invalid, "%s is empty: a gate file holds gates: and/or presets:", name)
	}
	want, err := gate.DecodeSetFile(body)
	if err != nil {
		return withLines(err, raw, name, math.MaxInt, math.MaxInt) // every field is the file's
	}
	var saved gate.Set
	if err := c.do(ctx, http.MethodGet, "/v1/gates", nil, &saved); err != nil {
		return err
	}
	merged, changes := gate.Plan(saved, want, prune)
	counts := map[string]int{}
	for _, ch := range changes {
		counts[ch.Op]++
		switch ch.Op {
		case gate.PlanChange:
			fmt.Fprintf(w, "change %s %s: %s\n", ch.Kind, ch.Name, strings.Join(ch.Fields, ", "))
		case gate.PlanKeep:
			fmt.Fprintf(w, "keep %s %s (not in the file; --prune removes it)\n", ch.Kind, ch.Name)
		default:
			fmt.Fprintf(w, "%s %s %s\n", ch.Op, ch.Kind, ch.Name)
		}
	}
	summary := fmt.Sprintf("%d added, %d changed, %d removed", counts[gate.PlanAdd], counts[gate.PlanChange], counts[gate.PlanRemove])
	switch {
	case dryRun:
		fmt.Fprintf(w, "dry run, nothing saved: %s would be saved over revision %d\n", summary, saved.Revision)
		return nil
	case !gate.Changes(changes):
		fmt.Fprintf(w, "nothing to change (revision %d)\n", saved.Revision)
		return nil
	}
	var out gate.Set
	if err := c.do(ctx, http.MethodPut, "/v1/gates", merged, &out); err != nil {
		return withLines(err, raw, name, len(want.Gates), len(want.Presets))
	}
	fmt.Fprintf(w, "saved: %s; %d gate(s) and %d preset(s), revision %d\n", summary, len(out.Gates), len(out.Presets), out.Revision)
	warnDefaultPreset(ctx, c, w, out)
	return nil
}

// lineProblem is a problem with the line of the file it points at (printError prints it).
type lineProblem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
}

// withLines adds the file's line to each problem of a refusal that names a member of the file:
// the file's gates and presets come first in the saved set, so their indices are the file's.
func withLines(err error, raw []byte, name string, nGates, nPresets int) error {
	var e *errs.Error
	if !errors.As(err, &e) || e.Details == nil {
		return err
	}
	rawDetails, jerr := json.Marshal(e.Details)
	var ps []lineProblem
	if jerr != nil || json.Unmarshal(rawDetails, &ps) != nil || len(ps) == 0 || ps[0].Field == "" {
		return err
	}
	for i := range ps {
		if inFile(ps[i].Field, nGates, nPresets) {
			ps[i].Line = fieldLine(raw, ps[i].Field)
		}
	}
	// In the file's order (the JSON the file was converted to sorts its keys).
	key := func(p lineProblem) int {
		if p.Line == 0 {
			return math.MaxInt // problems of kept gates last
		}
		return p.Line
	}
	slices.SortStableFunc(ps, func(a, b lineProblem) int { return cmp.Compare(key(a), key(b)) })
	out := *e
	out.Message = name + ": " + e.Message
	out.Details = ps
	return &out
}

// inFile reports whether field names a member of the file (a gates[i] or presets[i] within the
// file's own lists, or a top-level key); fields past them are saved gates the file kept.
func inFile(field string, nGates, nPresets int) bool {
	for _, l := range []struct {
		prefix string
		n      int
	}{{"gates[", nGates}, {"presets[", nPresets}} {
		if rest, ok := strings.CutPrefix(field, l.prefix); ok {
			i, err := strconv.Atoi(rest[:max(strings.IndexByte(rest, ']'), 0)])
			return err == nil && i < l.n
		}
	}
	return true
}

// fieldLine is the line of field in raw, or of the nearest enclosing member written there.
func fieldLine(raw []byte, field string) int {
	for f := field; f != ""; {
		if l := yamlline.PathLine(raw, f); l > 0 {
			return l
		}
		i := strings.LastIndexAny(f, ".[")
		if i <= 0 {
			break
		}
		f = f[:i]
	}
	return 0
}

func gateTry(ctx context.Context, c *apiClient, stdin io.Reader, w io.Writer, name, file string, s gate.Sample, asJSON bool) error {
	var draft json.RawMessage
	if name != "" {
		if err := c.do(ctx, http.MethodGet, "/v1/gates/definitions/"+url.PathEscape(name), nil, &draft); err != nil {
			return err
		}
	} else {
		raw, err := readInput(stdin, file)
		if err != nil {
			return err
		}
		if draft, err = yamlToJSON(raw, file); err != nil {
			return err
		}
	}
	var res gate.TryResult
	if err := c.do(ctx, http.MethodPost, "/v1/gates/try", map[string]any{"gate": draft, "sample": s}, &res); err != nil {
		return err
	}
	if asJSON {
		if err := writeJSON(w, res); err != nil {
			return err
		}
		if res.Error != "" {
			return exitCode(1)
		}
		return nil
	}
	fmt.Fprintf(w, "action: %s\n", res.Action)
	if res.Error != "" {
		fmt.Fprintf(w, "error: %s\n", res.Error)
	}
	for _, f := range []struct{ k, v string }{{"reason", res.Reason}, {"suggestion", res.Suggestion}, {"addition", res.Addition}} {
		if f.v != "" {
			fmt.Fprintf(w, "%s: %s\n", f.k, f.v)
		}
	}
	for _, n := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if res.Action == gate.ActionReplaced || res.Action == gate.ActionAppended {
		fmt.Fprintf(w, "text:\n%s\n", res.Text)
	}
	if res.RuleRan && res.Rule != nil {
		fmt.Fprintf(w, "rule: module %s ran without a mount (exit %d, %d ms)\n", res.Rule.Name, res.Rule.ExitCode, res.Rule.DurationMs)
	}
	if res.ScriptNotRun {
		fmt.Fprintln(w, "(the gate's script was not run: trials have no session sandbox policy)")
	}
	fmt.Fprintf(w, "usage: %d in, %d out\n", res.Usage.InputTokens, res.Usage.OutputTokens)
	if res.Error != "" {
		return exitCode(1) // the error is printed above, once
	}
	return nil
}

func gateTemplates(ctx context.Context, c *apiClient, w io.Writer, pos []string, asJSON bool) error {
	var ts struct {
		Templates []gate.Template `json:"templates"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/gates/templates", nil, &ts); err != nil {
		return err
	}
	if len(pos) == 1 {
		for _, t := range ts.Templates {
			if t.ID == pos[0] {
				if asJSON {
					return writeJSON(w, t.Gate)
				}
				raw, err := json.Marshal(map[string]any{"gates": []gate.Gate{t.Gate}})
				if err != nil {
					return err
				}
				var v any
				if err := json.Unmarshal(raw, &v); err != nil {
					return err
				}
				fmt.Fprintf(w, "# %s: %s\n# Save it (with your other gates: gate apply saves the whole set) with pixie gate apply -f FILE.\n", t.Title, t.Description)
				enc := yaml.NewEncoder(w)
				enc.SetIndent(2)
				if err := enc.Encode(v); err != nil {
					return err
				}
				return enc.Close()
			}
		}
		return errs.New(errs.NotFound, "no template %q (pixie gate templates lists them)", pos[0])
	}
	if asJSON {
		return writeJSON(w, ts)
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tPOINT\tTITLE")
	for _, t := range ts.Templates {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", t.ID, orDash(t.Gate.Point), t.Title)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "one as YAML: pixie gate templates ID")
	return nil
}

func gateSessions(ctx context.Context, c *apiClient, w io.Writer, cursor string, limit int, asJSON bool) error {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/v1/gates/sessions"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var page gate.SessionPage
	if err := c.do(ctx, http.MethodGet, path, nil, &page); err != nil {
		return err
	}
	if asJSON {
		return writeJSON(w, page)
	}
	if len(page.Sessions) == 0 && cursor == "" {
		fmt.Fprintln(w, "no session has gate records yet")
		return nil
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "SESSION\tPRESET\tLAST RUN\tTIME\tGATE\tPOINT\tACTION\tERROR")
	for _, s := range page.Sessions {
		r := s.LastRun
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Session, orDash(s.Preset), r.ID, r.StartedAt.Local().Format("2006-01-02 15:04:05"),
			r.Gate, r.Point, r.Action, orDash(oneLine(r.Error, 40)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.Next != "" {
		fmt.Fprintf(w, "more: --cursor %s\n", page.Next)
	}
	return nil
}

func gateRecords(ctx context.Context, c *apiClient, w io.Writer, session, cursor string, limit int, asJSON bool) error {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/v1/gates/sessions/" + url.PathEscape(session) + "/records"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var page gate.RecordPage
	if err := c.do(ctx, http.MethodGet, path, nil, &page); err != nil {
		return err
	}
	if asJSON {
		return writeJSON(w, page)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tTIME\tTURN\tGATE\tPOINT\tACTION\tBY\tMS\tERROR")
	for _, r := range page.Records {
		e := r.Error
		if e == "" {
			e = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\n", r.ID, r.StartedAt.Local().Format("2006-01-02 15:04:05"),
			r.Turn, r.Gate, r.Point, r.Action, r.ConcludedBy, r.DurationMs, e)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.Next != "" {
		fmt.Fprintf(w, "more: --cursor %s\n", page.Next)
	}
	return nil
}

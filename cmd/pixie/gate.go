package main

import (
	"bytes"
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

	"go.yaml.in/yaml/v3"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/gate"
)

func init() {
	register(verb{name: "gate", usage: "Pixie gates: pixie gate list | show NAME | apply -f gates.yaml | try | records", run: cmdGate})
}

const gateUsage = `usage:
  pixie gate list [--json]                      gates, their points, rules and presets
  pixie gate show NAME [--json]                 one gate as YAML (or JSON)
  pixie gate apply -f gates.yaml                save the whole set (gates and presets) from YAML
                                                or JSON ("-" reads stdin); refused saves list
                                                every problem by field
  pixie gate try NAME|-f gate.yaml --target TEXT|--target-file F [--tool NAME --args JSON]
                [--structured] [--agent root|child] [--json]
                                                run a saved or draft gate's task on a sample
                                                with the real model; nothing is recorded and
                                                the script is not run
  pixie gate records --session S [--limit N] [--cursor C] [--json]
                                                a session's run records, newest first
  pixie gate records RUN_ID                     one record in full (JSON)
connection flags (every subcommand): --url, --token, --home`

// cmdGate runs `pixie gate …`.
func cmdGate(ctx context.Context, args []string) int {
	return runGate(ctx, args, os.Stdin, os.Stdout, os.Stderr)
}

func runGate(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, gateUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("gate "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.add(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	file := fs.String("f", "", "YAML or JSON file (apply, try); - reads stdin")
	target := fs.String("target", "", "the sample text (try)")
	targetFile := fs.String("target-file", "", "read the sample text from this file (try)")
	tool := fs.String("tool", "", "the tool name at tool points (try)")
	toolArgs := fs.String("args", "", "the tool arguments JSON (try)")
	structured := fs.Bool("structured", false, "the tool result carries a structured value (try)")
	agent := fs.String("agent", "", "root or child (try)")
	session := fs.String("session", "", "the session (records)")
	limit := fs.Int("limit", 0, "records per page (records; default 50)")
	cursor := fs.String("cursor", "", "the next-page cursor a previous page printed (records)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return 2
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "pixie gate %s: %s\n%s\n", sub, fmt.Sprintf(format, a...), gateUsage)
		return 2
	}
	switch sub {
	case "list":
		if len(pos) != 0 {
			return usageErr("takes no arguments")
		}
	case "show":
		if len(pos) != 1 {
			return usageErr("needs the gate's name")
		}
	case "apply":
		if len(pos) != 0 || *file == "" {
			return usageErr("needs -f FILE")
		}
	case "try":
		if (len(pos) == 1) == (*file != "") || len(pos) > 1 {
			return usageErr("needs a saved gate's NAME or -f FILE, not both")
		}
		if (*target == "") == (*targetFile == "") {
			return usageErr("needs --target TEXT or --target-file FILE")
		}
	case "records":
		if (len(pos) == 1) == (*session != "") || len(pos) > 1 {
			return usageErr("needs --session S or a RUN_ID")
		}
	default:
		fmt.Fprintf(stderr, "pixie gate: unknown subcommand %q\n%s\n", sub, gateUsage)
		return 2
	}
	c, err := newClient(cf)
	if err != nil {
		return gateFail(stderr, err)
	}
	switch sub {
	case "list":
		err = gateList(ctx, c, stdout, *asJSON)
	case "show":
		err = gateShow(ctx, c, stdout, pos[0], *asJSON)
	case "apply":
		err = gateApply(ctx, c, stdin, stdout, *file)
	case "try":
		s := gate.Sample{Target: *target, Agent: *agent, Structured: *structured}
		if *targetFile != "" {
			raw, rerr := readInput(stdin, *targetFile)
			if rerr != nil {
				return gateFail(stderr, rerr)
			}
			s.Target = string(raw)
		}
		if *tool != "" || *toolArgs != "" {
			s.Tool = &gate.Tool{Name: *tool}
			if *toolArgs != "" {
				if !json.Valid([]byte(*toolArgs)) {
					return usageErr("--args must be JSON")
				}
				s.Tool.Args = json.RawMessage(*toolArgs)
			}
		}
		name := ""
		if len(pos) == 1 {
			name = pos[0]
		}
		err = gateTry(ctx, c, stdin, stdout, name, *file, s, *asJSON)
	case "records":
		if len(pos) == 1 {
			var rec json.RawMessage
			if err = c.do(ctx, http.MethodGet, "/v1/gates/records/"+url.PathEscape(pos[0]), nil, &rec); err == nil {
				err = printIndented(stdout, rec)
			}
		} else {
			err = gateRecords(ctx, c, stdout, *session, *cursor, *limit, *asJSON)
		}
	}
	if err != nil {
		return gateFail(stderr, err)
	}
	return 0
}

// gateFail prints an error; a refused save's problems are printed one per line, by field.
func gateFail(w io.Writer, err error) int {
	fmt.Fprintln(w, "pixie:", err)
	var ce *errs.Error
	if errors.As(err, &ce) && ce.Details != nil {
		raw, _ := json.Marshal(ce.Details)
		var ps []gate.Problem
		if json.Unmarshal(raw, &ps) == nil && len(ps) > 0 && ps[0].Field != "" {
			for _, p := range ps {
				fmt.Fprintf(w, "  %s: %s\n", p.Field, p.Message)
			}
		}
	}
	return 1
}

func readInput(stdin io.Reader, path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(io.LimitReader(stdin, 8<<20))
	}
	return os.ReadFile(path)
}

// yamlToJSON converts a YAML (or JSON) document to JSON, so the server's decoding (and its
// defaults for absent fields) applies unchanged.
func yamlToJSON(raw []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(raw, &v); err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "not YAML: %v", err)
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
	return nil
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

func gateApply(ctx context.Context, c *apiClient, stdin io.Reader, w io.Writer, file string) error {
	raw, err := readInput(stdin, file)
	if err != nil {
		return err
	}
	body, err := yamlToJSON(raw)
	if err != nil {
		return err
	}
	var set gate.Set
	if err := c.do(ctx, http.MethodPut, "/v1/gates", json.RawMessage(body), &set); err != nil {
		return err
	}
	fmt.Fprintf(w, "saved %d gate(s) and %d preset(s), revision %d\n", len(set.Gates), len(set.Presets), set.Revision)
	return nil
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
		if draft, err = yamlToJSON(raw); err != nil {
			return err
		}
	}
	var res gate.TryResult
	if err := c.do(ctx, http.MethodPost, "/v1/gates/try", map[string]any{"gate": draft, "sample": s}, &res); err != nil {
		return err
	}
	if asJSON {
		return writeJSON(w, res)
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
	if res.ScriptNotRun {
		fmt.Fprintln(w, "(the gate's script was not run: trials have no session sandbox policy)")
	}
	fmt.Fprintf(w, "usage: %d in, %d out\n", res.Usage.InputTokens, res.Usage.OutputTokens)
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

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printIndented(w io.Writer, raw []byte) error {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

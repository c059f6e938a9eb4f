package main

// The CLI's output helpers, in one place: JSON, tables, and printing an error exactly once.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/pixie-dev/pixie/internal/clip"
	"github.com/pixie-dev/pixie/internal/errs"
)

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printIndented prints a JSON document indented.
func printIndented(w io.Writer, raw []byte) error {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

// newTable is the CLI's table writer: columns separated by tabs, padded by two spaces.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// orDash shows an empty value as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine shows text on one line, cut to n code points.
func oneLine(s string, n int) string {
	return clip.RunesWithin(clip.OneLine(s), n, "…")
}

// printError prints err once as "pixie: …" and returns the exit code 1. When the error carries
// a list of problems (a refused save: [{field, message}], a refused Skill: [{path, reason}]),
// each problem is printed once on its own line, and the summary line stops before the
// problems the server had also joined into its message.
func printError(w io.Writer, err error) int {
	msg := err.Error()
	var e *errs.Error
	var lines []string
	if errors.As(err, &e) && e.Details != nil {
		lines = problemLines(e.Details)
		if len(lines) > 0 {
			msg = cutBefore(msg, firstProblemText(e.Details))
			if len(lines) > 1 {
				msg += fmt.Sprintf(" (%d problems)", len(lines))
			}
			msg += ":"
		} else if raw, jerr := json.MarshalIndent(e.Details, "  ", "  "); jerr == nil && string(raw) != "null" {
			lines = []string{string(raw)}
		}
	}
	if !strings.HasPrefix(msg, "pixie") {
		msg = "pixie: " + msg
	}
	fmt.Fprintln(w, msg)
	for _, l := range lines {
		fmt.Fprintln(w, " ", l)
	}
	return 1
}

// problem is either shape of a problem the server lists in an error's details.
type problem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
	Path    string `json:"path"`
	Reason  string `json:"reason"`
	Line    int    `json:"line"`
}

func problemsOf(details any) []problem {
	raw, err := json.Marshal(details)
	if err != nil {
		return nil
	}
	var ps []problem
	if json.Unmarshal(raw, &ps) != nil {
		return nil
	}
	for _, p := range ps {
		if p.Message == "" && p.Reason == "" {
			return nil
		}
	}
	return ps
}

func (p problem) text() string {
	switch {
	case p.Field != "":
		return p.Field + ": " + p.Message
	case p.Path != "":
		return p.Path + ": " + p.Reason
	case p.Message != "":
		return p.Message
	}
	return p.Reason
}

func problemLines(details any) []string {
	var out []string
	for _, p := range problemsOf(details) {
		l := p.text()
		if p.Line > 0 {
			l = fmt.Sprintf("line %d: %s", p.Line, l)
		}
		out = append(out, l)
	}
	return out
}

func firstProblemText(details any) string {
	ps := problemsOf(details)
	if len(ps) == 0 {
		return ""
	}
	return ps[0].text()
}

// cutBefore cuts msg before the first occurrence of the problem's text (and the ": " before
// it), so that the problems are not printed twice.
func cutBefore(msg, first string) string {
	if first == "" {
		return msg
	}
	i := strings.Index(msg, first)
	if i < 0 {
		return msg
	}
	out := strings.TrimRight(strings.TrimSpace(msg[:i]), ":;, ")
	if out == "" {
		return "refused"
	}
	return out
}

// failTo prints err once (printError) and returns the exit code 1.
func failTo(w io.Writer, err error) int { return printError(w, err) }

// larkShort is the short form of a Lark id in tables (its first six characters).
func larkShort(id string) string {
	if len(id) > 6 {
		return id[:6]
	}
	return id
}

// petClip is the first line of s, cut to 100 bytes, for Pet's one-line listings.
func petClip(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return clip.BytesMark(s, 100, "…")
}

// petList lists names, or says "nothing".
func petList(s []string) string {
	if len(s) == 0 {
		return "nothing"
	}
	return strings.Join(s, ", ")
}

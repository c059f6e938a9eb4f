// Package yamlline owns one repair: a YAML syntax error that names the line where the problem
// is. The YAML parser reports the line where the enclosing block began (its "context") rather
// than the line that broke it, so a bad indent on line 40 of a gate file was reported as line 1.
// Fix finds the first line at which the document stops parsing and names that line instead.
package yamlline

import (
	"bytes"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"

	yaml "go.yaml.in/yaml/v3"
)

// Error is a YAML syntax error with the line where the document first fails to parse.
type Error struct {
	Line int    // 1-based
	Msg  string // the parser's message without its "yaml: line N:" prefix
	err  error
}

func (e *Error) Error() string { return "line " + strconv.Itoa(e.Line) + ": " + e.Msg }

// Unwrap returns the parser's error.
func (e *Error) Unwrap() error { return e.err }

var syntaxErr = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line (\d+): (.*)$`) })

// Fix returns err with the line of raw where parsing first fails. Errors that are not syntax
// errors (type errors, unknown fields) name their line correctly and are returned unchanged.
func Fix(raw []byte, err error) error {
	if err == nil {
		return nil
	}
	m := syntaxErr().FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	reported, _ := strconv.Atoi(m[1])
	out := &Error{Line: reported, Msg: m[2], err: err}
	lines := bytes.SplitAfter(raw, []byte("\n"))
	fails := func(k int) (string, bool) {
		var v any
		perr := yaml.Unmarshal(bytes.Join(lines[:k], nil), &v)
		if perr == nil {
			return "", false
		}
		var te *yaml.TypeError
		if errors.As(perr, &te) {
			return "", false
		}
		if mm := syntaxErr().FindStringSubmatch(perr.Error()); mm != nil {
			return mm[2], true
		}
		return perr.Error(), true
	}
	// The smallest prefix of whole lines that fails: a prefix of a document that parses also
	// parses, apart from constructs cut in the middle (an open quote or bracket), which fail
	// with a different message and are then not trusted.
	lo, hi := 1, len(lines)
	if _, ok := fails(hi); !ok {
		return err
	}
	for lo < hi {
		mid := (lo + hi) / 2
		if _, ok := fails(mid); ok {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if msg, _ := fails(lo); msg == m[2] || strings.TrimSpace(msg) == strings.TrimSpace(m[2]) {
		out.Line = lo
	}
	return out
}

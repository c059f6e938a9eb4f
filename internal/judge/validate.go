package judge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// Limits of one judge request. They hold for every engine.
const (
	MaxQuestions  = 20  // questions per request (the llm engine makes one model call each)
	MinOptions    = 2   // select options
	MaxOptions    = 26  // select options (the llm engine answers with the letters A–Z)
	MinLevels     = 2   // score levels
	MaxLevels     = 10  // score levels (the llm engine answers with the digits 0–9)
	MaxNameLength = 100 // bytes of a select option name
	MaxIDLength   = 64  // bytes of a question id
)

var idRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Validate checks a request against the types and limits: at least one and at most
// MaxQuestions questions with sane ids (letters, digits, '_', '.', '-'; at most MaxIDLength
// bytes), non-empty instructions, a known wire type (noul, choice, score) and criteria that fit
// it: select has MinOptions–MaxOptions options with unique non-empty single-line names, score
// has MinLevels–MaxLevels non-empty levels, and no type carries another type's criteria.
// Problems are errs.Invalid errors naming the question.
func Validate(req abi.JudgeRequest) error {
	if len(req.Questions) == 0 {
		return errs.New(errs.Invalid, "a judgment needs at least one question")
	}
	if len(req.Questions) > MaxQuestions {
		return errs.New(errs.Invalid, "a judgment has at most %d questions, got %d", MaxQuestions, len(req.Questions))
	}
	for _, id := range sortedIDs(req.Questions) {
		if err := validateQuestion(id, req.Questions[id]); err != nil {
			return err
		}
	}
	return nil
}

func validateQuestion(id string, q abi.Question) error {
	bad := func(format string, args ...any) error {
		return errs.New(errs.Invalid, "question %q: %s", id, fmt.Sprintf(format, args...))
	}
	if len(id) > MaxIDLength || !idRE.MatchString(id) {
		return errs.New(errs.Invalid, "question id %q: use 1-%d letters, digits, '_', '.' or '-'", id, MaxIDLength)
	}
	if strings.TrimSpace(q.Instructions) == "" {
		return bad("the instructions are empty; write the full question there")
	}
	c := q.Criteria
	switch q.Type {
	case abi.JudgeBool:
		if len(c.Options) > 0 || len(c.Levels) > 0 {
			return bad("a bool (noul) question takes only the optional true/false meanings, not options or levels")
		}
	case abi.JudgeSelect:
		if c.True != "" || c.False != "" || len(c.Levels) > 0 {
			return bad("a select (choice) question takes only options")
		}
		if len(c.Options) < MinOptions || len(c.Options) > MaxOptions {
			return bad("a select (choice) question needs %d to %d options, got %d", MinOptions, MaxOptions, len(c.Options))
		}
		seen := map[string]bool{}
		for i, o := range c.Options {
			switch {
			case strings.TrimSpace(o.Name) == "":
				return bad("option %d has an empty name", i+1)
			case o.Name != strings.TrimSpace(o.Name):
				return bad("option name %q has leading or trailing spaces", o.Name)
			case len(o.Name) > MaxNameLength:
				return bad("option name %q is longer than %d bytes", o.Name, MaxNameLength)
			case strings.IndexFunc(o.Name, unicode.IsControl) >= 0:
				return bad("option name %q contains a control character", o.Name)
			case seen[o.Name]:
				return bad("option name %q appears twice", o.Name)
			}
			seen[o.Name] = true
		}
	case abi.JudgeScore:
		if c.True != "" || c.False != "" || len(c.Options) > 0 {
			return bad("a score question takes only levels")
		}
		if len(c.Levels) < MinLevels || len(c.Levels) > MaxLevels {
			return bad("a score question needs %d to %d levels, got %d", MinLevels, MaxLevels, len(c.Levels))
		}
		for i, l := range c.Levels {
			if strings.TrimSpace(l) == "" {
				return bad("level %d is empty", i)
			}
		}
	default:
		return bad("unknown type %q: use %q (bool), %q (select) or %q (score)", q.Type, abi.JudgeBool, abi.JudgeSelect, abi.JudgeScore)
	}
	return nil
}

// DecodeRequest reads a judge request in TypeSafe Jev's request shape, as the `judge` tool and
// POST /v1/judge take it:
//
//	{"state": "…" | {…} | […],
//	 "questions": {"<id>": {"type": "noul"|"choice"|"score", "instructions": "…", "criteria": …}}}
//
// where criteria is {"true": "…", "false": "…"} for noul, an object of option name to
// description (in order) for choice, and an array of level descriptions (lowest first) for
// score. Pixie's own shape (criteria {"options": [{name, description}]} or {"levels": […]}) and
// the command-line type names bool and select are accepted too. A structured state or
// instructions value is kept as its compact JSON text. A "model" field is ignored (the
// engine's configuration chooses the model). The result is validated.
func DecodeRequest(data []byte) (abi.JudgeRequest, error) {
	var top struct {
		State     json.RawMessage            `json:"state"`
		Questions map[string]json.RawMessage `json:"questions"`
		Model     json.RawMessage            `json:"model"`
	}
	if err := strictDecode(data, &top); err != nil {
		return abi.JudgeRequest{}, errs.Wrap(errs.Invalid, err, "the judge request is not valid JSON in the Jev shape: %v", err)
	}
	var req abi.JudgeRequest
	var err error
	if req.State, err = contentText(top.State); err != nil {
		return abi.JudgeRequest{}, errs.New(errs.Invalid, "state: %v", err)
	}
	if len(top.Questions) > MaxQuestions {
		return abi.JudgeRequest{}, errs.New(errs.Invalid, "a judgment has at most %d questions, got %d", MaxQuestions, len(top.Questions))
	}
	req.Questions = make(map[string]abi.Question, len(top.Questions))
	for id, raw := range top.Questions {
		q, err := decodeQuestion(raw)
		if err != nil {
			return abi.JudgeRequest{}, errs.New(errs.Invalid, "question %q: %v", id, err)
		}
		req.Questions[id] = q
	}
	if err := Validate(req); err != nil {
		return abi.JudgeRequest{}, err
	}
	return req, nil
}

func decodeQuestion(raw json.RawMessage) (abi.Question, error) {
	var wq struct {
		Type         string          `json:"type"`
		Instructions json.RawMessage `json:"instructions"`
		Criteria     json.RawMessage `json:"criteria"`
	}
	if err := strictDecode(raw, &wq); err != nil {
		return abi.Question{}, err
	}
	q := abi.Question{Type: strings.ToLower(strings.TrimSpace(wq.Type))}
	switch q.Type {
	case "bool":
		q.Type = abi.JudgeBool
	case "select":
		q.Type = abi.JudgeSelect
	}
	var err error
	if q.Instructions, err = contentText(wq.Instructions); err != nil {
		return abi.Question{}, fmt.Errorf("instructions: %w", err)
	}
	crit := bytes.TrimSpace(wq.Criteria)
	if len(crit) == 0 || string(crit) == "null" {
		return q, nil
	}
	switch q.Type {
	case abi.JudgeBool:
		var c struct {
			True  string `json:"true"`
			False string `json:"false"`
		}
		if err := strictDecode(crit, &c); err != nil {
			return abi.Question{}, fmt.Errorf("noul criteria must be {\"true\": \"…\", \"false\": \"…\"}: %w", err)
		}
		q.Criteria.True, q.Criteria.False = c.True, c.False
	case abi.JudgeSelect:
		q.Criteria.Options, err = decodeOptions(crit)
		if err != nil {
			return abi.Question{}, fmt.Errorf("choice criteria: %w", err)
		}
	case abi.JudgeScore:
		q.Criteria.Levels, err = decodeLevels(crit)
		if err != nil {
			return abi.Question{}, fmt.Errorf("score criteria: %w", err)
		}
	default:
		// Validate names the unknown type.
	}
	return q, nil
}

// decodeOptions reads choice criteria: {"name": "description", …} in order (Jev), or
// {"options": [{"name", "description"}, …]} (Pixie), or ["name", …].
func decodeOptions(raw []byte) ([]abi.Option, error) {
	if raw[0] == '[' {
		var names []string
		if err := json.Unmarshal(raw, &names); err == nil {
			opts := make([]abi.Option, len(names))
			for i, n := range names {
				opts[i] = abi.Option{Name: n}
			}
			return opts, nil
		}
		var opts []abi.Option
		if err := strictDecode(raw, &opts); err != nil {
			return nil, err
		}
		return opts, nil
	}
	var pixie struct {
		Options []abi.Option `json:"options"`
	}
	if strictDecode(raw, &pixie) == nil && pixie.Options != nil {
		return pixie.Options, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("want an object of option name to description")
	}
	var opts []abi.Option
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := t.(string)
		var desc *string
		if err := dec.Decode(&desc); err != nil {
			return nil, fmt.Errorf("option %q: the description must be a string", name)
		}
		o := abi.Option{Name: name}
		if desc != nil {
			o.Description = *desc
		}
		opts = append(opts, o)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return opts, nil
}

// decodeLevels reads score criteria: ["level 0", "level 1", …] (Jev) or {"levels": […]}.
func decodeLevels(raw []byte) ([]string, error) {
	if raw[0] == '[' {
		var levels []string
		if err := json.Unmarshal(raw, &levels); err != nil {
			return nil, fmt.Errorf("want an array of level descriptions, lowest first")
		}
		return levels, nil
	}
	var pixie struct {
		Levels []string `json:"levels"`
	}
	if err := strictDecode(raw, &pixie); err != nil {
		return nil, fmt.Errorf("want an array of level descriptions, lowest first")
	}
	return pixie.Levels, nil
}

// contentText turns a Jev content value (string, object or array) into text: a string as is,
// structured data as compact JSON.
func contentText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	case '{', '[':
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return "", err
		}
		return buf.String(), nil
	default:
		return "", fmt.Errorf("must be a string, an object or an array")
	}
}

// strictDecode is abi.DecodeStrict in the judge's words.
func strictDecode(data []byte, v any) error {
	if err := abi.DecodeStrict(data, v); errors.Is(err, abi.ErrTrailingData) {
		return fmt.Errorf("data after the JSON value")
	} else if err != nil {
		return err
	}
	return nil
}

// Package helpercli owns the command side of the `pixie ask` and `pixie judge` helper that gate
// scripts call: flag parsing, the request to the run's helper routes on the Pixie server
// ($PIXIE_URL/v1/helper/ask and /v1/helper/judge, authorised by $PIXIE_TOKEN), and the output
// and exit codes of spec/pixie-gate.md:
//
//	pixie ask "<instruction>" [--input]
//	pixie judge [--type bool|select|score] --question "<question>" [type arguments] [--json] [--input]
//
// ask prints the answer and exits 0. judge prints the "yes" probability for bool (exit 0 at or
// above --threshold, 1 below), the chosen option name for select, the score for score (exit
// 0), or with --json one line {"type","label","answer","engine"}. Every failure — usage, the
// helper missing, HTTP, network — exits 2 with a message on stderr, so a failed judgment is
// never read as "no". The package only builds requests and prints answers; the judging is the
// server's (internal/judge).
package helpercli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/pixie-dev/pixie/sdk/abi"
)

// Exit codes of the helper.
const (
	ExitOK    = 0 // success (bool: at or above the threshold)
	ExitBelow = 1 // bool: below the threshold
	ExitError = 2 // any failure
)

// Limits checked before a request is sent (the server checks them again).
const (
	minOptions = 2
	minLevels  = 2
	maxLevels  = 10
	// maxResponse caps the response read from the server.
	maxResponse = 4 << 20
	// thresholdSlack absorbs floating-point rounding at the threshold's edge: 0.7 computed as
	// 0.69999999999 still passes --threshold 0.7.
	thresholdSlack = 1e-9
)

// NotAvailable is the message printed when the command runs outside a script run (no
// PIXIE_URL or PIXIE_TOKEN), or the server cannot be reached.
const NotAvailable = "pixie: helper is not available"

const askUsage = `usage: pixie ask "<instruction>" [--input]

  --input   read the input from stdin (otherwise the gate target is used)`

const judgeUsage = `usage: pixie judge [--type bool|select|score] --question "<question>" [type arguments] [--json] [--input]

  --type bool|select|score   judgment type (default bool)
  --question "<question>"    the full judgment (required)
  --threshold N              bool: exit 0 at or above N, 1 below (default 0.5)
  --true "<meaning>"         bool: what yes means (optional)
  --false "<meaning>"        bool: what no means (optional)
  --option name="<desc>"     select: an option (two or more, repeatable)
  --level "<desc>"           score: a level, lowest first (2 to 10, repeatable)
  --json                     print {"type","label","answer","engine"} on one line
  --input                    read the input from stdin (otherwise the gate target is used)`

// usageError is a command-line mistake.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// flagSpec says whether a flag takes a value and may repeat.
type flagSpec struct {
	value  bool
	repeat bool
}

// parseArgs reads --name value, --name=value and boolean --name flags (one or two dashes) in
// any position; "--" ends the flags. Other arguments are positional.
func parseArgs(args []string, specs map[string]flagSpec) (map[string][]string, []string, error) {
	vals := map[string][]string{}
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		name := strings.TrimLeft(a, "-")
		value, hasValue := "", false
		if k, v, ok := strings.Cut(name, "="); ok {
			name, value, hasValue = k, v, true
		}
		if name == "h" || name == "help" {
			return nil, nil, errHelp
		}
		spec, ok := specs[name]
		if !ok {
			return nil, nil, usagef("unknown flag --%s", name)
		}
		switch {
		case spec.value && !hasValue:
			if i+1 >= len(args) {
				return nil, nil, usagef("--%s needs a value", name)
			}
			i++
			value = args[i]
		case !spec.value && hasValue:
			return nil, nil, usagef("--%s takes no value", name)
		}
		if !spec.repeat && len(vals[name]) > 0 {
			return nil, nil, usagef("--%s is given twice", name)
		}
		vals[name] = append(vals[name], value)
	}
	return vals, pos, nil
}

var errHelp = errors.New("help")

// Ask runs `pixie ask`; args are the arguments after "ask". env reads the environment
// (os.Getenv). It returns the exit code.
func Ask(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env func(string) string) int {
	vals, pos, err := parseArgs(args, map[string]flagSpec{"input": {}})
	if code, done := handleParse(err, askUsage, stdout, stderr); done {
		return code
	}
	instruction := strings.TrimSpace(strings.Join(pos, " "))
	if instruction == "" {
		return fail(stderr, usagef("the instruction is missing"), askUsage)
	}
	c, err := newClient(env)
	if err != nil {
		return fail(stderr, err, "")
	}
	req := abi.AskRequest{Instruction: instruction}
	if _, ok := vals["input"]; ok {
		if req.Input, err = readInput(stdin); err != nil {
			return fail(stderr, err, "")
		}
	} else {
		req.UseTarget = true
	}
	var resp abi.AskResponse
	if err := c.post(ctx, "/v1/helper/ask", req, &resp); err != nil {
		return fail(stderr, err, "")
	}
	text := resp.Text
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	if _, err := io.WriteString(stdout, text); err != nil {
		return ExitError
	}
	return ExitOK
}

// judgeArgs is a parsed `pixie judge` command line.
type judgeArgs struct {
	cliType   string // bool, select or score
	question  abi.Question
	threshold float64
	json      bool
	input     bool
}

var cliTypes = map[string]string{
	"bool": abi.JudgeBool, "select": abi.JudgeSelect, "score": abi.JudgeScore,
	// The wire names are accepted too ("score" is both).
	abi.JudgeBool: abi.JudgeBool, abi.JudgeSelect: abi.JudgeSelect,
}

var wireToCLI = map[string]string{abi.JudgeBool: "bool", abi.JudgeSelect: "select", abi.JudgeScore: "score"}

func parseJudge(args []string) (judgeArgs, error) {
	vals, pos, err := parseArgs(args, map[string]flagSpec{
		"type": {value: true}, "question": {value: true}, "threshold": {value: true},
		"true": {value: true}, "false": {value: true},
		"option": {value: true, repeat: true}, "level": {value: true, repeat: true},
		"json": {}, "input": {},
	})
	if err != nil {
		return judgeArgs{}, err
	}
	if len(pos) > 0 {
		return judgeArgs{}, usagef("unexpected argument %q (write the judgment in --question)", pos[0])
	}
	get := func(name string) (string, bool) {
		v, ok := vals[name]
		if !ok {
			return "", false
		}
		return v[0], true
	}
	ja := judgeArgs{cliType: "bool", threshold: 0.5}
	if t, ok := get("type"); ok {
		wire, known := cliTypes[strings.ToLower(strings.TrimSpace(t))]
		if !known {
			return judgeArgs{}, usagef("--type must be bool, select or score, got %q", t)
		}
		ja.cliType = wireToCLI[wire]
	}
	ja.question.Type = cliTypes[ja.cliType]
	ja.question.Instructions, _ = get("question")
	if strings.TrimSpace(ja.question.Instructions) == "" {
		return judgeArgs{}, usagef("--question is required")
	}
	_, ja.json = vals["json"]
	_, ja.input = vals["input"]
	only := func(typ string, names ...string) error {
		for _, n := range names {
			if _, ok := vals[n]; ok && ja.cliType != typ {
				return usagef("--%s applies to --type %s only", n, typ)
			}
		}
		return nil
	}
	for _, err := range []error{only("bool", "threshold", "true", "false"), only("select", "option"), only("score", "level")} {
		if err != nil {
			return judgeArgs{}, err
		}
	}
	switch ja.cliType {
	case "bool":
		if t, ok := get("threshold"); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
			if err != nil || math.IsNaN(f) || f < 0 || f > 1 {
				return judgeArgs{}, usagef("--threshold must be a number from 0 to 1, got %q", t)
			}
			ja.threshold = f
		}
		ja.question.Criteria.True, _ = get("true")
		ja.question.Criteria.False, _ = get("false")
	case "select":
		for _, o := range vals["option"] {
			name, desc, _ := strings.Cut(o, "=")
			name = strings.TrimSpace(name)
			if name == "" {
				return judgeArgs{}, usagef("--option %q has no name (write name=\"description\")", o)
			}
			ja.question.Criteria.Options = append(ja.question.Criteria.Options, abi.Option{Name: name, Description: strings.TrimSpace(desc)})
		}
		if len(ja.question.Criteria.Options) < minOptions {
			return judgeArgs{}, usagef("--type select needs two or more --option name=\"description\"")
		}
	case "score":
		ja.question.Criteria.Levels = vals["level"]
		if n := len(ja.question.Criteria.Levels); n < minLevels || n > maxLevels {
			return judgeArgs{}, usagef("--type score needs %d to %d --level values (lowest first), got %d", minLevels, maxLevels, n)
		}
	}
	return ja, nil
}

// Judge runs `pixie judge`; args are the arguments after "judge". env reads the environment
// (os.Getenv). It returns the exit code: 0 (bool: at or above the threshold), 1 (bool: below
// it) or 2 (any failure).
func Judge(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env func(string) string) int {
	ja, err := parseJudge(args)
	if code, done := handleParse(err, judgeUsage, stdout, stderr); done {
		return code
	}
	c, err := newClient(env)
	if err != nil {
		return fail(stderr, err, "")
	}
	req := abi.JudgeRequest{Questions: map[string]abi.Question{"q": ja.question}}
	if ja.input {
		if req.State, err = readInput(stdin); err != nil {
			return fail(stderr, err, "")
		}
	} else {
		req.UseTarget = true
	}
	var resp abi.JudgeResponse
	if err := c.post(ctx, "/v1/helper/judge", req, &resp); err != nil {
		return fail(stderr, err, "")
	}
	out, code, err := render(ja, resp)
	if err != nil {
		return fail(stderr, err, "")
	}
	if _, err := io.WriteString(stdout, out+"\n"); err != nil {
		return ExitError
	}
	return code
}

// jsonLine is the --json output.
type jsonLine struct {
	Type   string     `json:"type"` // bool, select or score
	Label  string     `json:"label"`
	Answer jsonAnswer `json:"answer"`
	Engine string     `json:"engine"`
}

type jsonAnswer struct {
	Probabilities map[string]float64 `json:"probabilities"`
	Confidence    float64            `json:"confidence"`
	Yes           *float64           `json:"yes,omitempty"`
	Score         *float64           `json:"score,omitempty"`
}

// render turns the server's answer into the printed line and the exit code. An answer that is
// missing or not of the asked type is an error, never a "no".
func render(ja judgeArgs, resp abi.JudgeResponse) (string, int, error) {
	a, ok := resp.Answers["q"]
	if !ok {
		return "", ExitError, errors.New("pixie: the helper returned no answer")
	}
	if a.Type != "" && a.Type != ja.question.Type {
		return "", ExitError, fmt.Errorf("pixie: the helper answered a %s question, not %s", a.Type, ja.question.Type)
	}
	code := ExitOK
	var text string
	switch ja.cliType {
	case "bool":
		yes := a.Yes
		if yes == nil {
			if p, ok := a.Probabilities["yes"]; ok {
				yes = &p
			}
		}
		if yes == nil || math.IsNaN(*yes) || *yes < 0 || *yes > 1 {
			return "", ExitError, errors.New("pixie: the helper's answer has no yes probability")
		}
		a.Yes = yes
		if *yes < ja.threshold-thresholdSlack {
			code = ExitBelow
		}
		text = strconv.FormatFloat(*yes, 'f', 4, 64)
	case "select":
		known := false
		for _, o := range ja.question.Criteria.Options {
			known = known || o.Name == a.Label
		}
		if !known {
			return "", ExitError, fmt.Errorf("pixie: the helper's answer %q is not one of the options", a.Label)
		}
		text = a.Label
	case "score":
		if a.Score == nil || math.IsNaN(*a.Score) {
			return "", ExitError, errors.New("pixie: the helper's answer has no score")
		}
		text = strconv.FormatFloat(math.Round(*a.Score*1e4)/1e4, 'f', -1, 64)
	}
	if !ja.json {
		return text, code, nil
	}
	line := jsonLine{Type: ja.cliType, Label: a.Label, Engine: resp.Engine,
		Answer: jsonAnswer{Probabilities: a.Probabilities, Confidence: a.Confidence}}
	switch ja.cliType {
	case "bool":
		line.Answer.Yes = a.Yes
		if line.Label == "" {
			line.Label = "no"
			if *a.Yes >= 0.5 {
				line.Label = "yes"
			}
		}
	case "score":
		line.Answer.Score = a.Score
		if line.Label == "" {
			line.Label = strconv.Itoa(int(math.Round(*a.Score)))
		}
	}
	if line.Answer.Probabilities == nil {
		line.Answer.Probabilities = map[string]float64{}
	}
	b, err := json.Marshal(line)
	if err != nil {
		return "", ExitError, fmt.Errorf("pixie: %v", err)
	}
	return string(b), code, nil
}

// handleParse prints help or a usage error; done is true when the command must stop.
func handleParse(err error, usage string, stdout, stderr io.Writer) (int, bool) {
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, errHelp):
		fmt.Fprintln(stdout, usage)
		return ExitOK, true
	default:
		return fail(stderr, err, usage), true
	}
}

// fail prints err (with the usage after a usage error) and returns ExitError.
func fail(stderr io.Writer, err error, usage string) int {
	msg := err.Error()
	if !strings.HasPrefix(msg, "pixie:") {
		msg = "pixie: " + msg
	}
	fmt.Fprintln(stderr, msg)
	var ue *usageError
	if usage != "" && errors.As(err, &ue) {
		fmt.Fprintln(stderr, usage)
	}
	return ExitError
}

// readInput reads stdin, refusing more than the helper's request limit.
func readInput(stdin io.Reader) (string, error) {
	if stdin == nil {
		return "", nil
	}
	b, err := io.ReadAll(io.LimitReader(stdin, abi.MaxHelperRequestSize+1))
	if err != nil {
		return "", fmt.Errorf("pixie: cannot read the input: %v", err)
	}
	if len(b) > abi.MaxHelperRequestSize {
		return "", fmt.Errorf("pixie: the input is larger than %d KB", abi.MaxHelperRequestSize/1024)
	}
	return string(b), nil
}

// client calls the run's helper routes.
type client struct {
	url, token string
	http       *http.Client
}

func newClient(env func(string) string) (*client, error) {
	if env == nil {
		return nil, errors.New(NotAvailable)
	}
	u, tok := strings.TrimSpace(env(abi.VarURL)), strings.TrimSpace(env(abi.VarToken))
	if u == "" || tok == "" {
		return nil, errors.New(NotAvailable)
	}
	return &client{url: strings.TrimRight(u, "/"), token: tok, http: &http.Client{}}, nil
}

// post sends body as JSON and decodes a 200 answer into out. An error status becomes
// "pixie: HTTP <status>: <message>"; a network failure "pixie: helper is not available: …".
func (c *client) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("pixie: %v", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+path, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%s: PIXIE_URL is not a usable URL", NotAvailable)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	res, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("pixie: the call was cancelled or timed out: %v", ctx.Err())
		}
		return fmt.Errorf("%s: %s", NotAvailable, strings.ReplaceAll(err.Error(), c.token, "[token]"))
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("pixie: reading the answer failed: %v", err)
	}
	if res.StatusCode != http.StatusOK {
		var e struct {
			Error abi.Error `json:"error"`
		}
		if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
			return fmt.Errorf("pixie: HTTP %d: %s", res.StatusCode, e.Error.Message)
		}
		return fmt.Errorf("pixie: HTTP %d", res.StatusCode)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("pixie: the helper's answer is not valid JSON")
	}
	return nil
}

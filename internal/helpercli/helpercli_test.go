package helpercli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/pixie-dev/pixie/sdk/abi"
)

const token = "run-token-0123456789"

// helperServer stands in for the Pixie server's helper routes: it checks the token, decodes
// the request strictly (as the server does) and answers with status and body.
type helperServer struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	calls  int
	path   string
	judge  abi.JudgeRequest
	ask    abi.AskRequest
	status int
	body   string
}

func newHelperServer(t *testing.T, status int, body string) *helperServer {
	h := &helperServer{t: t, status: status, body: body}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.calls++
		h.path = r.URL.Path
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer "+token || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"code":"unauthorized","message":"bad request headers"}}`)
			return
		}
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		var err error
		switch r.URL.Path {
		case "/v1/helper/judge":
			err = dec.Decode(&h.judge)
		case "/v1/helper/ask":
			err = dec.Decode(&h.ask)
		default:
			w.WriteHeader(http.StatusNotFound)
			return
		}
		if err != nil {
			t.Errorf("request does not decode strictly: %v", err)
		}
		w.WriteHeader(h.status)
		_, _ = io.WriteString(w, h.body)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *helperServer) env(name string) string {
	switch name {
	case abi.VarURL:
		return h.srv.URL + "/"
	case abi.VarToken:
		return token
	}
	return ""
}

func boolAnswer(yes float64) string {
	b, _ := json.Marshal(abi.JudgeResponse{Engine: "llm", Usage: abi.Usage{InputTokens: 10, OutputTokens: 1},
		Answers: map[string]abi.Answer{"q": {Type: abi.JudgeBool, Label: map[bool]string{true: "yes", false: "no"}[yes >= 0.5],
			Probabilities: map[string]float64{"yes": yes, "no": 1 - yes}, Yes: &yes, Confidence: 0.45}}})
	return string(b)
}

const selectAnswer = `{"answers":{"q":{"type":"choice","label":"missing","probabilities":{"supported":0.1,"contradicted":0.2,"missing":0.7},"confidence":0.3}},"engine":"jev","usage":{"inputTokens":5,"outputTokens":0}}`

const scoreAnswer = `{"answers":{"q":{"type":"score","label":"3","probabilities":{"0":0,"1":0,"2":0.052632,"3":0.631579,"4":0.315789},"score":3.263158,"confidence":0.726518}},"engine":"llm","usage":{"inputTokens":5,"outputTokens":1}}`

func TestJudge(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		stdin      string
		status     int
		body       string
		wantCode   int
		wantOut    string // exact stdout
		wantErr    string // substring of stderr
		wantCalled bool
		check      func(t *testing.T, req abi.JudgeRequest)
	}{
		{name: "bool from stdin", args: []string{"--question", "Is this Korean?", "--input"}, stdin: "안녕하세요",
			status: 200, body: boolAnswer(0.8731), wantCode: 0, wantOut: "0.8731\n", wantCalled: true,
			check: func(t *testing.T, r abi.JudgeRequest) {
				q := r.Questions["q"]
				if r.State != "안녕하세요" || r.UseTarget || q.Type != abi.JudgeBool || q.Instructions != "Is this Korean?" || len(r.Questions) != 1 {
					t.Errorf("request = %+v", r)
				}
			}},
		{name: "gate target without --input", args: []string{"--type", "bool", "--question", "Done?"}, stdin: "ignored",
			status: 200, body: boolAnswer(0.2), wantCode: 1, wantOut: "0.2000\n", wantCalled: true,
			check: func(t *testing.T, r abi.JudgeRequest) {
				if !r.UseTarget || r.State != "" {
					t.Errorf("request = %+v", r)
				}
			}},
		{name: "old form with threshold, below", args: []string{"--question", "Faithful?", "--threshold", "0.7", "--input"},
			status: 200, body: boolAnswer(0.6999), wantCode: 1, wantOut: "0.6999\n", wantCalled: true},
		{name: "threshold exactly at the edge", args: []string{"--question", "Faithful?", "--threshold", "0.7", "--input"},
			status: 200, body: boolAnswer(0.7), wantCode: 0, wantOut: "0.7000\n", wantCalled: true},
		{name: "default threshold at 0.5", args: []string{"--question", "Q?"},
			status: 200, body: boolAnswer(0.5), wantCode: 0, wantOut: "0.5000\n", wantCalled: true},
		{name: "default threshold just below 0.5", args: []string{"--question", "Q?"},
			status: 200, body: boolAnswer(0.49999), wantCode: 1, wantOut: "0.5000\n", wantCalled: true},
		{name: "threshold 1 needs certainty", args: []string{"--question", "Q?", "--threshold=1"},
			status: 200, body: boolAnswer(1), wantCode: 0, wantOut: "1.0000\n", wantCalled: true},
		{name: "threshold 0 always passes", args: []string{"--question", "Q?", "--threshold", "0"},
			status: 200, body: boolAnswer(0), wantCode: 0, wantOut: "0.0000\n", wantCalled: true},
		{name: "true and false meanings", args: []string{"--question", "Korean?", "--true", "the prose is Korean", "--false", "it is not"},
			status: 200, body: boolAnswer(0.9), wantCode: 0, wantOut: "0.9000\n", wantCalled: true,
			check: func(t *testing.T, r abi.JudgeRequest) {
				if c := r.Questions["q"].Criteria; c.True != "the prose is Korean" || c.False != "it is not" {
					t.Errorf("criteria = %+v", c)
				}
			}},
		{name: "bool --json", args: []string{"--question", "Q?", "--json", "--threshold", "0.9"},
			status: 200, body: boolAnswer(0.8731), wantCode: 1, wantCalled: true,
			wantOut: `{"type":"bool","label":"yes","answer":{"probabilities":{"no":0.1269,"yes":0.8731},"confidence":0.45,"yes":0.8731},"engine":"llm"}` + "\n"},
		{name: "select", args: []string{"--type", "select", "--question", "Supported?", "--input",
			"--option", `supported=evidence shows the claimed tests ran and passed`, "--option", "contradicted=evidence shows a failure", "--option=missing=no run"},
			stdin: `{"answer":"a","evidence":"b"}`, status: 200, body: selectAnswer, wantCode: 0, wantOut: "missing\n", wantCalled: true,
			check: func(t *testing.T, r abi.JudgeRequest) {
				q := r.Questions["q"]
				want := []abi.Option{{Name: "supported", Description: "evidence shows the claimed tests ran and passed"},
					{Name: "contradicted", Description: "evidence shows a failure"}, {Name: "missing", Description: "no run"}}
				if q.Type != abi.JudgeSelect || len(q.Criteria.Options) != 3 || q.Criteria.Options[0] != want[0] || q.Criteria.Options[2] != want[2] {
					t.Errorf("question = %+v", q)
				}
			}},
		{name: "select --json", args: []string{"--type", "select", "--json", "--question", "Q?", "--option", "supported=a", "--option", "contradicted=b", "--option", "missing=c"},
			status: 200, body: selectAnswer, wantCode: 0, wantCalled: true,
			wantOut: `{"type":"select","label":"missing","answer":{"probabilities":{"contradicted":0.2,"missing":0.7,"supported":0.1},"confidence":0.3},"engine":"jev"}` + "\n"},
		{name: "score", args: []string{"--type", "score", "--question", "How good?", "--level", "bad", "--level", "poor", "--level", "fair", "--level", "good", "--level", "great"},
			status: 200, body: scoreAnswer, wantCode: 0, wantOut: "3.2632\n", wantCalled: true,
			check: func(t *testing.T, r abi.JudgeRequest) {
				if l := r.Questions["q"].Criteria.Levels; strings.Join(l, ",") != "bad,poor,fair,good,great" {
					t.Errorf("levels = %v", l)
				}
			}},
		{name: "score --json", args: []string{"--type", "score", "--json", "--question", "How good?", "--level", "a", "--level", "b", "--level", "c", "--level", "d", "--level", "e"},
			status: 200, body: scoreAnswer, wantCode: 0, wantCalled: true,
			wantOut: `{"type":"score","label":"3","answer":{"probabilities":{"0":0,"1":0,"2":0.052632,"3":0.631579,"4":0.315789},"confidence":0.726518,"score":3.263158},"engine":"llm"}` + "\n"},
		{name: "score with 10 levels", args: append([]string{"--type", "score", "--question", "Q?"}, levels(10)...),
			status: 200, body: scoreAnswer, wantCode: 0, wantOut: "3.2632\n", wantCalled: true},
		{name: "HTTP 401", args: []string{"--question", "Q?"}, status: 401, body: `{"error":{"code":"unauthorized","message":"the helper token is not valid, or its run has ended"}}`,
			wantCode: 2, wantErr: "pixie: HTTP 401: the helper token is not valid, or its run has ended\n", wantCalled: true},
		{name: "HTTP 429", args: []string{"--question", "Q?"}, status: 429, body: `{"error":{"code":"rate_limited","message":"a run makes at most 20 helper calls"}}`,
			wantCode: 2, wantErr: "pixie: HTTP 429: a run makes at most 20 helper calls", wantCalled: true},
		{name: "HTTP 503 Jev key", args: []string{"--question", "Q?"}, status: 503, body: `{"error":{"code":"unavailable","message":"Jev API key is not configured"}}`,
			wantCode: 2, wantErr: "pixie: HTTP 503: Jev API key is not configured", wantCalled: true},
		{name: "HTTP 502 without body", args: []string{"--question", "Q?"}, status: 502, body: ``, wantCode: 2, wantErr: "pixie: HTTP 502\n", wantCalled: true},
		{name: "no answer", args: []string{"--question", "Q?"}, status: 200, body: `{"answers":{},"engine":"llm"}`, wantCode: 2, wantErr: "no answer", wantCalled: true},
		{name: "select label not an option", args: []string{"--type", "select", "--question", "Q?", "--option", "a", "--option", "b"}, status: 200, body: selectAnswer,
			wantCode: 2, wantErr: "not one of the options", wantCalled: true},
		{name: "garbage answer", args: []string{"--question", "Q?"}, status: 200, body: `<html>`, wantCode: 2, wantErr: "not valid JSON", wantCalled: true},
		{name: "unknown type", args: []string{"--type", "rank", "--question", "Q?"}, wantCode: 2, wantErr: "--type must be bool, select or score"},
		{name: "missing question", args: []string{"--threshold", "0.5"}, wantCode: 2, wantErr: "--question is required"},
		{name: "threshold above 1", args: []string{"--question", "Q?", "--threshold", "1.01"}, wantCode: 2, wantErr: "from 0 to 1"},
		{name: "threshold not a number", args: []string{"--question", "Q?", "--threshold", "high"}, wantCode: 2, wantErr: "from 0 to 1"},
		{name: "threshold for select", args: []string{"--type", "select", "--question", "Q?", "--threshold", "0.5", "--option", "a", "--option", "b"}, wantCode: 2, wantErr: "--threshold applies to --type bool only"},
		{name: "one option", args: []string{"--type", "select", "--question", "Q?", "--option", "a=x"}, wantCode: 2, wantErr: "two or more --option"},
		{name: "option without name", args: []string{"--type", "select", "--question", "Q?", "--option", "=x", "--option", "b"}, wantCode: 2, wantErr: "has no name"},
		{name: "one level", args: []string{"--type", "score", "--question", "Q?", "--level", "a"}, wantCode: 2, wantErr: "2 to 10 --level values"},
		{name: "eleven levels", args: append([]string{"--type", "score", "--question", "Q?"}, levels(11)...), wantCode: 2, wantErr: "got 11"},
		{name: "level for bool", args: []string{"--question", "Q?", "--level", "a"}, wantCode: 2, wantErr: "--level applies to --type score only"},
		{name: "unknown flag", args: []string{"--question", "Q?", "--verbose"}, wantCode: 2, wantErr: "unknown flag --verbose"},
		{name: "positional argument", args: []string{"Is it done?"}, wantCode: 2, wantErr: "unexpected argument"},
		{name: "flag twice", args: []string{"--question", "a", "--question", "b"}, wantCode: 2, wantErr: "--question is given twice"},
		{name: "missing value", args: []string{"--question"}, wantCode: 2, wantErr: "--question needs a value"},
		{name: "value on a switch", args: []string{"--question", "Q?", "--json=yes"}, wantCode: 2, wantErr: "--json takes no value"},
		{name: "help", args: []string{"--help"}, wantCode: 0, wantOut: judgeUsage + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHelperServer(t, tt.status, tt.body)
			var stdout, stderr bytes.Buffer
			code := Judge(context.Background(), tt.args, strings.NewReader(tt.stdin), &stdout, &stderr, h.env)
			if code != tt.wantCode {
				t.Errorf("exit = %d, want %d (stderr %q)", code, tt.wantCode, stderr.String())
			}
			if tt.wantOut != "" || tt.wantCode == 2 {
				if stdout.String() != tt.wantOut {
					t.Errorf("stdout = %q, want %q", stdout.String(), tt.wantOut)
				}
			}
			if tt.wantErr == "" && stderr.Len() > 0 {
				t.Errorf("stderr = %q", stderr.String())
			}
			if tt.wantErr != "" && !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stderr = %q, want %q", stderr.String(), tt.wantErr)
			}
			if (h.calls > 0) != tt.wantCalled {
				t.Errorf("server called %d times, want called=%v", h.calls, tt.wantCalled)
			}
			if h.calls > 0 && h.path != "/v1/helper/judge" {
				t.Errorf("path = %q", h.path)
			}
			if tt.check != nil {
				tt.check(t, h.judge)
			}
		})
	}
}

func levels(n int) []string {
	var a []string
	for i := range n {
		a = append(a, "--level", strings.Repeat("l", i+1))
	}
	return a
}

func TestAsk(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		stdin      string
		status     int
		body       string
		wantCode   int
		wantOut    string
		wantErr    string
		wantCalled bool
		want       abi.AskRequest
	}{
		{name: "with input", args: []string{"Translate this into Korean.", "--input"}, stdin: "Hello", status: 200, body: `{"text":"안녕하세요"}`,
			wantCode: 0, wantOut: "안녕하세요\n", wantCalled: true, want: abi.AskRequest{Instruction: "Translate this into Korean.", Input: "Hello"}},
		{name: "gate target", args: []string{"Summarise."}, stdin: "ignored", status: 200, body: `{"text":"short\n"}`,
			wantCode: 0, wantOut: "short\n", wantCalled: true, want: abi.AskRequest{Instruction: "Summarise.", UseTarget: true}},
		{name: "words joined", args: []string{"Say", "hi", "--", "--input"}, status: 200, body: `{"text":"hi"}`,
			wantCode: 0, wantOut: "hi\n", wantCalled: true, want: abi.AskRequest{Instruction: "Say hi --input", UseTarget: true}},
		{name: "no instruction", args: []string{"--input"}, wantCode: 2, wantErr: "the instruction is missing"},
		{name: "no model", args: []string{"x"}, status: 503, body: `{"error":{"code":"unavailable","message":"no Pixie model is configured"}}`,
			wantCode: 2, wantErr: "pixie: HTTP 503: no Pixie model is configured", wantCalled: true, want: abi.AskRequest{Instruction: "x", UseTarget: true}},
		{name: "413", args: []string{"x", "--input"}, stdin: "big", status: 413, body: `{"error":{"code":"too_large","message":"a helper request is at most 262144 bytes"}}`,
			wantCode: 2, wantErr: "pixie: HTTP 413", wantCalled: true, want: abi.AskRequest{Instruction: "x", Input: "big"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHelperServer(t, tt.status, tt.body)
			var stdout, stderr bytes.Buffer
			code := Ask(context.Background(), tt.args, strings.NewReader(tt.stdin), &stdout, &stderr, h.env)
			if code != tt.wantCode || stdout.String() != tt.wantOut {
				t.Errorf("exit %d stdout %q; want %d %q (stderr %q)", code, stdout.String(), tt.wantCode, tt.wantOut, stderr.String())
			}
			if tt.wantErr != "" && !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stderr = %q, want %q", stderr.String(), tt.wantErr)
			}
			if (h.calls > 0) != tt.wantCalled {
				t.Fatalf("server called %d times", h.calls)
			}
			if tt.wantCalled && (h.ask != tt.want || h.path != "/v1/helper/ask") {
				t.Errorf("request = %+v at %s, want %+v", h.ask, h.path, tt.want)
			}
		})
	}
}

func TestNotAvailable(t *testing.T) {
	h := newHelperServer(t, 200, boolAnswer(1))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
		exact   bool
	}{
		{"no URL", map[string]string{abi.VarToken: token}, NotAvailable + "\n", true},
		{"no token", map[string]string{abi.VarURL: h.srv.URL}, NotAvailable + "\n", true},
		{"empty environment", nil, NotAvailable + "\n", true},
		{"server gone", map[string]string{abi.VarURL: closed, abi.VarToken: token}, NotAvailable + ": ", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := func(n string) string { return tt.env[n] }
			for verb, run := range map[string]func(context.Context, []string, io.Reader, io.Writer, io.Writer, func(string) string) int{"ask": Ask, "judge": Judge} {
				args := []string{"--question", "Q?"}
				if verb == "ask" {
					args = []string{"Q?"}
				}
				var stdout, stderr bytes.Buffer
				code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr, env)
				if code != 2 || stdout.Len() != 0 {
					t.Errorf("%s: exit %d stdout %q", verb, code, stdout.String())
				}
				if got := stderr.String(); (tt.exact && got != tt.wantErr) || (!tt.exact && !strings.HasPrefix(got, tt.wantErr)) {
					t.Errorf("%s: stderr = %q, want %q", verb, got, tt.wantErr)
				}
				if strings.Contains(stderr.String(), token) {
					t.Errorf("%s: the token is printed", verb)
				}
			}
		})
	}
	if h.calls != 0 {
		t.Errorf("the server was called %d times", h.calls)
	}
}

// TestInputLimit: input up to the helper's request limit is sent; one byte more is refused
// before any request.
func TestInputLimit(t *testing.T) {
	tests := []struct {
		name     string
		size     int
		wantCode int
	}{
		{"at the limit", abi.MaxHelperRequestSize, 0},
		{"one byte over", abi.MaxHelperRequestSize + 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHelperServer(t, 200, boolAnswer(0.9))
			var stdout, stderr bytes.Buffer
			code := Judge(context.Background(), []string{"--question", "Q?", "--input"}, strings.NewReader(strings.Repeat("x", tt.size)), &stdout, &stderr, h.env)
			if code != tt.wantCode {
				t.Fatalf("exit %d, stderr %q", code, stderr.String())
			}
			if tt.wantCode == 2 && (h.calls != 0 || !strings.Contains(stderr.String(), "larger than 256 KB")) {
				t.Errorf("calls %d stderr %q", h.calls, stderr.String())
			}
			if tt.wantCode == 0 && len(h.judge.State) != tt.size {
				t.Errorf("state of %d bytes sent", len(h.judge.State))
			}
		})
	}
}

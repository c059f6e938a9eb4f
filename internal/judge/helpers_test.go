package judge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/sdk/abi"
)

const (
	modelKey = "sk-model-SECRET-5f5f5f5f"
	jevKey   = "ts-jev-SECRET-a1b2c3d4e5"
)

// seenRequest is one request a fake provider received.
type seenRequest struct {
	Path   string
	Header http.Header
	Body   map[string]any
	Raw    string
}

// provider is an httptest server speaking a real wire format; reply decides each answer.
type provider struct {
	t     *testing.T
	srv   *httptest.Server
	mu    sync.Mutex
	seen  []seenRequest
	reply func(body map[string]any) (status int, resp string)
}

func (p *provider) requests() []seenRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]seenRequest(nil), p.seen...)
}

func newProvider(t *testing.T, path string, reply func(body map[string]any) (int, string)) *provider {
	t.Helper()
	p := &provider{t: t, reply: reply}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != path {
			http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
			return
		}
		raw, _ := io.ReadAll(r.Body)
		body := map[string]any{}
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Errorf("request body is not JSON: %v", err)
		}
		p.mu.Lock()
		p.seen = append(p.seen, seenRequest{Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Raw: string(raw)})
		p.mu.Unlock()
		status, resp := p.reply(body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, resp)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// recorded reads a recorded OpenAI chat.completion response from testdata.
func recorded(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// openaiText is a chat.completion whose content is text, with no logprobs.
func openaiText(text string) string {
	return fmt.Sprintf(`{"id":"chatcmpl-2","object":"chat.completion","created":1717000001,"model":"gpt-4o-mini-2024-07-18",
"choices":[{"index":0,"message":{"role":"assistant","content":%q,"refusal":null},"logprobs":null,"finish_reason":"stop"}],
"usage":{"prompt_tokens":150,"completion_tokens":12,"total_tokens":162}}`, text)
}

// anthropicText is a /v1/messages response whose text is text.
func anthropicText(text string) string {
	return fmt.Sprintf(`{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",
"content":[{"type":"text","text":%q}],"stop_reason":"end_turn","stop_sequence":null,
"usage":{"input_tokens":140,"output_tokens":15}}`, text)
}

// openaiProvider answers log-probability requests with the recorded file lpFile and other
// requests (the JSON fallback) with jsonText.
func openaiProvider(t *testing.T, lpFile, jsonText string) *provider {
	lp := ""
	if lpFile != "" {
		lp = recorded(t, lpFile)
	}
	return newProvider(t, "/v1/chat/completions", func(body map[string]any) (int, string) {
		if body["logprobs"] == true && lp != "" {
			return 200, lp
		}
		return 200, openaiText(jsonText)
	})
}

func openaiModel(t *testing.T, p *provider) model.Model {
	t.Helper()
	m, err := model.New(model.Config{Provider: "openai", BaseURL: p.srv.URL + "/v1", Model: "gpt-4o-mini", APIKey: modelKey})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func anthropicModel(t *testing.T, p *provider) model.Model {
	t.Helper()
	m, err := model.New(model.Config{Provider: "anthropic", BaseURL: p.srv.URL, Model: "claude-sonnet-4-5", APIKey: modelKey})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func boolQ(instr string) abi.Question {
	return abi.Question{Type: abi.JudgeBool, Instructions: instr}
}

func selectQ(names ...string) abi.Question {
	q := abi.Question{Type: abi.JudgeSelect, Instructions: "Which one?"}
	for _, n := range names {
		q.Criteria.Options = append(q.Criteria.Options, abi.Option{Name: n, Description: "the " + n + " case"})
	}
	return q
}

func scoreQ(n int) abi.Question {
	q := abi.Question{Type: abi.JudgeScore, Instructions: "How good?"}
	for i := range n {
		q.Criteria.Levels = append(q.Criteria.Levels, fmt.Sprintf("level %d", i))
	}
	return q
}

func one(q abi.Question) abi.JudgeRequest {
	return abi.JudgeRequest{State: "The tests passed.", Questions: map[string]abi.Question{"q": q}}
}

func near(a, b float64) bool { d := a - b; return d < 1e-6 && d > -1e-6 }

// assertNoSecret fails when s contains any of the test secrets.
func assertNoSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, k := range []string{modelKey, jevKey} {
		if strings.Contains(s, k) {
			t.Fatalf("%s contains a secret: %s", what, s)
		}
	}
}

// newService is New, failing t on an error.
func newService(t testing.TB, cfg Config) *Service {
	t.Helper()
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

package helper

import (
	"context"
	"testing"

	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/testutil/fakechat"
)

// The test model server (internal/testutil/fakechat), under the names these tests use.
type (
	chatCall  = fakechat.Call
	llmServer = fakechat.Server
)

var (
	newLLM = fakechat.New
	answer = fakechat.Answer
)

// testEnv is a Service over a real OpenAI-provider model talking to a test model server.
type testEnv struct {
	svc *Service
	llm *llmServer
}

type envOptions struct {
	noModel bool
	judge   Judge
}

func newEnv(t testing.TB, o envOptions) *testEnv {
	t.Helper()
	e := &testEnv{}
	var m model.Model
	if o.noModel {
		var err error
		if m, err = model.New(model.Config{}); err != nil {
			t.Fatal(err)
		}
	} else {
		e.llm = newLLM(t, answer(`{"verdict":"pass"}`))
		var err error
		m, err = model.New(model.Config{Provider: "openai", BaseURL: e.llm.URL, Model: "pixie-test", APIKey: "sk-test-secret"})
		if err != nil {
			t.Fatal(err)
		}
	}
	svc, err := New(context.Background(), Config{Instance: "0123456789abcdef", Model: m, Judge: o.judge})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	return e
}

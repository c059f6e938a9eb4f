package judge

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/model"
)

// systemOf returns the system message of an OpenAI chat.completions request body.
func systemOf(body map[string]any) string {
	msgs, _ := body["messages"].([]any)
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		if mm["role"] == "system" {
			s, _ := mm["content"].(string)
			return s
		}
	}
	return ""
}

// TestReconfigure: a new judge model and system prompt answer the next judgment; a bad
// configuration is refused and changes nothing.
func TestReconfigure(t *testing.T) {
	pixieP := openaiProvider(t, "", `{"yes": 0.9, "no": 0.1}`)
	judgeP := newProvider(t, "/v1/messages", func(map[string]any) (int, string) {
		return 200, anthropicText(`{"yes": 0.2, "no": 0.8}`)
	})
	s := newService(t, Config{PixieModel: openaiModel(t, pixieP)})
	if !s.Info().UsesPixieModel {
		t.Fatal("the Pixie model should answer before Reconfigure")
	}

	err := s.Reconfigure(Config{SystemPrompt: "You judge tersely.",
		Model: model.Config{Provider: "anthropic", BaseURL: judgeP.srv.URL, Model: "claude-haiku", APIKey: modelKey}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Judge(context.Background(), one(boolQ("Done?")))
	if err != nil {
		t.Fatal(err)
	}
	if a := resp.Answers["q"]; !near(*a.Yes, 0.2) {
		t.Errorf("answer = %+v, want the judge model's 0.2", a)
	}
	if got := len(judgeP.requests()); got != 1 {
		t.Fatalf("judge model calls = %d, want 1", got)
	}
	if sys := judgeP.requests()[0].Raw; !strings.Contains(sys, `"system":[{"text":"You judge tersely."`) {
		t.Errorf("system prompt not sent as set: %s", sys)
	}
	in := s.Info()
	if in.UsesPixieModel || !in.CustomSystemPrompt || in.Model.Provider != "anthropic" {
		t.Errorf("Info after Reconfigure = %+v", in)
	}

	bad := []struct {
		name string
		cfg  Config
		want string
	}{
		{"unknown engine", Config{Engine: "oracle"}, "judge.engine"},
		{"bad judge model provider", Config{Model: model.Config{Provider: "gemini", Model: "x"}}, "judge.model"},
		{"judge model without a name", Config{Model: model.Config{Provider: "openai", BaseURL: "http://127.0.0.1:1/v1"}}, "judge.model"},
		{"relative Jev URL", Config{Jev: JevConfig{BaseURL: "api.typesafe.ai"}}, "judge.jevBaseUrl"},
		{"Jev URL with credentials", Config{Jev: JevConfig{BaseURL: "https://u:p@api.typesafe.ai"}}, "judge.jevBaseUrl"},
		{"Jev model with a space", Config{Jev: JevConfig{Model: "jev latest"}}, "judge.jevModel"},
		{"negative Jev timeout", Config{Jev: JevConfig{Timeout: -1}}, "judge.jevTimeout"},
		{"system prompt one byte too long", Config{SystemPrompt: strings.Repeat("a", MaxSystemPromptLength+1)}, "judge.systemPrompt"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Reconfigure(tt.cfg)
			if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want invalid naming %s", err, tt.want)
			}
			if in := s.Info(); in.Model.Provider != "anthropic" || !in.CustomSystemPrompt {
				t.Errorf("a refused Reconfigure changed the engine: %+v", in)
			}
		})
	}
	if err := CheckConfig(Config{SystemPrompt: strings.Repeat("a", MaxSystemPromptLength)}); err != nil {
		t.Errorf("a prompt of exactly the limit is refused: %v", err)
	}

	// Back to the Pixie model with the built-in prompt; then the Jev engine.
	if err := s.Reconfigure(Config{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Judge(context.Background(), one(boolQ("Done?"))); err != nil {
		t.Fatal(err)
	}
	reqs := pixieP.requests()
	if len(reqs) == 0 || systemOf(reqs[len(reqs)-1].Body) != DefaultSystemPrompt {
		t.Error("the built-in system prompt was not restored")
	}
	if err := s.Reconfigure(Config{Engine: "JEV", Jev: JevConfig{BaseURL: "http://127.0.0.1:9", Model: "jev-1.13.0"}}); err != nil {
		t.Fatal(err)
	}
	if in := s.Info(); in.Engine != EngineJev || in.Jev.BaseURL != "http://127.0.0.1:9" || in.Jev.Model != "jev-1.13.0" {
		t.Errorf("Info = %+v", in)
	}
	if _, err := s.Judge(context.Background(), one(boolQ("Done?"))); !errs.Is(err, errs.Unavailable) {
		t.Errorf("jev without a key: err = %v, want unavailable", err)
	}
}

// TestNoLogprobsMemoryFollowsTheModel: the JSON-only memory belongs to the model that gave no
// log-probabilities; a swapped Pixie model is asked for them again.
func TestNoLogprobsMemoryFollowsTheModel(t *testing.T) {
	noLP := openaiProvider(t, "openai_no_logprobs.json", `{"yes": 0.3, "no": 0.7}`)
	withLP := openaiProvider(t, "openai_bool_case.json", `{"yes": 0.5, "no": 0.5}`)
	sw := model.NewSwappable(openaiModel(t, noLP))
	s := newService(t, Config{PixieModel: sw})
	for range 2 {
		if _, err := s.Judge(context.Background(), one(boolQ("Done?"))); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(noLP.requests()); n != 3 {
		t.Fatalf("calls to the model without logprobs = %d, want 3 (logprobs, JSON, JSON)", n)
	}
	sw.Set(openaiModel(t, withLP))
	if _, err := s.Judge(context.Background(), one(boolQ("Done?"))); err != nil {
		t.Fatal(err)
	}
	reqs := withLP.requests()
	if len(reqs) != 1 || reqs[0].Body["logprobs"] != true {
		t.Fatalf("the new model was not asked for log-probabilities: %d calls", len(reqs))
	}
}

// TestReconfigureWhileJudging runs judgments and reconfigurations at once (go test -race).
func TestReconfigureWhileJudging(t *testing.T) {
	p := openaiProvider(t, "", `{"yes": 0.6, "no": 0.4}`)
	m := openaiModel(t, p)
	s := newService(t, Config{PixieModel: m})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 5 {
				if i == 0 {
					prompt := ""
					if j%2 == 0 {
						prompt = "custom"
					}
					if err := s.Reconfigure(Config{SystemPrompt: prompt}); err != nil {
						t.Error(err)
					}
					continue
				}
				if _, err := s.Judge(context.Background(), one(boolQ("Done?"))); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
}

package judge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// TestLogprobExtraction runs recorded OpenAI-format responses through the real SDK and checks
// the renormalised probabilities, label, yes/score and confidence.
func TestLogprobExtraction(t *testing.T) {
	tests := []struct {
		name      string
		file      string
		q         abi.Question
		wantProbs map[string]float64
		wantLabel string
		wantYes   float64 // bool
		wantScore float64 // score
		wantConf  float64
	}{
		{"leading spaces and Ġ", "openai_bool_spaces.json", boolQ("Is it done?"),
			map[string]float64{"yes": 0.842105, "no": 0.157895}, "yes", 0.842105, 0, 0.370751},
		{"case variants summed", "openai_bool_case.json", boolQ("Is it done?"),
			map[string]float64{"yes": 0.736842, "no": 0.263158}, "yes", 0.736842, 0, 0.168526},
		{"sentencepiece markers", "openai_bool_sentencepiece.json", boolQ("Is it done?"),
			map[string]float64{"yes": 0.263158, "no": 0.736842}, "no", 0.263158, 0, 0.168526},
		{"answer missing from top_logprobs", "openai_bool_missing_no.json", boolQ("Is it done?"),
			map[string]float64{"yes": 1, "no": 0}, "yes", 1, 0, 1},
		{"exactly one half is yes", "openai_bool_half.json", boolQ("Is it done?"),
			map[string]float64{"yes": 0.5, "no": 0.5}, "yes", 0.5, 0, 0},
		{"leading newline token skipped", "openai_bool_leading_newline.json", boolQ("Is it done?"),
			map[string]float64{"yes": 0.3, "no": 0.7}, "no", 0.3, 0, 0.118709},
		{"sampled token not in top list", "openai_bool_sampled_not_in_top.json", boolQ("Is it done?"),
			map[string]float64{"yes": 0.421053, "no": 0.578947}, "no", 0.421053, 0, 0.018059},
		{"select letters with a missing option", "openai_select.json", selectQ("supported", "contradicted", "missing"),
			map[string]float64{"supported": 0.277778, "contradicted": 0.722222, "missing": 0}, "contradicted", 0, 0, 0.462192},
		{"score digits, G-Eval mean", "openai_score.json", scoreQ(5),
			map[string]float64{"0": 0, "1": 0, "2": 0.052632, "3": 0.631579, "4": 0.315789}, "3", 0, 3.263158, 0.726518},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := openaiProvider(t, tt.file, `{"unused": 1}`)
			s := newService(t, Config{PixieModel: openaiModel(t, p)})
			resp, err := s.Judge(context.Background(), one(tt.q))
			if err != nil {
				t.Fatal(err)
			}
			a := resp.Answers["q"]
			if len(a.Probabilities) != len(tt.wantProbs) {
				t.Fatalf("probabilities = %v", a.Probabilities)
			}
			for k, v := range tt.wantProbs {
				if !near(a.Probabilities[k], v) {
					t.Errorf("P(%s) = %v, want %v", k, a.Probabilities[k], v)
				}
			}
			if a.Label != tt.wantLabel || a.Type != tt.q.Type || !near(a.Confidence, tt.wantConf) {
				t.Errorf("label %q type %q confidence %v; want %q %q %v", a.Label, a.Type, a.Confidence, tt.wantLabel, tt.q.Type, tt.wantConf)
			}
			switch tt.q.Type {
			case abi.JudgeBool:
				if a.Yes == nil || !near(*a.Yes, tt.wantYes) || a.Score != nil {
					t.Errorf("yes = %v, score = %v", a.Yes, a.Score)
				}
			case abi.JudgeScore:
				if a.Score == nil || !near(*a.Score, tt.wantScore) || a.Yes != nil {
					t.Errorf("score = %v, yes = %v", a.Score, a.Yes)
				}
			default:
				if a.Yes != nil || a.Score != nil {
					t.Errorf("select answer has yes/score")
				}
			}
			if resp.Engine != EngineLLM || resp.Usage.InputTokens != 120 {
				t.Errorf("engine %q usage %+v", resp.Engine, resp.Usage)
			}
			reqs := p.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d model calls, want 1", len(reqs))
			}
			b := reqs[0].Body
			if b["logprobs"] != true || b["top_logprobs"] != float64(topLogprobs) || b["temperature"] != float64(0) || b["max_tokens"] != float64(logprobMaxTokens) {
				t.Errorf("request = %v", b)
			}
			if got := reqs[0].Header.Get("Authorization"); got != "Bearer "+modelKey {
				t.Errorf("Authorization = %q", got)
			}
		})
	}
}

func TestLogprobLowMassIsAnError(t *testing.T) {
	p := openaiProvider(t, "openai_bool_low_mass.json", "")
	s := newService(t, Config{PixieModel: openaiModel(t, p)})
	resp, err := s.Judge(context.Background(), one(boolQ("Is it done?")))
	if !errs.Is(err, errs.Upstream) || !errors.Is(err, model.ErrBadResponse) {
		t.Fatalf("err = %v, want upstream ErrBadResponse", err)
	}
	if !strings.Contains(err.Error(), "did not answer with one of the valid answers") || len(resp.Answers) != 0 {
		t.Errorf("err = %v, answers = %v", err, resp.Answers)
	}
	if resp.Usage.InputTokens != 120 {
		t.Errorf("usage of the failed call not reported: %+v", resp.Usage)
	}
}

// TestNoLogprobsFallsBackToJSON: a server that ignores logprobs gets a second, JSON call, and
// later judgments go straight to JSON.
func TestNoLogprobsFallsBackToJSON(t *testing.T) {
	p := openaiProvider(t, "openai_no_logprobs.json", `{"yes": 0.3, "no": 0.7}`)
	s := newService(t, Config{PixieModel: openaiModel(t, p)})
	for round := range 2 {
		resp, err := s.Judge(context.Background(), one(boolQ("Is it done?")))
		if err != nil {
			t.Fatal(err)
		}
		a := resp.Answers["q"]
		if !near(*a.Yes, 0.3) || a.Label != "no" || !near(a.Confidence, 0.118709) {
			t.Errorf("round %d: answer = %+v", round, a)
		}
		wantUsage := abi.Usage{InputTokens: 150, OutputTokens: 12}
		if round == 0 {
			wantUsage = abi.Usage{InputTokens: 270, OutputTokens: 13} // both calls summed
		}
		if resp.Usage != wantUsage {
			t.Errorf("round %d: usage = %+v, want %+v", round, resp.Usage, wantUsage)
		}
	}
	reqs := p.requests()
	if len(reqs) != 3 || reqs[0].Body["logprobs"] != true || reqs[1].Body["logprobs"] != nil || reqs[2].Body["logprobs"] != nil {
		t.Fatalf("calls = %d (first logprobs %v)", len(reqs), reqs[0].Body["logprobs"])
	}
}

// TestLogprobsRefusedFallsBackToJSON: a 400 to the logprobs request (a model that does not
// support them) is answered by a JSON call.
func TestLogprobsRefusedFallsBackToJSON(t *testing.T) {
	p := newProvider(t, "/v1/chat/completions", func(body map[string]any) (int, string) {
		if body["logprobs"] == true {
			return 400, `{"error":{"message":"logprobs is not supported with this model","type":"invalid_request_error","param":"logprobs","code":"unsupported_parameter"}}`
		}
		return 200, openaiText("```json\n{\"A\": 0.1, \"B\": 0.2, \"C\": 0.7}\n```")
	})
	s := newService(t, Config{PixieModel: openaiModel(t, p)})
	resp, err := s.Judge(context.Background(), one(selectQ("x", "y", "z")))
	if err != nil {
		t.Fatal(err)
	}
	if a := resp.Answers["q"]; a.Label != "z" || !near(a.Probabilities["z"], 0.7) {
		t.Errorf("answer = %+v", a)
	}
}

// TestJSONFallback checks the JSON answer path (Anthropic gives no logprobs) on valid and
// invalid answers.
func TestJSONFallback(t *testing.T) {
	tests := []struct {
		name      string
		q         abi.Question
		text      string
		wantProbs map[string]float64
		wantLabel string
		wantErr   string
	}{
		{"plain", boolQ("Done?"), `{"yes": 0.8, "no": 0.2}`, map[string]float64{"yes": 0.8, "no": 0.2}, "yes", ""},
		{"code fence and prose", boolQ("Done?"), "Sure.\n```json\n{\"Yes\": 0.25, \"NO\": 0.75}\n```\nHope this helps.", map[string]float64{"yes": 0.25, "no": 0.75}, "no", ""},
		{"percentages renormalised", boolQ("Done?"), `{"yes": 60, "no": 20}`, map[string]float64{"yes": 0.75, "no": 0.25}, "yes", ""},
		{"missing answer is zero", boolQ("Done?"), `{"yes": 1}`, map[string]float64{"yes": 1, "no": 0}, "yes", ""},
		{"select by letter", selectQ("a1", "b1", "c1"), `{"A": 0.2, "b": 0.5, "C": 0.3}`, map[string]float64{"a1": 0.2, "b1": 0.5, "c1": 0.3}, "b1", ""},
		{"select by name", selectQ("alpha", "beta"), `{"alpha": 0.9, "beta": 0.1}`, map[string]float64{"alpha": 0.9, "beta": 0.1}, "alpha", ""},
		{"score", scoreQ(3), `{"0": 0.0, "1": 0.5, "2": 0.5}`, map[string]float64{"0": 0, "1": 0.5, "2": 0.5}, "2", ""},
		{"negative", boolQ("Done?"), `{"yes": -0.2, "no": 1.2}`, nil, "", "negative"},
		{"unknown key", boolQ("Done?"), `{"yes": 0.5, "maybe": 0.5}`, nil, "", `unknown answer "maybe"`},
		{"level out of range", scoreQ(3), `{"3": 1}`, nil, "", `unknown answer "3"`},
		{"not a number", boolQ("Done?"), `{"yes": "high", "no": 0.1}`, nil, "", "not a number"},
		{"all zero", boolQ("Done?"), `{"yes": 0, "no": 0}`, nil, "", "all probabilities are zero"},
		{"no JSON", boolQ("Done?"), `Yes, definitely.`, nil, "", "no JSON object"},
		{"broken JSON", boolQ("Done?"), `{"yes": 0.5, "no": }`, nil, "", "does not parse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider(t, "/v1/messages", func(map[string]any) (int, string) { return 200, anthropicText(tt.text) })
			s := newService(t, Config{PixieModel: anthropicModel(t, p)})
			resp, err := s.Judge(context.Background(), one(tt.q))
			if tt.wantErr != "" {
				if !errs.Is(err, errs.Upstream) || !errors.Is(err, model.ErrBadResponse) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want upstream mentioning %q", err, tt.wantErr)
				}
				if len(resp.Answers) != 0 {
					t.Errorf("a failed judgment returned answers: %v", resp.Answers)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			a := resp.Answers["q"]
			for k, v := range tt.wantProbs {
				if !near(a.Probabilities[k], v) {
					t.Errorf("P(%s) = %v, want %v", k, a.Probabilities[k], v)
				}
			}
			if a.Label != tt.wantLabel {
				t.Errorf("label = %q, want %q", a.Label, tt.wantLabel)
			}
			reqs := p.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d calls", len(reqs))
			}
			if _, ok := reqs[0].Body["top_logprobs"]; ok {
				t.Error("logprobs asked of Anthropic")
			}
			msgs := reqs[0].Body["messages"].([]any)
			content := msgs[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"].(string)
			if !strings.Contains(content, "JSON object") || !strings.Contains(content, "The tests passed.") {
				t.Errorf("prompt = %s", content)
			}
		})
	}
}

func TestPromptsAndModels(t *testing.T) {
	t.Run("default system prompt from prompt.md", func(t *testing.T) {
		p := openaiProvider(t, "openai_bool_half.json", "")
		if _, err := newService(t, Config{PixieModel: openaiModel(t, p)}).Judge(context.Background(), one(boolQ("Done?"))); err != nil {
			t.Fatal(err)
		}
		msgs := p.requests()[0].Body["messages"].([]any)
		if sys := msgs[0].(map[string]any)["content"]; sys != DefaultSystemPrompt || !strings.HasPrefix(DefaultSystemPrompt, "You are Pixie's judge") {
			t.Errorf("system = %v", sys)
		}
	})
	t.Run("custom system prompt", func(t *testing.T) {
		p := openaiProvider(t, "openai_bool_half.json", "")
		s := newService(t, Config{PixieModel: openaiModel(t, p), SystemPrompt: "Judge strictly."})
		if _, err := s.Judge(context.Background(), one(boolQ("Done?"))); err != nil {
			t.Fatal(err)
		}
		msgs := p.requests()[0].Body["messages"].([]any)
		if sys := msgs[0].(map[string]any)["content"]; sys != "Judge strictly." {
			t.Errorf("system = %v", sys)
		}
		user := msgs[1].(map[string]any)["content"].(string)
		if !strings.Contains(user, "Answer with one word: yes or no.") {
			t.Errorf("the answer format is not in the question message: %s", user)
		}
		if !s.Info().CustomSystemPrompt {
			t.Error("Info().CustomSystemPrompt = false")
		}
	})
	t.Run("judge model replaces the Pixie model", func(t *testing.T) {
		pixie := openaiProvider(t, "openai_bool_half.json", "")
		judgeSrv := openaiProvider(t, "openai_bool_case.json", "")
		s := newService(t, Config{PixieModel: openaiModel(t, pixie), Model: model.Config{Provider: "openai", BaseURL: judgeSrv.srv.URL + "/v1", Model: "judge-7b"}})
		resp, err := s.Judge(context.Background(), one(boolQ("Done?")))
		if err != nil {
			t.Fatal(err)
		}
		if !near(*resp.Answers["q"].Yes, 0.736842) || len(pixie.requests()) != 0 || len(judgeSrv.requests()) != 1 {
			t.Errorf("yes %v, pixie calls %d, judge calls %d", *resp.Answers["q"].Yes, len(pixie.requests()), len(judgeSrv.requests()))
		}
		if judgeSrv.requests()[0].Body["model"] != "judge-7b" || s.Info().UsesPixieModel {
			t.Errorf("judge model not used: %v", judgeSrv.requests()[0].Body["model"])
		}
	})
	t.Run("prompt lists options and levels", func(t *testing.T) {
		got := questionPrompt("S", selectQ("x", "y", "z"), false)
		for _, want := range []string{"<state>\nS\n</state>", "A) x: the x case", "C) z: the z case", "Answer with one letter: A, B or C."} {
			if !strings.Contains(got, want) {
				t.Errorf("select prompt lacks %q:\n%s", want, got)
			}
		}
		got = questionPrompt("S", scoreQ(4), true)
		for _, want := range []string{"0: level 0", "3: level 3", `{"0": <probability>, "1": <probability>, "2": <probability>, "3": <probability>}`} {
			if !strings.Contains(got, want) {
				t.Errorf("score prompt lacks %q:\n%s", want, got)
			}
		}
		q := boolQ("Korean?")
		q.Criteria.True, q.Criteria.False = "the prose is Korean", "it is not"
		got = questionPrompt("S", q, false)
		if !strings.Contains(got, `"yes" means: the prose is Korean`) || !strings.Contains(got, `"no" means: it is not`) {
			t.Errorf("bool prompt:\n%s", got)
		}
	})
}

func TestNoModel(t *testing.T) {
	none, _ := model.New(model.Config{})
	tests := []struct {
		name  string
		model model.Model
		cfg   Config
		code  errs.Code
		want  string
	}{
		{"nil Pixie model", nil, Config{}, errs.Unavailable, "no model for the decision engine"},
		{"unconfigured Pixie model", none, Config{}, errs.Unavailable, "PIXIE_MODEL_PROVIDER"},
		{"bad judge model", nil, Config{Model: model.Config{Provider: "gemini", Model: "x"}}, errs.Unavailable, "judge model is misconfigured"},
		{"unknown engine", nil, Config{Engine: "oracle"}, errs.Unavailable, `unknown decision engine "oracle"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.PixieModel = tt.model
			s := newService(t, cfg)
			_, err := s.Judge(context.Background(), one(boolQ("Done?")))
			if !errs.Is(err, tt.code) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %s mentioning %q", err, tt.code, tt.want)
			}
			if tt.name != "nil Pixie model" && tt.name != "unconfigured Pixie model" && s.Info().Problem == "" {
				t.Error("Info().Problem is empty")
			}
		})
	}
}

// TestSeveralQuestions: one call per question, usage summed; one failure fails all.
func TestSeveralQuestions(t *testing.T) {
	p := newProvider(t, "/v1/messages", func(body map[string]any) (int, string) {
		msgs := body["messages"].([]any)
		text := msgs[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"].(string)
		switch {
		case strings.Contains(text, "FAIL"):
			return 500, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`
		case strings.Contains(text, "Levels"):
			return 200, anthropicText(`{"0": 0.2, "1": 0.8}`)
		default:
			return 200, anthropicText(`{"yes": 0.9, "no": 0.1}`)
		}
	})
	s := newService(t, Config{PixieModel: anthropicModel(t, p)})
	req := abi.JudgeRequest{State: "x", Questions: map[string]abi.Question{"a": boolQ("A?"), "b": boolQ("B?"), "c": scoreQ(2)}}
	resp, err := s.Judge(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Answers) != 3 || resp.Usage != (abi.Usage{InputTokens: 420, OutputTokens: 45}) || !near(*resp.Answers["c"].Score, 0.8) {
		t.Errorf("resp = %+v", resp)
	}
	req.Questions["d"] = boolQ("FAIL?")
	_, err = s.Judge(context.Background(), req)
	if !errs.Is(err, errs.Upstream) || !strings.Contains(err.Error(), `question "d"`) || !errors.Is(err, model.ErrBadResponse) {
		t.Errorf("err = %v", err)
	}
}

func TestLLMTimeout(t *testing.T) {
	stop := make(chan struct{})
	p := newProvider(t, "/v1/chat/completions", func(map[string]any) (int, string) {
		<-stop
		return 200, openaiText("{}")
	})
	t.Cleanup(func() { close(stop) })
	m, err := model.New(model.Config{Provider: "openai", BaseURL: p.srv.URL + "/v1", Model: "m", Timeout: 100_000_000})
	if err != nil {
		t.Fatal(err)
	}
	_, err = newService(t, Config{PixieModel: m}).Judge(context.Background(), one(boolQ("Done?")))
	if !errs.Is(err, errs.Timeout) || !errors.Is(err, model.ErrTimeout) {
		t.Fatalf("err = %v, want timeout", err)
	}
}

// TestModelKeyNeverShown: a provider that echoes the key in its error body does not leak it
// into the judgment error, the response or the log.
func TestModelKeyNeverShown(t *testing.T) {
	for _, status := range []int{401, 429, 500} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			p := newProvider(t, "/v1/chat/completions", func(map[string]any) (int, string) {
				return status, `{"error":{"message":"Incorrect API key provided: ` + modelKey + `","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
			})
			var logs bytes.Buffer
			s := newService(t, Config{PixieModel: openaiModel(t, p), Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			resp, err := s.Judge(context.Background(), one(boolQ("Done?")))
			if err == nil || errs.CodeOf(err) == errs.Internal {
				t.Fatalf("err = %v", err)
			}
			out, _ := json.Marshal(resp)
			assertNoSecret(t, "response", string(out))
			for e := error(err); e != nil; e = errors.Unwrap(e) {
				assertNoSecret(t, "error", fmt.Sprintf("%v %+v", e, e))
			}
			assertNoSecret(t, "log", logs.String())
		})
	}
}

func BenchmarkExtractAndBuild(b *testing.B) {
	lps := []model.TokenLogprob{{Token: " Yes", Logprob: -0.51, Top: []model.TopLogprob{
		{Token: " Yes", Logprob: -0.51}, {Token: "Yes", Logprob: -1.6}, {Token: " No", Logprob: -2.3},
		{Token: "Ġno", Logprob: -3.0}, {Token: " The", Logprob: -3.0}, {Token: "YES", Logprob: -4},
		{Token: "no", Logprob: -4.5}, {Token: "I", Logprob: -5}, {Token: "Based", Logprob: -6}, {Token: "\n", Logprob: -7}}}}
	q := boolQ("Done?")
	b.ReportAllocs()
	for b.Loop() {
		w, _, _ := extractWeights(lps, q)
		if _, ok := buildAnswer(q, w); !ok {
			b.Fatal("no answer")
		}
	}
}

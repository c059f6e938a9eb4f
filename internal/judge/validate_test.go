package judge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/sdk/abi"
)

func TestValidate(t *testing.T) {
	many := func(n int) map[string]abi.Question {
		m := map[string]abi.Question{}
		for i := range n {
			m[fmt.Sprintf("q%d", i)] = boolQ("Done?")
		}
		return m
	}
	opts := func(n int) abi.Question {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("o%d", i)
		}
		return selectQ(names...)
	}
	with := func(q abi.Question, f func(*abi.Question)) abi.Question { f(&q); return q }
	tests := []struct {
		name    string
		qs      map[string]abi.Question
		wantErr string // empty: valid
	}{
		{"one bool", map[string]abi.Question{"q": boolQ("Done?")}, ""},
		{"no questions", nil, "at least one question"},
		{"20 questions", many(MaxQuestions), ""},
		{"21 questions", many(MaxQuestions + 1), "at most 20 questions"},
		{"id at 64", map[string]abi.Question{strings.Repeat("a", 64): boolQ("x")}, ""},
		{"id at 65", map[string]abi.Question{strings.Repeat("a", 65): boolQ("x")}, "question id"},
		{"id with space", map[string]abi.Question{"a b": boolQ("x")}, "question id"},
		{"empty id", map[string]abi.Question{"": boolQ("x")}, "question id"},
		{"empty instructions", map[string]abi.Question{"q": boolQ("  ")}, "instructions are empty"},
		{"unknown type", map[string]abi.Question{"q": {Type: "bool", Instructions: "x"}}, `unknown type "bool"`},
		{"bool with options", map[string]abi.Question{"q": with(boolQ("x"), func(q *abi.Question) { q.Criteria.Options = opts(2).Criteria.Options })}, "not options or levels"},
		{"select with 1 option", map[string]abi.Question{"q": opts(1)}, "needs 2 to 26 options, got 1"},
		{"select with 2 options", map[string]abi.Question{"q": opts(MinOptions)}, ""},
		{"select with 26 options", map[string]abi.Question{"q": opts(MaxOptions)}, ""},
		{"select with 27 options", map[string]abi.Question{"q": opts(MaxOptions + 1)}, "got 27"},
		{"duplicate option", map[string]abi.Question{"q": selectQ("a", "a")}, `"a" appears twice`},
		{"empty option name", map[string]abi.Question{"q": selectQ("a", "")}, "empty name"},
		{"option name with newline", map[string]abi.Question{"q": selectQ("a", "b\nc")}, "control character"},
		{"option name padded", map[string]abi.Question{"q": selectQ("a", " b")}, "leading or trailing spaces"},
		{"option name at 100", map[string]abi.Question{"q": selectQ("a", strings.Repeat("n", MaxNameLength))}, ""},
		{"option name at 101", map[string]abi.Question{"q": selectQ("a", strings.Repeat("n", MaxNameLength+1))}, "longer than 100"},
		{"select with true", map[string]abi.Question{"q": with(opts(2), func(q *abi.Question) { q.Criteria.True = "y" })}, "takes only options"},
		{"score with 1 level", map[string]abi.Question{"q": scoreQ(1)}, "needs 2 to 10 levels, got 1"},
		{"score with 2 levels", map[string]abi.Question{"q": scoreQ(MinLevels)}, ""},
		{"score with 10 levels", map[string]abi.Question{"q": scoreQ(MaxLevels)}, ""},
		{"score with 11 levels", map[string]abi.Question{"q": scoreQ(MaxLevels + 1)}, "got 11"},
		{"empty level", map[string]abi.Question{"q": with(scoreQ(3), func(q *abi.Question) { q.Criteria.Levels[1] = " " })}, "level 1 is empty"},
		{"score with options", map[string]abi.Question{"q": with(scoreQ(3), func(q *abi.Question) { q.Criteria.Options = opts(2).Criteria.Options })}, "takes only levels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(abi.JudgeRequest{State: "s", Questions: tt.qs})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want invalid mentioning %q", err, tt.wantErr)
			}
		})
	}
}

func TestDecodeRequest(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		check   func(t *testing.T, r abi.JudgeRequest)
		wantErr string
	}{
		{
			name: "Jev shape, every type",
			body: `{"state": "My card was charged twice.", "model": "jev-latest", "questions": {
				"is_billing": {"type": "noul", "instructions": "Is this about billing?", "criteria": {"true": "a charge", "false": "anything else"}},
				"team": {"type": "choice", "instructions": "Which team?", "criteria": {"shipping": "delivery", "billing": "charges", "returns": "exchanges"}},
				"urgency": {"type": "score", "instructions": "How urgent?", "criteria": ["low", "normal", "high"]}}}`,
			check: func(t *testing.T, r abi.JudgeRequest) {
				if r.State != "My card was charged twice." || len(r.Questions) != 3 {
					t.Fatalf("req = %+v", r)
				}
				b := r.Questions["is_billing"]
				if b.Type != abi.JudgeBool || b.Criteria.True != "a charge" || b.Criteria.False != "anything else" {
					t.Errorf("noul = %+v", b)
				}
				c := r.Questions["team"]
				want := []abi.Option{{Name: "shipping", Description: "delivery"}, {Name: "billing", Description: "charges"}, {Name: "returns", Description: "exchanges"}}
				if fmt.Sprint(c.Criteria.Options) != fmt.Sprint(want) { // order kept
					t.Errorf("options = %v", c.Criteria.Options)
				}
				if s := r.Questions["urgency"]; strings.Join(s.Criteria.Levels, ",") != "low,normal,high" {
					t.Errorf("levels = %v", s.Criteria.Levels)
				}
			},
		},
		{
			name: "structured state and instructions",
			body: `{"state": {"source": "a", "translation": "b"}, "questions": {"q": {"type": "noul", "instructions": {"question": "Is ` + "`translation`" + ` faithful?"}}}}`,
			check: func(t *testing.T, r abi.JudgeRequest) {
				if r.State != `{"source":"a","translation":"b"}` || r.Questions["q"].Instructions != `{"question":"Is `+"`translation`"+` faithful?"}` {
					t.Errorf("req = %+v", r)
				}
			},
		},
		{
			name: "Pixie shape and CLI type names",
			body: `{"state": "s", "questions": {"q": {"type": "select", "instructions": "Which?", "criteria": {"options": [{"name": "a"}, {"name": "b", "description": "B"}]}},
				"r": {"type": "score", "instructions": "How?", "criteria": {"levels": ["x", "y"]}}, "s": {"type": "bool", "instructions": "Is?"}}}`,
			check: func(t *testing.T, r abi.JudgeRequest) {
				if q := r.Questions["q"]; q.Type != abi.JudgeSelect || len(q.Criteria.Options) != 2 || q.Criteria.Options[1].Description != "B" {
					t.Errorf("select = %+v", q)
				}
				if r.Questions["r"].Type != abi.JudgeScore || r.Questions["s"].Type != abi.JudgeBool {
					t.Errorf("types = %+v", r.Questions)
				}
			},
		},
		{name: "choice option named options", body: `{"state":"s","questions":{"q":{"type":"choice","instructions":"x","criteria":{"options":"the options case","other":"o"}}}}`,
			check: func(t *testing.T, r abi.JudgeRequest) {
				if o := r.Questions["q"].Criteria.Options; len(o) != 2 || o[0].Name != "options" {
					t.Errorf("options = %v", o)
				}
			}},
		{name: "unknown field", body: `{"state":"s","questions":{"q":{"type":"noul","instructions":"x","weight":2}}}`, wantErr: "unknown field"},
		{name: "unknown top-level field", body: `{"state":"s","extra":1,"questions":{"q":{"type":"noul","instructions":"x"}}}`, wantErr: "unknown field"},
		{name: "numeric state", body: `{"state": 5, "questions":{"q":{"type":"noul","instructions":"x"}}}`, wantErr: "state"},
		{name: "score criteria object", body: `{"state":"s","questions":{"q":{"type":"score","instructions":"x","criteria":{"a":"b"}}}}`, wantErr: "array of level descriptions"},
		{name: "choice description not a string", body: `{"state":"s","questions":{"q":{"type":"choice","instructions":"x","criteria":{"a":1,"b":"c"}}}}`, wantErr: "description must be a string"},
		{name: "one option", body: `{"state":"s","questions":{"q":{"type":"choice","instructions":"x","criteria":{"a":"b"}}}}`, wantErr: "needs 2 to 26 options"},
		{name: "not JSON", body: `{"state":`, wantErr: "not valid JSON"},
		{name: "no questions", body: `{"state":"s","questions":{}}`, wantErr: "at least one question"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := DecodeRequest([]byte(tt.body))
			if tt.wantErr != "" {
				if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want invalid mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, r)
			// What DecodeRequest returns round-trips through abi's own JSON.
			b, _ := json.Marshal(r)
			var back abi.JudgeRequest
			if err := json.Unmarshal(b, &back); err != nil || Validate(back) != nil {
				t.Errorf("round trip: %v", err)
			}
		})
	}
}

func TestBuildAnswer(t *testing.T) {
	tests := []struct {
		name      string
		q         abi.Question
		weights   []float64
		wantLabel string
		wantConf  float64
		wantScore float64
	}{
		{"bool certain", boolQ("x"), []float64{1, 0}, "yes", 1, 0},
		{"bool uniform", boolQ("x"), []float64{3, 3}, "yes", 0, 0},
		{"bool just below half", boolQ("x"), []float64{0.4999, 0.5001}, "no", 0, 0},
		{"select uniform over 4", selectQ("a", "b", "c", "d"), []float64{1, 1, 1, 1}, "a", 0, 0},
		{"select tie picks first", selectQ("a", "b", "c"), []float64{0, 2, 2}, "b", 0.369070, 0},
		{"score certain", scoreQ(5), []float64{0, 0, 0, 1, 0}, "3", 1, 3},
		{"score split between ends", scoreQ(4), []float64{1, 0, 0, 1}, "2", 0, 1.5},
		{"score split between neighbours", scoreQ(4), []float64{0, 1, 1, 0}, "2", 0.666667, 1.5},
		{"score uniform over 2", scoreQ(2), []float64{1, 1}, "1", 0, 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, ok := buildAnswer(tt.q, tt.weights)
			if !ok {
				t.Fatal("not ok")
			}
			if a.Label != tt.wantLabel || !near(a.Confidence, tt.wantConf) {
				t.Errorf("label %q confidence %v; want %q %v", a.Label, a.Confidence, tt.wantLabel, tt.wantConf)
			}
			if tt.q.Type == abi.JudgeScore && !near(*a.Score, tt.wantScore) {
				t.Errorf("score = %v, want %v", *a.Score, tt.wantScore)
			}
			var sum float64
			for _, p := range a.Probabilities {
				sum += p
			}
			if !near(sum, 1) {
				t.Errorf("probabilities sum to %v", sum)
			}
		})
	}
	for _, w := range [][]float64{{0, 0}, {-1, 2}} {
		if _, ok := buildAnswer(boolQ("x"), w); ok {
			t.Errorf("buildAnswer(%v) ok", w)
		}
	}
}

func TestJudgeJSON(t *testing.T) {
	p := openaiProvider(t, "openai_score.json", "")
	s := newService(t, Config{PixieModel: openaiModel(t, p)})
	resp, err := s.JudgeJSON(context.Background(), []byte(`{"state": "x", "questions": {"q": {"type": "score", "instructions": "How good?", "criteria": ["a","b","c","d","e"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if a := resp.Answers["q"]; a.Label != "3" || !near(*a.Score, 3.263158) {
		t.Errorf("answer = %+v", a)
	}
	if _, err := s.JudgeJSON(context.Background(), []byte(`{"state": "x", "questions": {"q": {"type": "score", "instructions": "How good?", "criteria": ["a"]}}}`)); !errs.Is(err, errs.Invalid) {
		t.Errorf("err = %v", err)
	}
	if len(p.requests()) != 1 {
		t.Errorf("an invalid request reached the model")
	}
}

package judge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/pixie-dev/pixie/internal/clip"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// Settings of the llm engine.
const (
	// topLogprobs is the number of alternatives asked for per token (OpenAI's maximum).
	topLogprobs = 20
	// logprobMaxTokens leaves room for one leading formatting token (a space, a quote, "**")
	// before the answer token.
	logprobMaxTokens = 3
	// jsonMaxTokens bounds the JSON answer.
	jsonMaxTokens = 400
	// MinAnswerMass is the least share of the answer token's probability the valid answers
	// must hold together; below it the model did not answer the question and the judgment
	// fails rather than inflating noise into a verdict.
	MinAnswerMass = 0.1
	// parallelQuestions bounds the model calls one judgment runs at once.
	parallelQuestions = 4
)

const noModelMessage = "no model for the decision engine: configure the Pixie model (PIXIE_MODEL_PROVIDER, " +
	"PIXIE_MODEL_MODEL, PIXIE_MODEL_API_KEY or model: in pixie.yaml) or a judge model (judge.model), or choose the jev engine"

// judgeLLM answers each question with one model call (two when a log-probability answer has
// to fall back to JSON), concurrently, and sums the usage.
func (s *Service) judgeLLM(ctx context.Context, e *engine, req abi.JudgeRequest) (abi.JudgeResponse, error) {
	if e.model == nil || !e.model.Info().Configured {
		return abi.JudgeResponse{}, errs.Wrap(errs.Unavailable, model.ErrNoModel, "%s", noModelMessage)
	}
	ids := sortedIDs(req.Questions)
	answers := make([]abi.Answer, len(ids))
	usages := make([]model.Usage, len(ids))
	errsByQ := make([]error, len(ids))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, parallelQuestions)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errsByQ[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			answers[i], usages[i], errsByQ[i] = s.answerLLM(ctx, e, req.State, req.Questions[id])
			if errsByQ[i] != nil {
				cancel() // one failure fails the judgment: stop the others
			}
		}()
	}
	wg.Wait()

	resp := abi.JudgeResponse{Answers: make(map[string]abi.Answer, len(ids))}
	var total model.Usage
	for _, u := range usages {
		total = total.Add(u)
	}
	resp.Usage = abi.Usage{InputTokens: total.InputTokens, OutputTokens: total.OutputTokens}
	// Report the first real failure, not the cancellations it caused in the others.
	failed := -1
	for i, err := range errsByQ {
		if err != nil && (failed < 0 || (errors.Is(errsByQ[failed], context.Canceled) && !errors.Is(err, context.Canceled))) {
			failed = i
		}
	}
	if failed >= 0 {
		prefix := ""
		if len(ids) > 1 {
			prefix = fmt.Sprintf("question %q: ", ids[failed])
		}
		return resp, codeJudgeError(errsByQ[failed], prefix)
	}
	for i, id := range ids {
		answers[i].Type = req.Questions[id].Type
		resp.Answers[id] = answers[i]
	}
	return resp, nil
}

// codeJudgeError keeps a coded error's code and message (prefixed) and codes a bare context
// error.
func codeJudgeError(err error, prefix string) error {
	var ce *errs.Error
	if errors.As(err, &ce) {
		return &errs.Error{Code: ce.Code, Message: prefix + ce.Message, Details: ce.Details, Err: err}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return errs.Wrap(errs.Timeout, err, "%sthe judgment timed out", prefix)
	}
	return errs.Wrap(errs.Timeout, err, "%sthe judgment was cancelled", prefix)
}

// answerLLM answers one question: log-probabilities when the model may give them, else (or
// when it gave none) a JSON answer.
func (s *Service) answerLLM(ctx context.Context, e *engine, state string, q abi.Question) (abi.Answer, model.Usage, error) {
	var usage model.Usage
	if info := e.model.Info(); info.Provider == model.ProviderOpenAI && !s.lacksLogprobs(info) {
		a, u, fallback, err := s.answerLogprobs(ctx, e, state, q)
		usage = usage.Add(u)
		if !fallback {
			return a, usage, err
		}
	}
	a, u, err := s.answerJSON(ctx, e, state, q)
	return a, usage.Add(u), err
}

// modelIdentity names a model for the no-log-probabilities memory.
func modelIdentity(in model.Info) string {
	return in.Provider + "\x00" + in.BaseURL + "\x00" + in.Model
}

// lacksLogprobs reports whether the model described by in showed it gives no log-probabilities.
func (s *Service) lacksLogprobs(in model.Info) bool {
	p := s.noLogprobs.Load()
	return p != nil && *p == modelIdentity(in)
}

// answerLogprobs asks for a one-token answer and reads its probabilities. fallback is true
// when the model gave no log-probabilities (or refused the request for them) and the caller
// should ask for JSON instead.
func (s *Service) answerLogprobs(ctx context.Context, e *engine, state string, q abi.Question) (a abi.Answer, u model.Usage, fallback bool, err error) {
	zero := 0.0
	resp, err := e.model.Complete(ctx, model.Request{
		System:      e.prompt,
		Messages:    []model.Message{{Role: model.RoleUser, Content: questionPrompt(state, q, false)}},
		MaxTokens:   logprobMaxTokens,
		Temperature: &zero,
		TopLogprobs: topLogprobs,
	})
	if err != nil {
		// A server that does not support logprobs (some reasoning models, some local servers)
		// refuses the request outright: ask for JSON instead.
		if st := model.StatusCode(err); st == http.StatusBadRequest || st == http.StatusUnprocessableEntity {
			return abi.Answer{}, resp.Usage, true, nil
		}
		return abi.Answer{}, resp.Usage, false, err
	}
	weights, mass, ok := extractWeights(resp.Logprobs, q)
	if !ok {
		info := e.model.Info()
		id := modelIdentity(info)
		s.noLogprobs.Store(&id)
		s.log.Info("judge: the judge model gives no log-probabilities; asking for JSON answers from now on",
			"model", info.Model)
		return abi.Answer{}, resp.Usage, true, nil
	}
	a, ok = buildAnswer(q, weights)
	if !ok || mass < MinAnswerMass {
		return abi.Answer{}, resp.Usage, false, errs.Wrap(errs.Upstream, model.ErrBadResponse,
			"the judge model did not answer with one of the valid answers (%s); they held %.1f%% of its answer token's probability",
			strings.Join(answerTokens(q), ", "), mass*100)
	}
	return a, resp.Usage, false, nil
}

// extractWeights reads the probabilities of q's valid answers from the first answer token:
// the first generated token that is not blank or pure formatting. Its top alternatives (and
// the token itself) are normalised (leading-space markers, quotes and punctuation trimmed,
// lowercased) and the probabilities of variants of the same answer summed ("yes", " Yes",
// "YES"). Answers missing from the list get zero. mass is the summed probability of all valid
// answers (before renormalisation). ok is false when there are no log-probabilities to read.
func extractWeights(lps []model.TokenLogprob, q abi.Question) (weights []float64, mass float64, ok bool) {
	pos := -1
	for i, t := range lps {
		if normToken(t.Token) != "" {
			pos = i
			break
		}
	}
	if pos < 0 || len(lps[pos].Top) == 0 {
		return nil, 0, false
	}
	t := lps[pos]
	cands := t.Top
	found := false
	for _, c := range cands {
		if c.Token == t.Token {
			found = true
			break
		}
	}
	if !found {
		cands = append(append([]model.TopLogprob(nil), cands...), model.TopLogprob{Token: t.Token, Logprob: t.Logprob})
	}
	weights = make([]float64, len(answerKeys(q)))
	for _, c := range cands {
		i, ok := answerIndex(q, normToken(c.Token))
		if !ok || math.IsNaN(c.Logprob) {
			continue
		}
		p := math.Exp(c.Logprob)
		weights[i] += p
		mass += p
	}
	return weights, mass, true
}

var spaceMarkers = strings.NewReplacer("Ġ", " ", "▁", " ", "Ċ", " ", "ĉ", " ")

// normToken strips tokenizer space markers (Ġ, ▁, Ċ), whitespace, quotes and punctuation
// around a token and lowercases it.
func normToken(tok string) string {
	tok = spaceMarkers.Replace(tok)
	tok = strings.TrimFunc(tok, func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\n' || r == '\r' || strings.ContainsRune("\"'`*_.,:;!?()[]{}<>-", r)
	})
	return strings.ToLower(tok)
}

// answerIndex maps a normalised token to an answer: yes/no, a letter (select) or a digit
// (score).
func answerIndex(q abi.Question, tok string) (int, bool) {
	switch q.Type {
	case abi.JudgeBool:
		switch tok {
		case "yes":
			return 0, true
		case "no":
			return 1, true
		}
	case abi.JudgeSelect:
		if len(tok) == 1 && tok[0] >= 'a' && int(tok[0]-'a') < len(q.Criteria.Options) {
			return int(tok[0] - 'a'), true
		}
	case abi.JudgeScore:
		if len(tok) == 1 && tok[0] >= '0' && int(tok[0]-'0') < len(q.Criteria.Levels) {
			return int(tok[0] - '0'), true
		}
	}
	return 0, false
}

// answerTokens are the tokens the model is asked to answer with.
func answerTokens(q abi.Question) []string {
	switch q.Type {
	case abi.JudgeBool:
		return []string{"yes", "no"}
	case abi.JudgeSelect:
		t := make([]string, len(q.Criteria.Options))
		for i := range t {
			t[i] = string(rune('A' + i))
		}
		return t
	default:
		t := make([]string, len(q.Criteria.Levels))
		for i := range t {
			t[i] = strconv.Itoa(i)
		}
		return t
	}
}

// answerJSON asks for a JSON object of probabilities and validates it.
func (s *Service) answerJSON(ctx context.Context, e *engine, state string, q abi.Question) (abi.Answer, model.Usage, error) {
	zero := 0.0
	resp, err := e.model.Complete(ctx, model.Request{
		System:      e.prompt,
		Messages:    []model.Message{{Role: model.RoleUser, Content: questionPrompt(state, q, true)}},
		MaxTokens:   jsonMaxTokens,
		Temperature: &zero,
	})
	if err != nil {
		return abi.Answer{}, resp.Usage, err
	}
	weights, err := parseJSONAnswer(resp.Text, q)
	if err != nil {
		return abi.Answer{}, resp.Usage, errs.Wrap(errs.Upstream, fmt.Errorf("%w: %w", model.ErrBadResponse, err),
			"the judge model's JSON answer is not usable: %v", err)
	}
	a, ok := buildAnswer(q, weights)
	if !ok {
		return abi.Answer{}, resp.Usage, errs.Wrap(errs.Upstream, model.ErrBadResponse,
			"the judge model's JSON answer gives no probability to any valid answer")
	}
	return a, resp.Usage, nil
}

// parseJSONAnswer reads {"<answer>": <probability>, …} from text, tolerating code fences and
// prose around the object. Keys are the answer tokens (yes/no, letters, digits; case and
// surrounding spaces ignored) or, for select, the option names. Values must be finite
// non-negative numbers; missing answers get zero; unknown keys are an error.
func parseJSONAnswer(text string, q abi.Question) ([]float64, error) {
	start := strings.Index(text, "{")
	end := strings.LastIndex(text, "}")
	if start < 0 || end < start {
		return nil, fmt.Errorf("no JSON object in the answer")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text[start:end+1]), &obj); err != nil {
		return nil, fmt.Errorf("the JSON object does not parse: %v", err)
	}
	if len(obj) == 0 {
		return nil, fmt.Errorf("the JSON object is empty")
	}
	weights := make([]float64, len(answerKeys(q)))
	var sum float64
	for k, raw := range obj {
		i, ok := answerIndex(q, strings.ToLower(strings.TrimSpace(k)))
		if !ok && q.Type == abi.JudgeSelect {
			for j, o := range q.Criteria.Options {
				if o.Name == strings.TrimSpace(k) {
					i, ok = j, true
					break
				}
			}
		}
		if !ok {
			return nil, fmt.Errorf("unknown answer %q (valid: %s)", clip.BytesMark(k, 40, "…"), strings.Join(answerTokens(q), ", "))
		}
		var v float64
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("the probability of %q is not a number", k)
		}
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("the probability of %q is negative or not finite", k)
		}
		weights[i] += v
		sum += v
	}
	if !(sum > 0) {
		return nil, fmt.Errorf("all probabilities are zero")
	}
	return weights, nil
}

// questionPrompt is the user message for one question. The state is fenced as data; the
// answer format comes last so it is the freshest instruction.
func questionPrompt(state string, q abi.Question, asJSON bool) string {
	var b strings.Builder
	b.WriteString("<state>\n")
	b.WriteString(state)
	b.WriteString("\n</state>\n\n")
	b.WriteString("Question: ")
	b.WriteString(strings.TrimSpace(q.Instructions))
	b.WriteString("\n")
	tokens := answerTokens(q)
	switch q.Type {
	case abi.JudgeBool:
		if q.Criteria.True != "" {
			fmt.Fprintf(&b, "\"yes\" means: %s\n", q.Criteria.True)
		}
		if q.Criteria.False != "" {
			fmt.Fprintf(&b, "\"no\" means: %s\n", q.Criteria.False)
		}
	case abi.JudgeSelect:
		b.WriteString("\nOptions:\n")
		for i, o := range q.Criteria.Options {
			fmt.Fprintf(&b, "%s) %s", tokens[i], o.Name)
			if o.Description != "" {
				fmt.Fprintf(&b, ": %s", o.Description)
			}
			b.WriteString("\n")
		}
	case abi.JudgeScore:
		b.WriteString("\nLevels, from lowest to highest:\n")
		for i, l := range q.Criteria.Levels {
			fmt.Fprintf(&b, "%d: %s\n", i, l)
		}
	}
	b.WriteString("\n")
	if asJSON {
		keys := make([]string, len(tokens))
		for i, t := range tokens {
			keys[i] = fmt.Sprintf("%q: <probability>", t)
		}
		fmt.Fprintf(&b, "Answer with only a JSON object giving the probability of each answer, summing to 1: {%s}. No other text.",
			strings.Join(keys, ", "))
		return b.String()
	}
	switch q.Type {
	case abi.JudgeBool:
		b.WriteString("Answer with one word: yes or no.")
	case abi.JudgeSelect:
		fmt.Fprintf(&b, "Answer with one letter: %s.", orList(tokens))
	case abi.JudgeScore:
		fmt.Fprintf(&b, "Answer with one digit from 0 to %d: the level that fits best.", len(tokens)-1)
	}
	return b.String()
}

func orList(t []string) string {
	if len(t) <= 1 {
		return strings.Join(t, "")
	}
	return strings.Join(t[:len(t)-1], ", ") + " or " + t[len(t)-1]
}

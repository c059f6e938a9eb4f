package model

import (
	"context"
	"errors"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/pixie-dev/pixie/internal/clip"
)

// openaiModel talks to any OpenAI-compatible chat completions endpoint through the official
// SDK: OpenAI itself, vLLM, a llama.cpp server, Ollama, LM Studio.
type openaiModel struct {
	cfg    Config
	client openai.Client
}

var _ Model = (*openaiModel)(nil)

func newOpenAI(cfg Config) *openaiModel {
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL + "/"),
		option.WithHTTPClient(&http.Client{}),
		// No automatic retries: a gate has a time limit, and a retry after a 429 or 5xx would
		// spend it silently. cfg.Timeout bounds the one attempt.
		option.WithMaxRetries(0),
	}
	// Always set explicitly, so an empty key never falls back to the SDK's own environment
	// lookup in a way this package did not document.
	opts = append(opts, option.WithAPIKey(cfg.APIKey))
	return &openaiModel{cfg: cfg, client: openai.NewClient(opts...)}
}

func (m *openaiModel) Info() Info { return m.cfg.info() }

func (m *openaiModel) Complete(ctx context.Context, req Request) (Response, error) {
	if err := validateRequest(req); err != nil {
		return Response{}, err
	}
	params := openai.ChatCompletionNewParams{Model: m.cfg.Model}
	if req.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(req.System))
	}
	for _, msg := range req.Messages {
		if msg.Role == RoleAssistant {
			params.Messages = append(params.Messages, openai.AssistantMessage(msg.Content))
		} else {
			params.Messages = append(params.Messages, openai.UserMessage(msg.Content))
		}
	}
	if req.MaxTokens > 0 {
		// max_tokens rather than max_completion_tokens: every OpenAI-compatible server
		// (vLLM, llama.cpp, Ollama) understands it.
		params.MaxTokens = openai.Int(int64(req.MaxTokens))
	}
	if req.Temperature != nil {
		params.Temperature = openai.Float(*req.Temperature)
	}
	if req.TopLogprobs > 0 {
		params.Logprobs = openai.Bool(true)
		params.TopLogprobs = openai.Int(int64(req.TopLogprobs))
	}

	callCtx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	resp, err := m.client.Chat.Completions.New(callCtx, params)
	if err != nil {
		var apiErr *openai.Error
		if errors.As(err, &apiErr) {
			return Response{}, statusFailure(ProviderOpenAI, apiErr.StatusCode, m.cfg.APIKey, apiErr.Message)
		}
		return Response{}, transportFailure(callCtx, ctx, ProviderOpenAI, m.cfg.Timeout, m.cfg.APIKey, err)
	}
	if len(resp.Choices) == 0 {
		return Response{}, fail(ErrBadResponse, 0, m.cfg.APIKey, "model returned no choices (openai)", "empty choices")
	}
	choice := resp.Choices[0]
	out := Response{
		Text:  choice.Message.Content,
		Usage: Usage{InputTokens: int(resp.Usage.PromptTokens), OutputTokens: int(resp.Usage.CompletionTokens)},
		Model: resp.Model,
	}
	for _, t := range choice.Logprobs.Content {
		tl := TokenLogprob{Token: t.Token, Logprob: t.Logprob}
		for _, top := range t.TopLogprobs {
			tl.Top = append(tl.Top, TopLogprob{Token: top.Token, Logprob: top.Logprob})
		}
		out.Logprobs = append(out.Logprobs, tl)
	}
	if out.Text == "" && len(out.Logprobs) == 0 {
		if choice.Message.Refusal != "" {
			return Response{}, fail(ErrBadResponse, 0, m.cfg.APIKey, "model refused (openai): "+clip.BytesMark(choice.Message.Refusal, 300, "…"), "refusal")
		}
		return Response{}, fail(ErrBadResponse, 0, m.cfg.APIKey, "model returned an empty answer (openai)", "empty content")
	}
	return out, nil
}

package model

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
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
		params.Messages = append(params.Messages, openaiMessages(msg)...)
	}
	for _, t := range req.Tools {
		schema, _ := schemaObject(t.Schema) // validated
		def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(schema)}
		if t.Description != "" {
			def.Description = openai.String(t.Description)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(def))
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
		Stop:  openaiStop(choice.FinishReason),
	}
	for _, tc := range choice.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			return Response{}, fail(ErrBadResponse, 0, m.cfg.APIKey, "model returned a tool call of type "+clip.BytesMark(tc.Type, 40, "…")+", not a function call (openai)", "custom tool call")
		}
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Input: json.RawMessage(tc.Function.Arguments)})
	}
	if len(out.ToolCalls) > 0 {
		if out.ToolCalls, err = checkCalls(ProviderOpenAI, m.cfg.APIKey, out.ToolCalls, req.Tools); err != nil {
			return Response{}, err
		}
		if out.Stop == StopEndTurn || out.Stop == StopOther {
			// Some servers answer tool calls with finish_reason "stop".
			out.Stop = StopToolUse
		}
	}
	for _, t := range choice.Logprobs.Content {
		tl := TokenLogprob{Token: t.Token, Logprob: t.Logprob}
		for _, top := range t.TopLogprobs {
			tl.Top = append(tl.Top, TopLogprob{Token: top.Token, Logprob: top.Logprob})
		}
		out.Logprobs = append(out.Logprobs, tl)
	}
	if out.Text == "" && len(out.Logprobs) == 0 && len(out.ToolCalls) == 0 {
		if choice.Message.Refusal != "" {
			return Response{}, fail(ErrBadResponse, 0, m.cfg.APIKey, "model refused (openai): "+clip.BytesMark(choice.Message.Refusal, 300, "…"), "refusal")
		}
		return Response{}, fail(ErrBadResponse, 0, m.cfg.APIKey, "model returned an empty answer (openai)", "empty content")
	}
	return out, nil
}

// openaiMessages maps one message to chat completions messages. A user message's tool results
// become role "tool" messages (one per result, in order), followed by a user message with the
// rest of its parts (text and images, as image_url data URLs); an assistant message carries its
// text and its tool_calls.
func openaiMessages(msg Message) []openai.ChatCompletionMessageParamUnion {
	ps := msg.parts()
	if msg.Role == RoleAssistant {
		var text string
		var calls []openai.ChatCompletionMessageToolCallUnionParam
		for _, p := range ps {
			switch p.Type {
			case PartText:
				text += p.Text
			case PartToolCall:
				calls = append(calls, openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: p.ToolCall.ID, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: p.ToolCall.Name, Arguments: string(p.ToolCall.Input)},
				}})
			}
		}
		if len(calls) == 0 {
			return []openai.ChatCompletionMessageParamUnion{openai.AssistantMessage(text)}
		}
		am := openai.ChatCompletionAssistantMessageParam{ToolCalls: calls}
		if text != "" {
			am.Content.OfString = openai.String(text)
		}
		return []openai.ChatCompletionMessageParamUnion{{OfAssistant: &am}}
	}
	var out []openai.ChatCompletionMessageParamUnion
	var content []openai.ChatCompletionContentPartUnionParam
	textOnly := true
	for _, p := range ps {
		switch p.Type {
		case PartToolResult:
			// Chat completions have no error flag on a tool message: the text says it.
			text := p.ToolResult.Text
			if p.ToolResult.IsError {
				text = "error: " + text
			}
			out = append(out, openai.ToolMessage(text, p.ToolResult.CallID))
		case PartText:
			content = append(content, openai.TextContentPart(p.Text))
		case PartImage:
			textOnly = false
			content = append(content, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{
				URL: "data:" + p.Image.MediaType + ";base64," + base64.StdEncoding.EncodeToString(p.Image.Data),
			}))
		}
	}
	switch {
	case len(content) == 0:
	case textOnly:
		// Text alone travels as a string, which every OpenAI-compatible server understands.
		var text string
		for _, c := range content {
			text += c.OfText.Text
		}
		if len(out) == 0 || text != "" {
			out = append(out, openai.UserMessage(text))
		}
	default:
		out = append(out, openai.UserMessage(content))
	}
	return out
}

// openaiStop maps a finish_reason.
func openaiStop(reason string) StopReason {
	switch reason {
	case "stop":
		return StopEndTurn
	case "tool_calls", "function_call":
		return StopToolUse
	case "length":
		return StopMaxTokens
	}
	return StopOther
}

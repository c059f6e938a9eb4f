package model

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

// anthropicModel talks to Anthropic's Messages API through the official SDK. It never returns
// log-probabilities: the API has none.
type anthropicModel struct {
	cfg    Config
	client anthropic.Client
}

var _ Model = (*anthropicModel)(nil)

func newAnthropic(cfg Config) *anthropicModel {
	opts := []option.RequestOption{
		// The SDK's environment defaults read credentials from several places (profiles,
		// federation, ANTHROPIC_AUTH_TOKEN); Pixie uses exactly the documented key instead.
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(cfg.BaseURL + "/"),
		option.WithHTTPClient(&http.Client{}),
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	return &anthropicModel{cfg: cfg, client: anthropic.NewClient(opts...)}
}

func (m *anthropicModel) Info() Info { return m.cfg.info() }

func (m *anthropicModel) Complete(ctx context.Context, req Request) (Response, error) {
	if err := validateRequest(req); err != nil {
		return Response{}, err
	}
	maxTokens := req.MaxTokens
	if maxTokens == 0 {
		maxTokens = defaultAnthropicMaxTokens
	}
	params := anthropic.MessageNewParams{Model: anthropic.Model(m.cfg.Model), MaxTokens: int64(maxTokens)}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for _, msg := range req.Messages {
		blocks := anthropicBlocks(msg)
		if msg.Role == RoleAssistant {
			params.Messages = append(params.Messages, anthropic.NewAssistantMessage(blocks...))
		} else {
			params.Messages = append(params.Messages, anthropic.NewUserMessage(blocks...))
		}
	}
	for _, t := range req.Tools {
		schema, _ := schemaObject(t.Schema) // validated
		in := anthropic.ToolInputSchemaParam{Properties: schema["properties"], ExtraFields: map[string]any{}}
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				if s, ok := r.(string); ok {
					in.Required = append(in.Required, s)
				}
			}
		}
		for k, v := range schema {
			if k != "type" && k != "properties" && k != "required" {
				in.ExtraFields[k] = v
			}
		}
		tool := anthropic.ToolParam{Name: t.Name, InputSchema: in}
		if t.Description != "" {
			tool.Description = anthropic.String(t.Description)
		}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: &tool})
	}
	if req.Temperature != nil {
		params.Temperature = anthropic.Float(*req.Temperature)
	}

	callCtx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	resp, err := m.client.Messages.New(callCtx, params)
	if err != nil {
		var apiErr *anthropic.Error
		if errors.As(err, &apiErr) {
			return Response{}, statusFailure(ProviderAnthropic, apiErr.StatusCode, m.cfg.APIKey, anthropicMessage(apiErr.RawJSON()))
		}
		return Response{}, transportFailure(callCtx, ctx, ProviderAnthropic, m.cfg.Timeout, m.cfg.APIKey, err)
	}
	var text strings.Builder
	var calls []ToolCall
	for _, block := range resp.Content {
		switch block.Type {
		case "text":
			text.WriteString(block.Text)
		case "tool_use":
			calls = append(calls, ToolCall{ID: block.ID, Name: block.Name, Input: append(json.RawMessage(nil), block.Input...)})
		}
	}
	if len(calls) > 0 {
		if calls, err = checkCalls(ProviderAnthropic, m.cfg.APIKey, calls, req.Tools); err != nil {
			return Response{}, err
		}
	}
	if text.Len() == 0 && len(calls) == 0 {
		return Response{}, fail(ErrBadResponse, 0, m.cfg.APIKey,
			"model returned no text (anthropic, stop reason "+string(resp.StopReason)+")", "no text block")
	}
	return Response{
		Text:      text.String(),
		Usage:     Usage{InputTokens: int(resp.Usage.InputTokens), OutputTokens: int(resp.Usage.OutputTokens)},
		Model:     string(resp.Model),
		ToolCalls: calls,
		Stop:      anthropicStop(resp.StopReason, len(calls) > 0),
	}, nil
}

// anthropicBlocks maps a message's parts to content blocks. In a user message the tool results
// come first, as the API requires, then the text and images in order; empty text parts are
// left out (the API refuses empty text blocks) unless nothing else is there.
func anthropicBlocks(msg Message) []anthropic.ContentBlockParamUnion {
	var results, rest []anthropic.ContentBlockParamUnion
	for _, p := range msg.parts() {
		switch p.Type {
		case PartText:
			if p.Text != "" {
				rest = append(rest, anthropic.NewTextBlock(p.Text))
			}
		case PartImage:
			rest = append(rest, anthropic.NewImageBlockBase64(p.Image.MediaType, base64.StdEncoding.EncodeToString(p.Image.Data)))
		case PartToolCall:
			rest = append(rest, anthropic.NewToolUseBlock(p.ToolCall.ID, p.ToolCall.Input, p.ToolCall.Name))
		case PartToolResult:
			if p.ToolResult.Text == "" {
				// No empty text block: a result without content.
				results = append(results, anthropic.ContentBlockParamUnion{OfToolResult: &anthropic.ToolResultBlockParam{
					ToolUseID: p.ToolResult.CallID, IsError: anthropic.Bool(p.ToolResult.IsError)}})
				continue
			}
			results = append(results, anthropic.NewToolResultBlock(p.ToolResult.CallID, p.ToolResult.Text, p.ToolResult.IsError))
		}
	}
	out := append(results, rest...)
	if len(out) == 0 {
		out = append(out, anthropic.NewTextBlock(""))
	}
	return out
}

// anthropicStop maps a stop reason.
func anthropicStop(r anthropic.StopReason, calls bool) StopReason {
	switch {
	case r == anthropic.StopReasonToolUse || (calls && r != anthropic.StopReasonMaxTokens):
		return StopToolUse
	case r == anthropic.StopReasonEndTurn:
		return StopEndTurn
	case r == anthropic.StopReasonMaxTokens:
		return StopMaxTokens
	}
	return StopOther
}

// anthropicMessage extracts error.message from an Anthropic error body
// ({"type":"error","error":{"type":…,"message":…}}).
func anthropicMessage(raw string) string {
	var body struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(raw), &body) != nil {
		return ""
	}
	if body.Error.Type != "" && body.Error.Message != "" {
		return body.Error.Type + ": " + body.Error.Message
	}
	return body.Error.Message
}

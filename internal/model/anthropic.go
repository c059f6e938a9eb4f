package model

import (
	"context"
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
		block := anthropic.NewTextBlock(msg.Content)
		if msg.Role == RoleAssistant {
			params.Messages = append(params.Messages, anthropic.NewAssistantMessage(block))
		} else {
			params.Messages = append(params.Messages, anthropic.NewUserMessage(block))
		}
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
	for _, block := range resp.Content {
		if block.Type == "text" {
			text.WriteString(block.Text)
		}
	}
	if text.Len() == 0 {
		return Response{}, fail(ErrBadResponse, 0, m.cfg.APIKey,
			"model returned no text (anthropic, stop reason "+string(resp.StopReason)+")", "no text block")
	}
	return Response{
		Text:  text.String(),
		Usage: Usage{InputTokens: int(resp.Usage.InputTokens), OutputTokens: int(resp.Usage.OutputTokens)},
		Model: string(resp.Model),
	}, nil
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

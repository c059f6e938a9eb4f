// Package model owns the Pixie model: a small provider-neutral interface for one chat
// completion, and the providers behind it (OpenAI-compatible chat completions through
// github.com/openai/openai-go/v3, Anthropic Messages through github.com/anthropics/anthropic-sdk-go).
// No third-party type crosses this package's API.
//
// A completion may offer tools (Request.Tools) and carry content parts (Part: images, an
// assistant's tool calls, tool results); the Response then returns the tool calls the model
// made and why it stopped. internal/agent runs the tool loop on top of this.
//
// Having no model configured is a normal state: New returns a Model whose calls fail with
// ErrNoModel and a message saying how to configure one.
package model

import (
	"context"
	"errors"
	"time"
)

// Role of a chat message.
type Role string

// Roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Message is one chat message: its text, and content parts (images, tool calls, tool results;
// see Part) that follow the text. A text-only message sets Content alone.
type Message struct {
	Role    Role   `json:"role"`
	Content string `json:"content"`
	Parts   []Part `json:"parts,omitempty"`
}

// Request is one completion request.
type Request struct {
	System   string    `json:"system,omitempty"`
	Messages []Message `json:"messages"`
	// MaxTokens caps the answer; zero means the provider default chosen by this package.
	MaxTokens int `json:"maxTokens,omitempty"`
	// Temperature, when non-nil, is sent as is (0 for judgments).
	Temperature *float64 `json:"temperature,omitempty"`
	// TopLogprobs > 0 asks for token log-probabilities with that many alternatives per token
	// (OpenAI-compatible providers only; others ignore it and return no Logprobs).
	TopLogprobs int `json:"topLogprobs,omitempty"`
	// Tools are offered to the model; its Response may then call them (ToolCalls).
	Tools []Tool `json:"tools,omitempty"`
}

// Usage is the token usage of one call.
type Usage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
}

// Add returns u+o.
func (u Usage) Add(o Usage) Usage {
	return Usage{InputTokens: u.InputTokens + o.InputTokens, OutputTokens: u.OutputTokens + o.OutputTokens}
}

// TopLogprob is one alternative at a token position.
type TopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
}

// TokenLogprob is the log-probability of one generated token and its top alternatives.
type TokenLogprob struct {
	Token   string       `json:"token"`
	Logprob float64      `json:"logprob"`
	Top     []TopLogprob `json:"top,omitempty"`
}

// Response is one completion.
type Response struct {
	Text  string `json:"text"`
	Usage Usage  `json:"usage"`
	// Logprobs is nil when the provider gave none.
	Logprobs []TokenLogprob `json:"logprobs,omitempty"`
	Model    string         `json:"model"`
	// ToolCalls are the calls of offered tools the model made, in order; each was checked (an
	// id, an offered tool's name, a JSON object input).
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// Stop is why the model stopped: end_turn, tool_use, max_tokens or other.
	Stop StopReason `json:"stop,omitempty"`
}

// Info describes a configured model without secrets.
type Info struct {
	Configured bool   `json:"configured"`
	Provider   string `json:"provider,omitempty"` // "openai" or "anthropic"
	BaseURL    string `json:"baseUrl,omitempty"`
	Model      string `json:"model,omitempty"`
	HasAPIKey  bool   `json:"hasApiKey"`
}

// Model is a chat model.
type Model interface {
	Complete(ctx context.Context, req Request) (Response, error)
	Info() Info
}

// Typed failures. Errors returned by Complete wrap exactly one of these (errors.Is), with a
// message safe to show (never the API key).
var (
	ErrNoModel     = errors.New("no Pixie model is configured")
	ErrAuth        = errors.New("model authentication failed")
	ErrRateLimit   = errors.New("model rate limit")
	ErrTimeout     = errors.New("model call timed out")
	ErrBadResponse = errors.New("model gave a bad response")
)

// Config selects and configures a provider. The zero value means "no model".
type Config struct {
	// Provider is "openai" (any OpenAI-compatible endpoint) or "anthropic"; empty means none.
	Provider string `yaml:"provider" json:"provider"`
	// BaseURL overrides the provider's endpoint (for vLLM, llama.cpp, Ollama, LM Studio, …).
	BaseURL string `yaml:"baseUrl" json:"baseUrl"`
	// Model is the model name.
	Model string `yaml:"model" json:"model"`
	// APIKey is a secret; it is masked everywhere it is shown.
	APIKey string `yaml:"apiKey" json:"apiKey"`
	// Timeout bounds one call; zero means 60s.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
}

package model

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
)

// Provider names accepted in Config.Provider (case-insensitive).
const (
	ProviderOpenAI    = "openai"    // any OpenAI-compatible chat completions endpoint
	ProviderAnthropic = "anthropic" // Anthropic Messages API
)

// Default endpoints, used when Config.BaseURL is empty.
const (
	DefaultOpenAIBaseURL    = "https://api.openai.com/v1"
	DefaultAnthropicBaseURL = "https://api.anthropic.com"
)

// DefaultTimeout bounds one call when Config.Timeout is zero.
const DefaultTimeout = 60 * time.Second

// defaultAnthropicMaxTokens is sent when Request.MaxTokens is zero: the Messages API requires
// max_tokens, the chat completions API does not.
const defaultAnthropicMaxTokens = 1024

// Environment variables read as the API key when Config.APIKey is empty. The config layer
// handles PIXIE_MODEL_API_KEY (it fills Config.APIKey); these are the providers' usual
// variables, read only as a fallback.
const (
	EnvOpenAIAPIKey    = "OPENAI_API_KEY"
	EnvAnthropicAPIKey = "ANTHROPIC_API_KEY"
)

// noModelMessage says how to configure a model; it is the message of every ErrNoModel error.
const noModelMessage = "no Pixie model is configured: set one with `pixie settings model set --provider openai|anthropic " +
	"--model NAME --api-key-env VAR` (or Studio's Settings page), or set PIXIE_MODEL_PROVIDER (openai or anthropic), " +
	"PIXIE_MODEL_MODEL and PIXIE_MODEL_API_KEY (PIXIE_MODEL_BASE_URL for vLLM, llama.cpp, Ollama, …), " +
	"or the model: section of pixie.yaml; see docs/models.md"

// Validate checks the configuration without contacting the provider. An empty Provider is
// valid (it means "no model").
func (c Config) Validate() error {
	p := normProvider(c.Provider)
	switch p {
	case "":
		return nil
	case ProviderOpenAI, ProviderAnthropic:
	default:
		return errs.New(errs.Invalid, "unknown model provider %q: use %q (any OpenAI-compatible endpoint) or %q",
			c.Provider, ProviderOpenAI, ProviderAnthropic)
	}
	if strings.TrimSpace(c.Model) == "" {
		return errs.New(errs.Invalid, "model provider %q is set but the model name is empty: set PIXIE_MODEL_MODEL or model.model in pixie.yaml", p)
	}
	if c.BaseURL != "" {
		u, err := url.Parse(c.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errs.New(errs.Invalid, "model base URL %q is not an absolute http(s) URL", c.BaseURL)
		}
		if u.User != nil {
			return errs.New(errs.Invalid, "model base URL must not carry credentials; use the API key setting")
		}
	}
	if c.Timeout < 0 {
		return errs.New(errs.Invalid, "model timeout must not be negative")
	}
	return nil
}

// New returns the model described by cfg. An empty Provider gives a Model whose Complete fails
// with ErrNoModel (Info().Configured is false); that is a normal state, not an error. An
// unknown provider, a missing model name or a malformed base URL is an errs.Invalid error.
//
// The API key is cfg.APIKey, or else the provider's usual environment variable
// (OPENAI_API_KEY or ANTHROPIC_API_KEY). The real OpenAI and Anthropic endpoints (no BaseURL)
// need a key; a custom BaseURL (vLLM, llama.cpp, Ollama, a proxy) may run without one.
func New(cfg Config) (Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Provider = normProvider(cfg.Provider)
	if cfg.Provider == "" {
		return noModel{}, nil
	}
	cfg.Model = strings.TrimSpace(cfg.Model)
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	custom := cfg.BaseURL != ""
	switch cfg.Provider {
	case ProviderOpenAI:
		if cfg.APIKey == "" {
			cfg.APIKey = os.Getenv(EnvOpenAIAPIKey)
		}
		if !custom {
			cfg.BaseURL = DefaultOpenAIBaseURL
		}
	case ProviderAnthropic:
		if cfg.APIKey == "" {
			cfg.APIKey = os.Getenv(EnvAnthropicAPIKey)
		}
		if !custom {
			cfg.BaseURL = DefaultAnthropicBaseURL
		}
	}
	if cfg.APIKey == "" && !custom {
		env := EnvOpenAIAPIKey
		if cfg.Provider == ProviderAnthropic {
			env = EnvAnthropicAPIKey
		}
		return nil, errs.New(errs.Invalid, "model provider %q needs an API key: set PIXIE_MODEL_API_KEY, model.apiKey in pixie.yaml, or %s", cfg.Provider, env)
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.Provider == ProviderAnthropic {
		return newAnthropic(cfg), nil
	}
	return newOpenAI(cfg), nil
}

func normProvider(p string) string { return strings.ToLower(strings.TrimSpace(p)) }

// noModel is the Model of an empty configuration.
type noModel struct{}

var _ Model = noModel{}

func (noModel) Complete(context.Context, Request) (Response, error) {
	return Response{}, errs.Wrap(errs.Unavailable, ErrNoModel, "%s", noModelMessage)
}

func (noModel) Info() Info { return Info{} }

// info builds the secret-free description of a configured model.
func (c Config) info() Info {
	return Info{Configured: true, Provider: c.Provider, BaseURL: c.BaseURL, Model: c.Model, HasAPIKey: c.APIKey != ""}
}

// validateRequest rejects requests no provider can answer.
func validateRequest(req Request) error {
	if len(req.Messages) == 0 {
		return errs.New(errs.Invalid, "a model request needs at least one message")
	}
	for i, m := range req.Messages {
		if m.Role != RoleUser && m.Role != RoleAssistant {
			return errs.New(errs.Invalid, "message %d has unknown role %q", i, m.Role)
		}
	}
	if req.MaxTokens < 0 || req.TopLogprobs < 0 {
		return errs.New(errs.Invalid, "maxTokens and topLogprobs must not be negative")
	}
	if err := validateTools(req.Tools); err != nil {
		return err
	}
	return validateParts(req.Messages)
}

// timeoutText formats a timeout for messages ("60s", "250ms").
func timeoutText(d time.Duration) string { return fmt.Sprint(d) }

package model

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/pixie-dev/pixie/internal/clip"
	"github.com/pixie-dev/pixie/internal/errs"
)

// callError is the cause of every failed call: exactly one sentinel, the provider's HTTP status
// (0 when there was none) and a detail that is already free of the API key.
type callError struct {
	sentinel error
	status   int
	detail   string
	ctxErr   error // context.Canceled or DeadlineExceeded when the call was cut short
}

func (e *callError) Error() string { return e.sentinel.Error() + ": " + e.detail }

// Unwrap gives the sentinel, and the context error of a call cut short (so
// errors.Is(err, context.Canceled) tells a cancelled call from a slow provider).
func (e *callError) Unwrap() []error {
	if e.ctxErr != nil {
		return []error{e.sentinel, e.ctxErr}
	}
	return []error{e.sentinel}
}

// StatusCode returns the HTTP status the provider answered a failed call with, or 0 when the
// failure was not an HTTP status (timeout, network, undecodable body).
func StatusCode(err error) int {
	var ce *callError
	if errors.As(err, &ce) {
		return ce.status
	}
	return 0
}

// codeOf maps a sentinel to the domain code the server turns into an HTTP status. A model's own
// 401 or 429 is not the caller's: it is an upstream or availability problem of Pixie's.
func codeOf(sentinel error) errs.Code {
	switch sentinel {
	case ErrNoModel, ErrRateLimit:
		return errs.Unavailable
	case ErrTimeout:
		return errs.Timeout
	default: // ErrAuth, ErrBadResponse
		return errs.Upstream
	}
}

// fail builds the coded error of a failed call. msg is shown to clients and detail is kept
// as the cause; both are redacted of key.
func fail(sentinel error, status int, key, msg, detail string) error {
	msg = redact(msg, key)
	return errs.Wrap(codeOf(sentinel), &callError{sentinel: sentinel, status: status, detail: redact(detail, key)}, "%s", msg)
}

// statusFailure classifies an HTTP error status from a provider. providerMsg is the message
// the provider put in its error body (may be empty).
func statusFailure(provider string, status int, key, providerMsg string) error {
	providerMsg = clip.BytesMark(strings.TrimSpace(providerMsg), 300, "…")
	suffix := ""
	if providerMsg != "" {
		suffix = ": " + providerMsg
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		// The provider's message is left out: some echo part of the key.
		return fail(ErrAuth, status, key,
			fmt.Sprintf("model authentication failed (HTTP %d from %s): check PIXIE_MODEL_API_KEY", status, provider),
			fmt.Sprintf("HTTP %d", status))
	case status == http.StatusTooManyRequests:
		return fail(ErrRateLimit, status, key,
			fmt.Sprintf("model rate limit (HTTP 429 from %s)%s", provider, suffix), "HTTP 429"+suffix)
	case status >= 500:
		return fail(ErrBadResponse, status, key,
			fmt.Sprintf("model server error (HTTP %d from %s)%s", status, provider, suffix), fmt.Sprintf("HTTP %d%s", status, suffix))
	default:
		return fail(ErrBadResponse, status, key,
			fmt.Sprintf("model request refused (HTTP %d from %s)%s", status, provider, suffix), fmt.Sprintf("HTTP %d%s", status, suffix))
	}
}

// transportFailure classifies an error that carries no HTTP status: a timeout, a cancelled
// call, an unreachable endpoint or an undecodable body.
func transportFailure(ctx context.Context, parent context.Context, provider string, timeout time.Duration, key string, err error) error {
	var ne net.Error
	timedOut := errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
	cancelled := errors.Is(parent.Err(), context.Canceled) || (!timedOut && errors.Is(err, context.Canceled))
	switch {
	case cancelled:
		return errs.Wrap(errs.Timeout, &callError{sentinel: ErrTimeout, detail: "cancelled: " + redact(err.Error(), key), ctxErr: context.Canceled},
			"model call cancelled (%s)", provider)
	case timedOut:
		limit := "limit " + timeoutText(timeout)
		if errors.Is(parent.Err(), context.DeadlineExceeded) {
			limit = "the caller's time limit"
		}
		return errs.Wrap(errs.Timeout, &callError{sentinel: ErrTimeout, detail: redact(err.Error(), key), ctxErr: context.DeadlineExceeded},
			"model call timed out (%s, %s)", provider, limit)
	}
	var oe *net.OpError
	if errors.As(err, &oe) || strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "no such host") {
		return errs.Wrap(errs.Unavailable, &callError{sentinel: ErrBadResponse, detail: redact(err.Error(), key)},
			"model endpoint unreachable (%s): %s", provider, clip.BytesMark(redact(err.Error(), key), 300, "…"))
	}
	return fail(ErrBadResponse, 0, key, fmt.Sprintf("model gave an undecodable response (%s)", provider), err.Error())
}

// redact removes the API key from s.
func redact(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "[redacted]")
}

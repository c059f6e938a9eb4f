// Package errs owns Pixie's domain error type: an error that carries a stable, machine-readable
// code. Domain packages return these (wrapped with %w as they travel up); the server maps a code
// to an HTTP status in exactly one place (server/errors.go), and the CLI maps it to an exit code.
//
// Only the standard library is imported, so every package may use it.
package errs

import (
	"errors"
	"fmt"
)

// Code is a stable error code. Codes are part of the API: clients match on them, so a code is
// never renamed once released.
type Code string

// The codes. The HTTP status each maps to is in server/errors.go.
const (
	Invalid       Code = "invalid"       // 400: the request is malformed or fails validation
	Unauthorized  Code = "unauthorized"  // 401: no or wrong credentials
	Forbidden     Code = "forbidden"     // 403: credentials fine, action not allowed
	NotFound      Code = "not_found"     // 404
	Conflict      Code = "conflict"      // 409: state does not allow it (already consumed, in use, …)
	TooLarge      Code = "too_large"     // 413
	Unprocessable Code = "unprocessable" // 422: well-formed but semantically refused (bad module, …)
	RateLimited   Code = "rate_limited"  // 429
	Unavailable   Code = "unavailable"   // 503: a dependency (model, channel, executor) is not there
	Timeout       Code = "timeout"       // 504
	Upstream      Code = "upstream"      // 502: a remote service answered badly
	Internal      Code = "internal"      // 500
)

// Error is a coded error. Message is safe to show to a client; Err (optional) is the cause and
// is never shown, only logged.
type Error struct {
	Code    Code
	Message string
	// Details is optional structured data returned to the client (for example every problem a
	// refused save found). It must hold no secrets.
	Details any
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil && e.Message == "" {
		return e.Err.Error()
	}
	return e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// New returns a coded error with a formatted message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns a coded error with a message and a cause. The cause stays reachable through
// errors.Is/As but is never shown to clients.
func Wrap(code Code, err error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// WithDetails returns a copy of e carrying details.
func (e *Error) WithDetails(d any) *Error {
	c := *e
	c.Details = d
	return &c
}

// CodeOf returns the code of the first *Error in err's chain, or Internal when there is none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// Is reports whether err carries code.
func Is(err error, code Code) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

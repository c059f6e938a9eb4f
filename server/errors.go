package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// statusOf is the one mapping from domain error codes to HTTP statuses.
var statusOf = map[errs.Code]int{
	errs.Invalid:       http.StatusBadRequest,
	errs.Unauthorized:  http.StatusUnauthorized,
	errs.Forbidden:     http.StatusForbidden,
	errs.NotFound:      http.StatusNotFound,
	errs.Conflict:      http.StatusConflict,
	errs.TooLarge:      http.StatusRequestEntityTooLarge,
	errs.Unprocessable: http.StatusUnprocessableEntity,
	errs.RateLimited:   http.StatusTooManyRequests,
	errs.Unavailable:   http.StatusServiceUnavailable,
	errs.Timeout:       http.StatusGatewayTimeout,
	errs.Upstream:      http.StatusBadGateway,
	errs.Internal:      http.StatusInternalServerError,
}

// codeOfStatus maps echo's own HTTP errors (unknown route, wrong method, body limit) back to
// codes, so they get the same JSON shape.
var codeOfStatus = map[int]errs.Code{
	http.StatusBadRequest:            errs.Invalid,
	http.StatusUnauthorized:          errs.Unauthorized,
	http.StatusForbidden:             errs.Forbidden,
	http.StatusNotFound:              errs.NotFound,
	http.StatusMethodNotAllowed:      errs.Invalid,
	http.StatusRequestEntityTooLarge: errs.TooLarge,
	http.StatusUnsupportedMediaType:  errs.Invalid,
	http.StatusTooManyRequests:       errs.RateLimited,
	http.StatusServiceUnavailable:    errs.Unavailable,
}

// ErrorBody is the JSON shape of every error answer.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details any    `json:"details,omitempty"`
}

// toHTTP turns any error into a status and body. Messages of uncoded errors are not shown:
// they may carry internals, so clients get a generic message and the log gets the cause.
func toHTTP(err error) (int, ErrorBody) {
	var ce *errs.Error
	var he *echo.HTTPError
	switch {
	case errors.As(err, &ce):
		st, ok := statusOf[ce.Code]
		if !ok {
			st = http.StatusInternalServerError
		}
		return st, ErrorBody{ErrorDetail{Code: string(ce.Code), Message: ce.Message, Details: ce.Details}}
	case errors.As(err, &he):
		code, ok := codeOfStatus[he.Code]
		if !ok {
			code = errs.Internal
		}
		msg := http.StatusText(he.Code)
		switch he.Code {
		case http.StatusNotFound:
			msg = "no such route"
		case http.StatusRequestEntityTooLarge:
			msg = "request body is over the size limit"
		case http.StatusMethodNotAllowed:
			msg = "method not allowed on this route"
		}
		return he.Code, ErrorBody{ErrorDetail{Code: string(code), Message: msg}}
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, ErrorBody{ErrorDetail{Code: string(errs.NotFound), Message: "not found"}}
	case errors.Is(err, store.ErrConflict):
		return http.StatusConflict, ErrorBody{ErrorDetail{Code: string(errs.Conflict), Message: "conflicting update, try again"}}
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, ErrorBody{ErrorDetail{Code: string(errs.Timeout), Message: "timed out"}}
	case errors.Is(err, context.Canceled):
		return 499, ErrorBody{ErrorDetail{Code: "canceled", Message: "request canceled"}}
	}
	return http.StatusInternalServerError, ErrorBody{ErrorDetail{Code: string(errs.Internal), Message: "internal error"}}
}

func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	st, body := toHTTP(err)
	if st >= 500 {
		s.log.Error("request failed", "request_id", c.Response().Header().Get(echo.HeaderXRequestID),
			"method", c.Request().Method, "path", c.Path(), "status", st, "err", err.Error())
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(st)
		return
	}
	_ = c.JSON(st, body)
}

package proxy

import (
	"encoding/json"
	"net/http"
)

// WriteAPIError writes an error answer in the shape the API's clients parse, so a host shows
// Pixie's message the way it shows the vendor's own errors:
//
//	Anthropic: {"type":"error","error":{"type":"<error type>","message":"…"}}
//	OpenAI:    {"error":{"message":"…","type":"<error type>","param":null,"code":null}}
//
// The error type follows the status as each vendor documents it.
func WriteAPIError(w http.ResponseWriter, api API, status int, message string) {
	var body any
	switch api {
	case OpenAI:
		type detail struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		}
		body = struct {
			Error detail `json:"error"`
		}{detail{Message: message, Type: openAIErrorType(status)}}
	default:
		type detail struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		}
		body = struct {
			Type  string `json:"type"`
			Error detail `json:"error"`
		}{"error", detail{Type: anthropicErrorType(status), Message: message}}
	}
	b, _ := json.Marshal(body)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	}
	return "api_error"
}

func openAIErrorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status < 500:
		return "invalid_request_error"
	}
	return "server_error"
}

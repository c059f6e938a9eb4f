package server

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/labstack/echo/v4"
)

// checkSentWhole checks that an answer sent with sendJSON came with its length, not chunked:
// the client has all of it as soon as it is flushed.
func checkSentWhole(t testing.TB, resp *http.Response, body []byte) {
	t.Helper()
	if len(resp.TransferEncoding) > 0 || resp.ContentLength != int64(len(body)) {
		t.Errorf("answer sent with Transfer-Encoding %v and Content-Length %d for %d bytes", resp.TransferEncoding, resp.ContentLength, len(body))
	}
}

// sendJSON writes what echo's c.JSON writes, headers and bytes, plus the length.
func TestSendJSONIsEchoJSON(t *testing.T) {
	tests := []struct {
		name   string
		status int
		v      any
	}{
		{"object", http.StatusOK, map[string]any{"action": "block", "text": "<rm -rf />", "notes": []string{}}},
		{"string with escapes", http.StatusCreated, "a\"b\\c\n\u2028é"},
		{"null", http.StatusOK, nil},
	}
	e := echo.New()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := httptest.NewRecorder()
			if err := e.NewContext(httptest.NewRequest(http.MethodPost, "/", nil), want).JSON(tc.status, tc.v); err != nil {
				t.Fatal(err)
			}
			got := httptest.NewRecorder()
			if err := sendJSON(e.NewContext(httptest.NewRequest(http.MethodPost, "/", nil), got), tc.status, tc.v); err != nil {
				t.Fatal(err)
			}
			if got.Code != want.Code || got.Body.String() != want.Body.String() ||
				got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
				t.Fatalf("got %d %q %q, echo wrote %d %q %q", got.Code, got.Header().Get("Content-Type"), got.Body,
					want.Code, want.Header().Get("Content-Type"), want.Body)
			}
			if got.Header().Get("Content-Length") != strconv.Itoa(got.Body.Len()) || !got.Flushed {
				t.Fatalf("Content-Length %q for %d bytes, flushed %v", got.Header().Get("Content-Length"), got.Body.Len(), got.Flushed)
			}
		})
	}
	// A value JSON cannot encode is an error, and nothing is written.
	rec := httptest.NewRecorder()
	if err := sendJSON(e.NewContext(httptest.NewRequest(http.MethodPost, "/", nil), rec), http.StatusOK, make(chan int)); err == nil || rec.Body.Len() != 0 {
		t.Fatalf("%v, wrote %q", err, rec.Body)
	}
}

package server

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
)

// sendJSON writes v as JSON, the bytes echo's c.JSON writes, and sends them at once (see
// sendJSONBlob).
func sendJSON(c echo.Context, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return sendJSONBlob(c, status, append(b, '\n'))
}

// sendJSONBlob writes b as the whole JSON answer, with its length, and flushes it to the
// client, so that what the handler does afterwards (work set off through internal/later)
// does not hold the answer back. echo's c.JSON leaves the answer in net/http's buffer until
// the handler returns, and flushing without a length would switch the answer to chunked
// encoding, whose end is sent only when the handler returns.
func sendJSONBlob(c echo.Context, status int, b []byte) error {
	res := c.Response()
	res.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	res.Header().Set(echo.HeaderContentLength, strconv.Itoa(len(b)))
	res.WriteHeader(status)
	if _, err := res.Write(b); err != nil {
		return err
	}
	// A failed flush means the client went away; the answer is written either way, and an
	// error now could only make echo try to write another answer.
	_ = http.NewResponseController(res.Writer).Flush()
	return nil
}

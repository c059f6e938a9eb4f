package server

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
)

// sseWriter writes a Server-Sent Events stream (text/event-stream) and flushes after every
// frame. It is the one SSE writer of the server; a route opens it with startSSE, writes
// frames, and returns when the client goes away (a write fails or the request context ends)
// or the server shuts down (Server.Done).
type sseWriter struct {
	res *echo.Response
	buf bytes.Buffer
}

// startSSE sends the stream's headers. It lifts the server's write timeout for this response
// only. (The read timeout needs nothing: net/http clears the read deadline once the request is
// read, and the client's disconnect still ends the request context.)
func startSSE(c echo.Context) (*sseWriter, error) {
	res := c.Response()
	rc := http.NewResponseController(res.Writer)
	if err := rc.SetWriteDeadline(time.Time{}); err != nil {
		return nil, fmt.Errorf("sse: lift the write deadline: %w", err)
	}
	h := res.Header()
	h.Set(echo.HeaderContentType, "text/event-stream; charset=utf-8")
	h.Set(echo.HeaderCacheControl, "no-cache")
	h.Set(echo.HeaderConnection, "keep-alive")
	h.Set("X-Accel-Buffering", "no") // keep reverse proxies from buffering the stream
	res.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return nil, fmt.Errorf("sse: flush: %w", err)
	}
	return &sseWriter{res: res}, nil
}

// Open writes the stream's opening: a comment line and the client's reconnection delay.
func (w *sseWriter) Open(comment string, retry time.Duration) error {
	w.buf.Reset()
	w.comment(comment)
	w.buf.WriteString("retry: " + strconv.FormatInt(retry.Milliseconds(), 10) + "\n\n")
	return w.flush()
}

// Comment writes one comment frame (": text"); clients ignore it, proxies see traffic.
func (w *sseWriter) Comment(text string) error {
	w.buf.Reset()
	w.comment(text)
	w.buf.WriteByte('\n')
	return w.flush()
}

func (w *sseWriter) comment(text string) {
	for _, line := range bytes.Split([]byte(text), []byte("\n")) {
		w.buf.WriteString(": ")
		w.buf.Write(line)
		w.buf.WriteByte('\n')
	}
}

// Event writes one event frame and flushes it; data is split into one data line per line.
func (w *sseWriter) Event(name string, data []byte) error {
	w.buf.Reset()
	w.add(name, data)
	return w.flush()
}

// Events writes frames that are ready together and flushes them at once: one write instead of
// one per frame, which matters when a change goes out to many streams.
func (w *sseWriter) Events(frames []sseEvent) error {
	w.buf.Reset()
	for _, f := range frames {
		w.add(f.name, f.data)
	}
	return w.flush()
}

// sseEvent is one frame for Events.
type sseEvent struct {
	name string
	data []byte
}

func (w *sseWriter) add(name string, data []byte) {
	if name != "" {
		w.buf.WriteString("event: " + name + "\n")
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		w.buf.WriteString("data: ")
		w.buf.Write(bytes.TrimSuffix(line, []byte("\r")))
		w.buf.WriteByte('\n')
	}
	w.buf.WriteByte('\n')
}

func (w *sseWriter) flush() error {
	if _, err := w.res.Write(w.buf.Bytes()); err != nil {
		return err
	}
	return http.NewResponseController(w.res.Writer).Flush()
}

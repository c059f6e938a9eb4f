package app

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Log lines are batched: a line reaches the log's writer within logFlushEvery, at once when
// logFlushAt bytes wait, and at once for a warning or an error (and everything before it).
// Under load the server writes one access line per request, and writing each one to stderr
// was a write system call per request in the server and a read in whatever reads the log: on
// a 2-core machine about 6 % of the server's CPU and one more process woken per request
// (docs/runtime.md). What a crash can lose is at most logFlushEvery of info lines.
const (
	logFlushEvery = 100 * time.Millisecond
	logFlushAt    = 64 << 10
)

// logWriter is the batching writer under the logger. Its zero value is not usable: see
// newLogWriter.
type logWriter struct {
	mu     sync.Mutex
	w      io.Writer
	buf    []byte
	timer  *time.Timer
	armed  bool
	closed bool
	err    error // the writer's first error, which Flush and Close report
}

func newLogWriter(w io.Writer) *logWriter {
	l := &logWriter{w: w}
	l.timer = time.AfterFunc(time.Hour, func() { _ = l.Flush() })
	l.timer.Stop()
	return l
}

// Write takes one line (slog's handlers write each record with one call).
func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.w.Write(p)
	}
	l.buf = append(l.buf, p...)
	if len(l.buf) >= logFlushAt {
		l.flushLocked()
	} else if !l.armed {
		l.armed = true
		l.timer.Reset(logFlushEvery)
	}
	return len(p), nil
}

// Flush writes what waits.
func (l *logWriter) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushLocked()
	return l.err
}

func (l *logWriter) flushLocked() {
	l.armed = false
	if len(l.buf) == 0 {
		return
	}
	if _, err := l.w.Write(l.buf); err != nil && l.err == nil {
		l.err = err
	}
	// Keep the buffer for the next lines unless one burst made it large.
	if cap(l.buf) > 4*logFlushAt {
		l.buf = nil
	} else {
		l.buf = l.buf[:0]
	}
}

// Close flushes, and lines written afterwards go straight to the writer.
func (l *logWriter) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timer.Stop()
	l.flushLocked()
	l.closed = true
	return l.err
}

// flushOnWarn is a slog.Handler that flushes its logWriter after every record at warning
// level or above, so that nothing that needs attention waits in the buffer.
type flushOnWarn struct {
	slog.Handler
	w *logWriter
}

func (h flushOnWarn) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		_ = h.w.Flush()
	}
	return err
}

func (h flushOnWarn) WithAttrs(as []slog.Attr) slog.Handler {
	return flushOnWarn{Handler: h.Handler.WithAttrs(as), w: h.w}
}

func (h flushOnWarn) WithGroup(name string) slog.Handler {
	return flushOnWarn{Handler: h.Handler.WithGroup(name), w: h.w}
}

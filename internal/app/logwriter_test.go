package app

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/config"
)

// lockedBuffer is the log's destination, read while the flusher writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
	n  int // writes
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuffer) writes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// eventually waits up to 5 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("not within 5 s: %s", what)
}

func TestLogWriter(t *testing.T) {
	cfg := config.Config{LogLevel: "info"}
	tests := []struct {
		name string
		run  func(t *testing.T, out *lockedBuffer, lw *logWriter, log *slog.Logger)
	}{
		{"info lines wait and are written together", func(t *testing.T, out *lockedBuffer, lw *logWriter, log *slog.Logger) {
			for i := range 50 {
				log.Info("http", "n", i)
			}
			if out.writes() > 1 {
				t.Fatalf("50 lines took %d writes", out.writes())
			}
			eventually(t, "the lines are written", func() bool { return strings.Count(out.String(), "msg=http") == 50 })
			if out.writes() != 1 {
				t.Fatalf("50 lines took %d writes, want 1", out.writes())
			}
		}},
		{"a warning is written at once with the lines before it", func(t *testing.T, out *lockedBuffer, lw *logWriter, log *slog.Logger) {
			log.Info("before")
			log.With("component", "x").Warn("attention")
			got := out.String()
			if !strings.Contains(got, "msg=before") || !strings.Contains(got, "msg=attention") || !strings.Contains(got, "component=x") {
				t.Fatalf("after a warning the log is %q", got)
			}
		}},
		{"an error is written at once", func(t *testing.T, out *lockedBuffer, lw *logWriter, log *slog.Logger) {
			log.WithGroup("g").Error("broken", "k", "v")
			if got := out.String(); !strings.Contains(got, "msg=broken") || !strings.Contains(got, "g.k=v") {
				t.Fatalf("after an error the log is %q", got)
			}
		}},
		{"a full buffer is written at once", func(t *testing.T, out *lockedBuffer, lw *logWriter, log *slog.Logger) {
			big := strings.Repeat("x", 1024)
			for range logFlushAt/1024 + 1 {
				log.Info("big", "v", big)
			}
			if out.writes() == 0 {
				t.Fatal("more than logFlushAt bytes wait")
			}
		}},
		{"close writes what waits and later lines go straight through", func(t *testing.T, out *lockedBuffer, lw *logWriter, log *slog.Logger) {
			log.Info("last before close")
			if err := lw.Close(); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), "last before close") {
				t.Fatal("close lost a line")
			}
			log.Info("after close")
			if !strings.Contains(out.String(), "after close") {
				t.Fatal("a line after close waits")
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := &lockedBuffer{}
			lw := newLogWriter(out)
			t.Cleanup(func() { _ = lw.Close() })
			tc.run(t, out, lw, newLogger(cfg, lw))
		})
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestLogWriterReportsItsError: a destination that fails does not fail the logging call
// (slog drops the line either way), and Flush and Close say why.
func TestLogWriterReportsItsError(t *testing.T) {
	lw := newLogWriter(failingWriter{})
	newLogger(config.Config{}, lw).Warn("x")
	if err := lw.Flush(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Flush = %v, want the writer's error", err)
	}
	if err := lw.Close(); err == nil {
		t.Fatal("Close hid the writer's error")
	}
}

package loadbench

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestConnAnswers(t *testing.T) {
	var conns atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/length", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("hello")) })
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		for i := range 3 {
			_, _ = w.Write([]byte(strings.Repeat(string(rune('a'+i)), 5000)))
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/close", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		_, _ = w.Write([]byte("bye"))
	})
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, r.ContentLength)
		_, _ = r.Body.Read(b)
		w.Header().Set("X-Method", r.Method)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(append([]byte(r.Header.Get("Authorization")+" "), b...))
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := NewConn(strings.TrimPrefix(srv.URL, "http://"), 5*time.Second)
	defer c.Close()

	tests := []struct {
		name, method, path string
		header             http.Header
		body               string
		status             int
		want               string
		conns              int32 // connections opened so far, after this request
	}{
		{"content-length", "GET", "/length", nil, "", 200, "hello", 1},
		{"chunked", "GET", "/chunked", nil, "", 200, strings.Repeat("a", 5000) + strings.Repeat("b", 5000) + strings.Repeat("c", 5000), 1},
		{"post-with-headers", "POST", "/echo", http.Header{"Authorization": {"Bearer x"}}, `{"a":1}`, 201, `Bearer x {"a":1}`, 1},
		{"no-content", "DELETE", "/empty", nil, "", 204, "", 1},
		{"head", "HEAD", "/length", nil, "", 200, "", 1},
		{"connection-close", "GET", "/close", nil, "", 200, "bye", 1},
		{"reconnects-after-close", "GET", "/length", nil, "", 200, "hello", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body []byte
			if tt.body != "" {
				body = []byte(tt.body)
			}
			st, got, err := c.Do(tt.method, tt.path, tt.header, body)
			if err != nil || st != tt.status || string(got) != tt.want {
				t.Fatalf("got %d %q %v, want %d %q", st, got, err, tt.status, tt.want)
			}
			if n := conns.Load(); n != tt.conns {
				t.Fatalf("%d connections opened, want %d (kept alive)", n, tt.conns)
			}
		})
	}
}

func TestConnTimeoutAndMalformed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				buf := make([]byte, 4096)
				n, _ := nc.Read(buf)
				if strings.Contains(string(buf[:n]), "/garbage") {
					_, _ = nc.Write([]byte("SSH-2.0-OpenSSH\r\n\r\n"))
					return
				}
				time.Sleep(2 * time.Second) // never answers in time
			}()
		}
	}()
	c := NewConn(ln.Addr().String(), 200*time.Millisecond)
	defer c.Close()
	_, _, err = c.Do("GET", "/slow", nil, nil)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !transportError(err) {
		t.Fatalf("want a timeout, got %v", err)
	}
	_, _, err = c.Do("GET", "/garbage", nil, nil)
	if !errors.Is(err, errMalformed) || !transportError(err) {
		t.Fatalf("want a malformed answer, got %v", err)
	}
}

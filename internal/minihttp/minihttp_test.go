package minihttp

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/testutil"
)

// TestAgainstNetHTTP sends requests to a net/http server and reads its answers in each of the
// forms it writes: a short body (Content-Length), a long streamed one (chunked), none (204),
// and an error status with its JSON.
func TestAgainstNetHTTP(t *testing.T) {
	big := strings.Repeat("0123456789", 100_000) // past net/http's buffer: chunked
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Got", fmt.Sprintf("%s %s %s len=%d auth=%s close=%v", r.Method, r.URL.Path, r.URL.RawQuery, len(body), r.Header.Get("Authorization"), r.Close))
		switch r.URL.Path {
		case "/echo":
			w.Write(body)
		case "/big":
			w.Header().Set("X-Many", "a")
			w.Header().Add("X-Many", "b")
			for i := 0; i < len(big); i += 4096 {
				w.Write([]byte(big[i:min(i+4096, len(big))]))
				w.(http.Flusher).Flush()
			}
		case "/none":
			w.WriteHeader(http.StatusNoContent)
		case "/err":
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"error":{"code":"forbidden","message":"no"}}`))
		}
	}))
	defer srv.Close()

	tests := []struct {
		name, method, path string
		body               []byte
		status             int
		want               string
		got                string
	}{
		{name: "post with a body", method: "POST", path: "/echo?preset=a&proxy=1", body: []byte(`{"a":1}`), status: 200, want: `{"a":1}`, got: "POST /echo preset=a&proxy=1 len=7 auth=Bearer t close=true"},
		{name: "post with an empty body", method: "POST", path: "/echo", body: []byte{}, status: 200, want: "", got: "POST /echo  len=0 auth=Bearer t close=true"},
		{name: "get", method: "GET", path: "/echo", status: 200, want: "", got: "GET /echo  len=0 auth=Bearer t close=true"},
		{name: "chunked answer", method: "GET", path: "/big", status: 200, want: big},
		{name: "no content", method: "DELETE", path: "/none", status: 204, want: ""},
		{name: "error status", method: "POST", path: "/err", body: []byte("{}"), status: 403, want: `{"error":{"code":"forbidden","message":"no"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := Client{}.Do(context.Background(), Request{Method: tc.method, URL: srv.URL + tc.path,
				Header: [][2]string{{"Authorization", "Bearer t"}, {"Content-Type", "application/json"}}, Body: tc.body})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != tc.status || string(resp.Body) != tc.want {
				t.Fatalf("status %d, body %.80q (%d bytes); want %d, %.80q", resp.Status, resp.Body, len(resp.Body), tc.status, tc.want)
			}
			if tc.got != "" && resp.Get("x-got") != tc.got {
				t.Fatalf("the server got %q, want %q", resp.Get("X-Got"), tc.got)
			}
			if tc.path == "/big" && strings.Join(resp.Header["x-many"], ",") != "a,b" {
				t.Fatalf("repeated header: %q", resp.Header["x-many"])
			}
		})
	}
}

// rawServer answers every connection with answer after reading the request's head, and hands
// what it read to got (when not nil).
func rawServer(t *testing.T, answer string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					l, err := br.ReadString('\n')
					if err != nil || l == "\r\n" {
						break
					}
				}
				io.WriteString(c, answer)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestAnswers reads answers net/http's server does not write but a server may: each must be
// read right or refused with a clear error, never read past what the answer says.
func TestAnswers(t *testing.T) {
	tests := []struct {
		name, answer string
		max          int64
		status       int
		body         string
		err          string
	}{
		{name: "content length", answer: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA", status: 200, body: "hello"},
		{name: "read to the end", answer: "HTTP/1.0 200 OK\r\n\r\nall of it", status: 200, body: "all of it"},
		{name: "bare LF lines", answer: "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", status: 200, body: "ok"},
		{name: "chunks with an extension and trailers", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n1\r\n!\r\n0\r\nX-T: 1\r\n\r\n", status: 200, body: "hello!"},
		{name: "100 continue first", answer: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", status: 200, body: "ok"},
		{name: "at the body limit", answer: "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfour", max: 4, status: 200, body: "four"},
		{name: "over the body limit", answer: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfive!", max: 4, err: "too large"},
		{name: "chunked over the limit", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n", max: 4, err: "too large"},
		{name: "to the end over the limit", answer: "HTTP/1.1 200 OK\r\n\r\nfive!", max: 4, err: "too large"},
		{name: "short body", answer: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", err: "read the body"},
		{name: "conflicting lengths", answer: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", err: "conflicting Content-Length"},
		{name: "negative length", answer: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", err: "invalid Content-Length"},
		{name: "bad chunk size", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", err: "invalid chunk size"},
		{name: "chunk without CRLF", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY0\r\n\r\n", err: "CRLF"},
		{name: "unknown transfer encoding", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", err: "unsupported Transfer-Encoding"},
		{name: "not HTTP", answer: "SSH-2.0-OpenSSH\r\n\r\n", err: "not an HTTP/1.x status line"},
		{name: "malformed header", answer: "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", err: "malformed header"},
		{name: "closed before the headers end", answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", err: "unexpected EOF"},
		{name: "nothing", answer: "", err: "status line"},
		{name: "endless header", answer: "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", maxHeaderBytes+1) + "\r\n\r\n", err: "too large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url := rawServer(t, tc.answer)
			resp, err := Client{MaxBody: tc.max}.Do(context.Background(), Request{Method: "GET", URL: url + "/"})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != tc.status || string(resp.Body) != tc.body {
				t.Fatalf("status %d body %q, want %d %q", resp.Status, resp.Body, tc.status, tc.body)
			}
		})
	}
}

// TestRequestsThatWouldSplit refuses header names and values, and methods, that would write a
// second request (or another header) into the connection, and the headers the client owns.
func TestRequestsThatWouldSplit(t *testing.T) {
	url := rawServer(t, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	tests := []struct {
		name   string
		method string
		header [][2]string
		want   string
	}{
		{name: "CRLF in a value", method: "GET", header: [][2]string{{"Authorization", "Bearer t\r\nX-Evil: 1"}}, want: "invalid header"},
		{name: "LF in a value", method: "GET", header: [][2]string{{"A", "b\nc"}}, want: "invalid header"},
		{name: "colon in a name", method: "GET", header: [][2]string{{"A:B", "c"}}, want: "invalid header"},
		{name: "empty name", method: "GET", header: [][2]string{{"", "c"}}, want: "invalid header"},
		{name: "own Content-Length", method: "GET", header: [][2]string{{"content-length", "0"}}, want: "set by the client"},
		{name: "own Host", method: "GET", header: [][2]string{{"Host", "elsewhere"}}, want: "set by the client"},
		{name: "method with a space", method: "GET /x HTTP/1.1\r\n", want: "invalid method"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Client{}.Do(context.Background(), Request{Method: tc.method, URL: url + "/", Header: tc.header})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestURLs refuses what is not an http(s) URL with a host, and https without a TLS dialer.
func TestURLs(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"ftp://example.com/", "not http or https"},
		{"http:///path", "has no host"},
		{"https://example.com/", ErrNoTLS.Error()},
		{"::", "missing protocol scheme"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			_, err := Client{}.Do(context.Background(), Request{URL: tc.url})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestHTTPSThroughDialTLS reaches an https server through the DialTLS the caller gives.
func TestHTTPSThroughDialTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("tls " + r.Host))
	}))
	defer srv.Close()
	var named string
	c := Client{DialTLS: func(ctx context.Context, network, addr, serverName string) (net.Conn, error) {
		named = serverName
		d := tls.Dialer{Config: srv.Client().Transport.(*http.Transport).TLSClientConfig}
		return d.DialContext(ctx, network, addr)
	}}
	resp, err := c.Do(context.Background(), Request{URL: srv.URL + "/"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(resp.Body), "tls 127.0.0.1:") || named != "127.0.0.1" {
		t.Fatalf("body %q, server name %q", resp.Body, named)
	}
}

// TestContextEndsTheExchange: a server that accepts and never answers is given up on at the
// context's deadline, and at its cancellation, with the context's error.
func TestContextEndsTheExchange(t *testing.T) {
	url := "http://" + testutil.SilentServer(t) + "/"

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Client{}.Do(ctx, Request{URL: url})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("deadline: err %v after %s", err, time.Since(start))
	}

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = Client{}.Do(ctx, Request{URL: url})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: err %v", err)
	}
}

// TestRefused is the error of a port nothing listens on.
func TestRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/"
	ln.Close()
	if _, err := (Client{}).Do(context.Background(), Request{URL: url}); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("err = %v", err)
	}
}

func ExampleClient_Do() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	resp, err := Client{}.Do(context.Background(), Request{Method: "POST", URL: srv.URL + "/v1/hooks/claude-code",
		Header: [][2]string{{"Content-Type", "application/json"}}, Body: []byte(`{}`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Status, resp.Get("content-type"), string(resp.Body))
	// Output: 200 application/json {"ok":true}
}

package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serveReal runs the server on a real listener (the malformed-request rewrite sits on the
// connections Serve accepts) and returns its address.
func serveReal(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := serverFor(t, Config{Token: testToken, Addr: ln.Addr().String()}, Deps{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, time.Second) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// rawRequest writes raw to a new connection and reads one answer.
func rawRequest(t *testing.T, addr, raw string) (*http.Response, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, body
}

// TestMalformedRequestsGetTheJSONErrorShape is the attack where a %zz path got a plain-text 400:
// every request net/http refuses before a handler runs now gets the JSON error shape, with the
// status net/http chose, while well-formed requests on the same listener are untouched.
func TestMalformedRequestsGetTheJSONErrorShape(t *testing.T) {
	addr := serveReal(t)
	host := "Host: " + addr + "\r\n"
	cases := []struct {
		name, raw, code, inMessage string
		status                     int
	}{
		{"bad escape in the path", "GET /v1/%zz HTTP/1.1\r\n" + host + "\r\n", "invalid", "%-escape", 400},
		{"bad escape in a route param", "GET /v1/gates/definitions/a%zzb HTTP/1.1\r\n" + host + "\r\n", "invalid", "%-escape", 400},
		{"truncated escape", "POST /v1/hints/% HTTP/1.1\r\n" + host + "Content-Length: 0\r\n\r\n", "invalid", "%-escape", 400},
		{"garbage request line", "NOT-HTTP\r\n\r\n", "invalid", "malformed request", 400},
		{"no Host", "GET /v1/info HTTP/1.1\r\n\r\n", "invalid", "missing required Host header", 400},
		{"malformed Host", "GET /v1/info HTTP/1.1\r\nHost: a b\r\n\r\n", "invalid", "malformed Host header", 400},
		{"headers over the limit", "GET /v1/info HTTP/1.1\r\n" + host + "X-Big: " + strings.Repeat("a", 1<<20+4096) + "\r\n\r\n", "too_large", "headers", 431},
		{"bad Content-Length", "POST /v1/hints HTTP/1.1\r\n" + host + "Content-Length: x1\r\n\r\n", "invalid", "malformed request", 400},
		{"two Content-Lengths", "POST /v1/hints HTTP/1.1\r\n" + host + "Content-Length: 1\r\nContent-Length: 2\r\n\r\nab", "invalid", "malformed request", 400},
		{"unknown transfer coding", "POST /v1/hints HTTP/1.1\r\n" + host + "Transfer-Encoding: zstd\r\n\r\n", "invalid", "transfer encoding", 501},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := rawRequest(t, addr, tc.raw)
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("%d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			var eb ErrorBody
			if err := json.Unmarshal(body, &eb); err != nil || eb.Error.Code != tc.code || !strings.Contains(eb.Error.Message, tc.inMessage) {
				t.Fatalf("body %s (%v), want code %s mentioning %q", body, err, tc.code, tc.inMessage)
			}
		})
	}
	// Well-formed requests through the same wrapped connections are untouched: a 401 from the
	// router, and an escaped path that is valid.
	resp, body := rawRequest(t, addr, "GET /v1/gates/definitions/a%20b HTTP/1.1\r\n"+host+"\r\n")
	if resp.StatusCode != 401 || !json.Valid(body) {
		t.Fatalf("valid escape: %d %s", resp.StatusCode, body)
	}
	resp, body = rawRequest(t, addr, "GET /healthz HTTP/1.1\r\n"+host+"\r\n")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"ok"`) {
		t.Fatalf("healthz: %d %s", resp.StatusCode, body)
	}
}

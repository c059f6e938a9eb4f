// Package minihttp is a small HTTP/1.1 client: one request per connection (Connection: close),
// a body of known length, and an answer read whole, sized by Content-Length, chunked, or read
// to the end. It exists for the command hook adapter pixie-hook, which a host starts for every
// hook event: net/http with crypto/tls and their dependencies doubled the program's start
// (docs/bench.md, "The command adapter"). It does not speak TLS itself: an https URL needs
// Client.DialTLS, which the pixie binary gives (crypto/tls) and pixie-hook does not.
package minihttp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultMaxBody is the largest answer body read when Client.MaxBody is 0.
const DefaultMaxBody = 64 << 20

// maxHeaderBytes caps the status line and the headers of an answer.
const maxHeaderBytes = 1 << 20

// ErrNoTLS is the error of an https URL on a Client without DialTLS.
var ErrNoTLS = errors.New("minihttp: https needs a TLS dialer")

// ErrTooLarge is the error of an answer whose body or headers are over the limit.
var ErrTooLarge = errors.New("minihttp: answer too large")

// Request is one request.
type Request struct {
	Method string
	// URL is http://host[:port]/path?query (https with Client.DialTLS).
	URL string
	// Header are the request's headers in order; Host, Content-Length and Connection are set
	// by Do.
	Header [][2]string
	Body   []byte
}

// Response is one answer, read whole.
type Response struct {
	Status int
	// Header holds the answer's headers under their lower-cased names.
	Header map[string][]string
	Body   []byte
}

// Get returns the first value of the header name (any case), or "".
func (r *Response) Get(name string) string {
	if v := r.Header[strings.ToLower(name)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Client sends requests. Its zero value works for http URLs.
type Client struct {
	// Dial opens the connection to host:port (nil: a net.Dialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// DialTLS opens a TLS connection to addr for an https URL, checking serverName (nil:
	// https URLs fail with ErrNoTLS).
	DialTLS func(ctx context.Context, network, addr, serverName string) (net.Conn, error)
	// MaxBody caps the answer's body (0: DefaultMaxBody).
	MaxBody int64
}

// Do sends req and reads its answer. ctx bounds the whole exchange: when it is done the
// connection is closed and Do returns ctx's error.
func (c Client) Do(ctx context.Context, req Request) (*Response, error) {
	u, err := url.Parse(req.URL)
	if err != nil {
		return nil, fmt.Errorf("minihttp: %w", err)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("minihttp: the URL %q has no host", req.URL)
	}
	addr, port := u.Host, "80"
	switch u.Scheme {
	case "http":
	case "https":
		port = "443"
	default:
		return nil, fmt.Errorf("minihttp: the URL %q is not http or https", req.URL)
	}
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	if u.Scheme == "https" && c.DialTLS == nil {
		return nil, ErrNoTLS
	}
	method := req.Method
	if method == "" {
		method = "GET"
	}
	if !validToken(method) {
		return nil, fmt.Errorf("minihttp: invalid method %q", method)
	}
	head, err := requestHead(method, u, req)
	if err != nil {
		return nil, err
	}

	var conn net.Conn
	if u.Scheme == "https" {
		conn, err = c.DialTLS(ctx, "tcp", addr, u.Hostname())
	} else {
		dial := c.Dial
		if dial == nil {
			var d net.Dialer
			dial = d.DialContext
		}
		conn, err = dial(ctx, "tcp", addr)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	defer conn.Close()
	// The context ends the exchange at any point: once it is done (deadline or cancellation),
	// the connection's reads and writes fail at once, and Do returns the context's error. (Not
	// the deadline set on the connection: its timeout could fire before the context's own
	// timer, and the caller would not learn that its time ran out.)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	resp, err := exchange(conn, head, req.Body, method, c.maxBody())
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return resp, nil
}

func (c Client) maxBody() int64 {
	if c.MaxBody > 0 {
		return c.MaxBody
	}
	return DefaultMaxBody
}

// requestHead is the request line and headers, refusing header names and values that would
// split the request.
func requestHead(method string, u *url.URL, req Request) ([]byte, error) {
	target := u.EscapedPath()
	if target == "" {
		target = "/"
	}
	if u.RawQuery != "" {
		target += "?" + u.RawQuery
	}
	var b strings.Builder
	b.WriteString(method + " " + target + " HTTP/1.1\r\nHost: " + u.Host + "\r\n")
	for _, h := range req.Header {
		if !validToken(h[0]) || strings.ContainsAny(h[1], "\r\n\x00") {
			return nil, fmt.Errorf("minihttp: invalid header %q", h[0])
		}
		switch strings.ToLower(h[0]) {
		case "host", "content-length", "connection", "transfer-encoding":
			return nil, fmt.Errorf("minihttp: the header %s is set by the client", h[0])
		}
		b.WriteString(h[0] + ": " + h[1] + "\r\n")
	}
	if req.Body != nil || method == "POST" || method == "PUT" || method == "PATCH" {
		b.WriteString("Content-Length: " + strconv.Itoa(len(req.Body)) + "\r\n")
	}
	b.WriteString("Connection: close\r\n\r\n")
	return []byte(b.String()), nil
}

// exchange writes the request and reads the answer on conn.
func exchange(conn net.Conn, head, body []byte, method string, maxBody int64) (*Response, error) {
	if _, err := conn.Write(append(head, body...)); err != nil {
		return nil, fmt.Errorf("minihttp: send: %w", err)
	}
	br := bufio.NewReaderSize(conn, 16<<10)
	for {
		resp, err := readHead(br)
		if err != nil {
			return nil, err
		}
		// 1xx answers (100 Continue, 103 Early Hints) come before the answer itself.
		if resp.Status >= 100 && resp.Status < 200 && resp.Status != 101 {
			continue
		}
		if err := readBody(br, resp, method, maxBody); err != nil {
			return nil, err
		}
		return resp, nil
	}
}

// readHead reads the status line and the headers.
func readHead(br *bufio.Reader) (*Response, error) {
	budget := maxHeaderBytes
	line, err := readLine(br, &budget)
	if err != nil {
		return nil, fmt.Errorf("minihttp: read the status line: %w", err)
	}
	proto, rest, _ := strings.Cut(line, " ")
	code, _, _ := strings.Cut(rest, " ")
	status, err := strconv.Atoi(code)
	if !strings.HasPrefix(proto, "HTTP/1.") || err != nil || len(code) != 3 || status < 100 {
		return nil, fmt.Errorf("minihttp: not an HTTP/1.x status line: %.80q", line)
	}
	resp := &Response{Status: status, Header: map[string][]string{}}
	for {
		line, err := readLine(br, &budget)
		if err != nil {
			return nil, fmt.Errorf("minihttp: read the headers: %w", err)
		}
		if line == "" {
			return resp, nil
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || !validToken(k) {
			return nil, fmt.Errorf("minihttp: malformed header line %.80q", line)
		}
		k = strings.ToLower(k)
		resp.Header[k] = append(resp.Header[k], strings.TrimSpace(v))
	}
}

// readLine reads one CRLF- (or LF-) ended line, spending its length from budget.
func readLine(br *bufio.Reader, budget *int) (string, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		*budget -= len(frag)
		if *budget < 0 {
			return "", ErrTooLarge
		}
		line = append(line, frag...)
		if err == nil {
			break
		}
		if err != bufio.ErrBufferFull {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return "", err
		}
	}
	return strings.TrimRight(string(line), "\r\n"), nil
}

// readBody reads the answer's body: none for HEAD, 1xx, 204 and 304; chunked; Content-Length
// bytes; or up to the end of the connection.
func readBody(br *bufio.Reader, resp *Response, method string, maxBody int64) error {
	if method == "HEAD" || resp.Status < 200 || resp.Status == 204 || resp.Status == 304 {
		return nil
	}
	if te := resp.Header["transfer-encoding"]; len(te) > 0 {
		if !strings.EqualFold(te[len(te)-1], "chunked") {
			return fmt.Errorf("minihttp: unsupported Transfer-Encoding %q", strings.Join(te, ", "))
		}
		return readChunked(br, resp, maxBody)
	}
	if cl := resp.Header["content-length"]; len(cl) > 0 {
		for _, v := range cl[1:] {
			if v != cl[0] {
				return fmt.Errorf("minihttp: conflicting Content-Length headers %q", strings.Join(cl, ", "))
			}
		}
		n, err := strconv.ParseInt(cl[0], 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("minihttp: invalid Content-Length %q", cl[0])
		}
		if n > maxBody {
			return fmt.Errorf("%w: a body of %d bytes (at most %d)", ErrTooLarge, n, maxBody)
		}
		resp.Body = make([]byte, n)
		if _, err := io.ReadFull(br, resp.Body); err != nil {
			return fmt.Errorf("minihttp: read the body: %w", err)
		}
		return nil
	}
	raw, err := io.ReadAll(io.LimitReader(br, maxBody+1))
	if err != nil {
		return fmt.Errorf("minihttp: read the body: %w", err)
	}
	if int64(len(raw)) > maxBody {
		return fmt.Errorf("%w: a body over %d bytes", ErrTooLarge, maxBody)
	}
	resp.Body = raw
	return nil
}

// readChunked reads a chunked body and skips its trailers.
func readChunked(br *bufio.Reader, resp *Response, maxBody int64) error {
	budget := maxHeaderBytes
	var body []byte
	for {
		line, err := readLine(br, &budget)
		if err != nil {
			return fmt.Errorf("minihttp: read a chunk size: %w", err)
		}
		size, _, _ := strings.Cut(line, ";")
		n, err := strconv.ParseInt(strings.TrimSpace(size), 16, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("minihttp: invalid chunk size %.40q", line)
		}
		if n == 0 {
			break
		}
		if int64(len(body))+n > maxBody {
			return fmt.Errorf("%w: a body over %d bytes", ErrTooLarge, maxBody)
		}
		start := len(body)
		body = append(body, make([]byte, n)...)
		if _, err := io.ReadFull(br, body[start:]); err != nil {
			return fmt.Errorf("minihttp: read a chunk: %w", err)
		}
		if crlf, err := readLine(br, &budget); err != nil || crlf != "" {
			return fmt.Errorf("minihttp: a chunk does not end with CRLF")
		}
	}
	for { // trailers, up to the blank line
		line, err := readLine(br, &budget)
		if err != nil {
			return fmt.Errorf("minihttp: read the trailers: %w", err)
		}
		if line == "" {
			break
		}
	}
	resp.Body = body
	return nil
}

// validToken reports whether s is an HTTP token (a method or a header name).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

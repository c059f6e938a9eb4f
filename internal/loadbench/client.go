package loadbench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Conn is an HTTP/1.1 client on one kept-alive TCP connection, as a load generator has it (wrk,
// hey): the calling goroutine writes a request and reads its answer itself, with no hand-off to
// other goroutines, no allocation per request once warm, and the answer's body read into a
// buffer the connection reuses. It reconnects when the server closed the connection (or after
// any error), and the reconnect is part of the request that needed it. A Conn is not safe for
// concurrent use.
type Conn struct {
	addr string
	// Timeout bounds each request (dial, write and read); zero means none.
	Timeout time.Duration

	// mu guards c's writes (by the owner) against Interrupt's reads (from another goroutine).
	mu          sync.Mutex
	c           net.Conn
	interrupted bool
	br          *bufio.Reader
	body        []byte
}

// NewConn returns a Conn to addr (host:port); it dials at the first request.
func NewConn(addr string, timeout time.Duration) *Conn {
	return &Conn{addr: addr, Timeout: timeout}
}

// Addr is the address the connection dials.
func (c *Conn) Addr() string { return c.addr }

// Close closes the TCP connection (a later request dials again).
func (c *Conn) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c != nil {
		_ = c.c.Close()
		c.c = nil
	}
}

// Interrupt closes the connection from another goroutine: a request in flight fails at once,
// and so does every later one. It is the one method safe to call concurrently.
func (c *Conn) Interrupt() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.interrupted = true
	if c.c != nil {
		_ = c.c.Close()
	}
}

var errInterrupted = errors.New("connection interrupted")

// Render returns the bytes of an HTTP/1.1 request for this connection's server: the request
// line, Host, the headers (in name order), Content-Length when there is a body or the method
// is not GET or HEAD, and the body.
func (c *Conn) Render(method, path string, header http.Header, body []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, path, c.addr)
	names := make([]string, 0, len(header))
	for k := range header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range header[k] {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	if len(body) > 0 || (method != http.MethodGet && method != http.MethodHead) {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

// Do sends one request and returns the answer's status and body. The body is valid until the
// next request on this connection.
func (c *Conn) Do(method, path string, header http.Header, body []byte) (int, []byte, error) {
	return c.Send(c.Render(method, path, header, body), method == http.MethodHead)
}

// Send writes raw, a complete request from Render, and reads the answer (head: the answer to a
// HEAD, which has no body). The body is valid until the next request on this connection.
func (c *Conn) Send(raw []byte, head bool) (int, []byte, error) {
	status, body, keep, err := c.send(raw, head)
	if err != nil || !keep {
		c.Close()
	}
	return status, body, err
}

func (c *Conn) send(raw []byte, head bool) (status int, body []byte, keep bool, err error) {
	if c.c == nil {
		d := net.Dialer{Timeout: c.Timeout}
		nc, err := d.Dial("tcp", c.addr)
		if err != nil {
			return 0, nil, false, err
		}
		c.mu.Lock()
		if c.interrupted {
			c.mu.Unlock()
			_ = nc.Close()
			return 0, nil, false, errInterrupted
		}
		c.c = nc
		c.mu.Unlock()
		if c.br == nil {
			c.br = bufio.NewReaderSize(nc, 16<<10)
		} else {
			c.br.Reset(nc)
		}
	}
	if c.Timeout > 0 {
		if err := c.c.SetDeadline(time.Now().Add(c.Timeout)); err != nil {
			return 0, nil, false, err
		}
	}
	if _, err := c.c.Write(raw); err != nil {
		return 0, nil, false, err
	}
	return c.readResponse(head)
}

var (
	errMalformed = errors.New("malformed HTTP answer")
	crlf         = []byte("\r\n")
)

// readResponse reads one answer: the status line, the headers it needs (Content-Length,
// Transfer-Encoding: chunked, Connection: close), and the body into c.body.
func (c *Conn) readResponse(head bool) (status int, body []byte, keep bool, err error) {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, nil, false, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, nil, false, fmt.Errorf("%w: status line %q", errMalformed, line)
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, false, fmt.Errorf("%w: status line %q", errMalformed, line)
	}
	keep = line[7] == '1' // HTTP/1.1 keeps the connection unless told otherwise
	length, chunked := -1, false
	for {
		line, err = c.br.ReadSlice('\n')
		if err != nil {
			return 0, nil, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, nil, false, fmt.Errorf("%w: header %q", errMalformed, line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case asciiEqualFold(name, "content-length"):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, nil, false, fmt.Errorf("%w: Content-Length %q", errMalformed, value)
			}
		case asciiEqualFold(name, "transfer-encoding"):
			chunked = asciiEqualFold(value, "chunked")
		case asciiEqualFold(name, "connection"):
			if asciiEqualFold(value, "close") {
				keep = false
			} else if asciiEqualFold(value, "keep-alive") {
				keep = true
			}
		}
	}
	c.body = c.body[:0]
	switch {
	case head || status == http.StatusNoContent || status == http.StatusNotModified || status/100 == 1:
	case chunked:
		if err := c.readChunked(); err != nil {
			return 0, nil, false, err
		}
	case length >= 0:
		if err := c.readN(length); err != nil {
			return 0, nil, false, err
		}
	default: // the body runs to the end of the connection
		b, err := io.ReadAll(c.br)
		if err != nil {
			return 0, nil, false, err
		}
		c.body = append(c.body, b...)
		keep = false
	}
	return status, c.body, keep, nil
}

// readN appends the next n bytes to c.body.
func (c *Conn) readN(n int) error {
	start := len(c.body)
	c.body = append(c.body, make([]byte, n)...)
	_, err := io.ReadFull(c.br, c.body[start:])
	return err
}

// readChunked appends a chunked body to c.body and reads the trailers.
func (c *Conn) readChunked() error {
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		n, err := strconv.ParseUint(string(bytes.TrimSpace(line)), 16, 31)
		if err != nil {
			return fmt.Errorf("%w: chunk size %q", errMalformed, line)
		}
		if n == 0 {
			for { // trailers, up to the empty line
				line, err := c.br.ReadSlice('\n')
				if err != nil {
					return err
				}
				if len(bytes.TrimRight(line, "\r\n")) == 0 {
					return nil
				}
			}
		}
		if err := c.readN(int(n)); err != nil {
			return err
		}
		var end [2]byte
		if _, err := io.ReadFull(c.br, end[:]); err != nil {
			return err
		}
		if !bytes.Equal(end[:], crlf) {
			return fmt.Errorf("%w: chunk not followed by CRLF", errMalformed)
		}
	}
}

// asciiEqualFold reports whether b equals the lower-case ASCII s, ignoring case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

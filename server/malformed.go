package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/pixie-dev/pixie/internal/errs"
)

// Requests that net/http refuses before any handler runs (a request line or URL that does not
// parse, such as a %zz path; a missing or malformed Host; headers over the limit; an unknown
// transfer coding) are answered by net/http itself, in plain text, straight onto the
// connection. jsonErrorConn recognises those answers as they are written and rewrites them
// into the server's JSON error shape, so that every error a client can get is
// {"error":{"code","message"}}.

// netHTTPErrorHeaders is what net/http writes between the status line and the body of its own
// error answers. No answer of a handler looks like this: net/http writes handler headers
// sorted, with a Date, so Content-Type never comes right after the status line, before
// Connection.
const netHTTPErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// jsonErrorListener wraps accepted connections in jsonErrorConn.
type jsonErrorListener struct{ net.Listener }

func (l jsonErrorListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &jsonErrorConn{Conn: c}, nil
}

// jsonErrorConn rewrites net/http's plain-text error answers (see above).
type jsonErrorConn struct{ net.Conn }

func (c *jsonErrorConn) Write(p []byte) (int, error) {
	if out, ok := rewriteNetHTTPError(p); ok {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// CloseWrite half-closes like the TCP connection it wraps (net/http uses it to let a client read
// an error answer before the connection goes).
func (c *jsonErrorConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ReadFrom keeps the wrapped connection's fast path for bodies (sendfile).
func (c *jsonErrorConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// rewriteNetHTTPError returns the JSON form of one of net/http's own error answers, or false
// when p is anything else.
func rewriteNetHTTPError(p []byte) ([]byte, bool) {
	if len(p) > 4096 || !bytes.HasPrefix(p, []byte("HTTP/1.1 ")) {
		return nil, false
	}
	eol := bytes.Index(p, []byte("\r\n"))
	if eol < 0 || !bytes.HasPrefix(p[eol:], []byte(netHTTPErrorHeaders)) {
		return nil, false
	}
	line := string(p[len("HTTP/1.1 "):eol])
	status, err := strconv.Atoi(line[:min(3, len(line))])
	if err != nil || status < 400 {
		return nil, false
	}
	body := string(p[eol+len(netHTTPErrorHeaders):])
	code, ok := codeOfStatus[status]
	if !ok {
		code = errs.Invalid
		if status == http.StatusRequestHeaderFieldsTooLarge {
			code = errs.TooLarge
		}
	}
	msg := "malformed request: " + strings.TrimSpace(strings.TrimPrefix(body, strconv.Itoa(status)+" "))
	switch status {
	case http.StatusBadRequest:
		if body == "400 Bad Request" {
			msg = "malformed request: the request line, its URL or a header line does not parse (for example a bad %-escape such as %zz)"
		} else if _, detail, ok := strings.Cut(body, ": "); ok {
			msg = "malformed request: " + detail
		}
	case http.StatusRequestHeaderFieldsTooLarge:
		msg = "request headers are over the size limit"
	case http.StatusNotImplemented:
		msg = "unsupported transfer encoding"
	}
	b, _ := json.Marshal(ErrorBody{ErrorDetail{Code: string(code), Message: msg}})
	b = append(b, '\n')
	var out bytes.Buffer
	out.WriteString("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\n")
	out.WriteString("Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(b)) + "\r\nConnection: close\r\n\r\n")
	out.Write(b)
	return out.Bytes(), true
}

// Package cliclient is the pixie binary's HTTP client for the Pixie server: the server and the
// token resolved by internal/serverref (which the command hook adapter shares), JSON requests
// over net/http, and answers turned into errors that say where the URL and the token came from.
package cliclient

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/serverref"
)

// Flags are the connection flags of every CLI verb that talks to the server
// (internal/serverref).
type Flags = serverref.Flags

// DefineFlags defines --url, --token and --home on fs, into url, token and home.
func DefineFlags(fs *flag.FlagSet, url, token, home *string) {
	serverref.DefineFlags(fs, url, token, home)
}

// Client talks to one server with one token, and remembers where both came from, so that a
// refusal can say so (serverref.Ref: Base, URLFrom, Token, TokenFrom, Version).
type Client struct {
	serverref.Ref
	HTTP *http.Client
}

// New resolves the server URL and the token: flags, then environment, then the home.
func New(f Flags, version string) (*Client, error) {
	r, err := serverref.Resolve(f, version, func(home string) (string, error) {
		cfg, err := config.Load(home, os.Getenv, os.Environ(), nil)
		return cfg.Addr, err
	})
	if err != nil {
		return nil, err
	}
	return &Client{Ref: r, HTTP: &http.Client{Timeout: 5 * time.Minute}}, nil
}

// Do sends a JSON request and decodes a JSON answer into out (if non-nil). A non-2xx answer
// becomes an *errs.Error with the server's code and message.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.Send(req, out)
}

// HeaderReader is an answer destination that also reads the answer's headers.
type HeaderReader interface{ ReadHeader(http.Header) }

// Send sends a prepared request with the token and decodes the answer (an io.Writer gets the
// raw body; a HeaderReader also gets the headers).
func (c *Client) Send(req *http.Request, out any) error {
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return c.Unreachable(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return c.AnswerError(resp.StatusCode, raw)
	}
	if h, ok := out.(HeaderReader); ok {
		h.ReadHeader(resp.Header)
	}
	if out == nil {
		return nil
	}
	if w, ok := out.(io.Writer); ok {
		_, err := w.Write(raw)
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}

// Package cliclient is the CLI's HTTP client for the Pixie server: where it reaches the server
// and with which token (flags, then the environment, then the home), and answers turned into
// errors that say where the URL and the token came from. The pixie binary's verbs and the
// command hook adapter (internal/hookcmd, which also runs in the small pixie-hook program) share
// it, so both resolve and report alike.
package cliclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/errs"
)

// Flags are the connection flags of every CLI verb that talks to the server.
type Flags struct {
	// URL is --url; empty means $PIXIE_SERVER_URL, else http://<addr> from the home's
	// configuration.
	URL string
	// Token is --token; empty means $PIXIE_ADMIN_TOKEN, then TokenEnv, then the home's token
	// file.
	Token string
	// Home is --home; empty means $PIXIE_HOME, else ~/.pixie.
	Home string
	// TokenEnv are extra environment variables tried for the token after $PIXIE_ADMIN_TOKEN
	// (the hook adapter and the MCP server also take $PIXIE_TOKEN).
	TokenEnv []string
}

// DefineFlags defines --url, --token and --home on fs, into url, token and home.
func DefineFlags(fs *flag.FlagSet, url, token, home *string) {
	fs.StringVar(url, "url", "", "server URL (default $PIXIE_SERVER_URL, else http://<addr> from the home's config)")
	fs.StringVar(token, "token", "", "admin token (default $PIXIE_ADMIN_TOKEN, else the home's token file)")
	fs.StringVar(home, "home", "", "Pixie home (default $PIXIE_HOME, else ~/.pixie)")
}

// Client talks to one server with one token, and remembers where both came from, so that a
// refusal can say so.
type Client struct {
	Base      string // the server's base URL, without a trailing /
	URLFrom   string // "--url", "$PIXIE_SERVER_URL", "addr in /home/pixie.yaml", …
	Token     string
	TokenFrom string // "--token", "$PIXIE_ADMIN_TOKEN", "/home/.pixie/token"
	HTTP      *http.Client
	// Version is the CLI's version, named when a 404 suggests an older server.
	Version string
}

// New resolves the server URL and the token: flags, then environment, then the home.
func New(f Flags, version string) (*Client, error) {
	home, err := config.ResolveHome(f.Home, os.Getenv)
	if err != nil {
		return nil, err
	}
	c := &Client{HTTP: &http.Client{Timeout: 5 * time.Minute}, Version: version}
	c.Base, c.URLFrom = f.URL, "--url"
	if c.Base == "" {
		c.Base, c.URLFrom = os.Getenv("PIXIE_SERVER_URL"), "$PIXIE_SERVER_URL"
	}
	if c.Base == "" {
		cfg, err := config.Load(home, os.Getenv, os.Environ(), nil)
		if err != nil {
			return nil, fmt.Errorf("cannot tell the server's address from the configuration (pass --url): %w", err)
		}
		c.Base = "http://" + cfg.Addr
		c.URLFrom = "the default address"
		if os.Getenv("PIXIE_ADDR") != "" {
			c.URLFrom = "$PIXIE_ADDR"
		} else if _, err := os.Stat(filepath.Join(home, config.FileName)); err == nil {
			c.URLFrom = "addr in " + filepath.Join(home, config.FileName)
		}
	}
	c.Base = strings.TrimRight(c.Base, "/")
	if err := CheckServerURL(c.Base, c.URLFrom); err != nil {
		return nil, err
	}
	c.Token, c.TokenFrom = f.Token, "--token"
	for _, name := range append([]string{"PIXIE_ADMIN_TOKEN"}, f.TokenEnv...) {
		if c.Token == "" {
			c.Token, c.TokenFrom = os.Getenv(name), "$"+name
		}
	}
	if c.Token == "" {
		p := filepath.Join(home, config.TokenFile)
		raw, err := os.ReadFile(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, errs.New(errs.Unauthorized, "no admin token: %s does not exist (`pixie serve` writes it on its first start with this home); or pass --token, or set PIXIE_ADMIN_TOKEN", p)
		case err != nil:
			return nil, errs.Wrap(errs.Unauthorized, err, "no admin token: cannot read %s: %v; pass --token or set PIXIE_ADMIN_TOKEN", p, err)
		}
		c.Token, c.TokenFrom = strings.TrimSpace(string(raw)), p
		if c.Token == "" {
			return nil, errs.New(errs.Unauthorized, "no admin token: %s is empty", p)
		}
	}
	return c, nil
}

// CheckServerURL refuses a server URL that is not http(s)://host[:port][/path], with a message
// that says what to write instead.
func CheckServerURL(raw, from string) error {
	u, err := url.Parse(raw)
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		return nil
	}
	if !strings.Contains(raw, "://") {
		return errs.New(errs.Invalid, "the server URL %q (from %s) has no scheme: write http://%s", raw, from, raw)
	}
	return errs.New(errs.Invalid, "the server URL %q (from %s) is not an http:// or https:// URL", raw, from)
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

// Unreachable is the error of a request that got no answer: it names the URL and where it
// came from.
func (c *Client) Unreachable(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return errs.Wrap(errs.Unavailable, err, "cannot reach the Pixie server at %s (URL from %s; is `pixie serve` running?)", c.Base, c.URLFrom)
}

// AnswerError turns a non-2xx answer into an *errs.Error. A 401 or 403 names the URL and where
// the token came from.
func (c *Client) AnswerError(status int, raw []byte) error {
	var eb struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Details any    `json:"details"`
		} `json:"error"`
	}
	var e *errs.Error
	if json.Unmarshal(raw, &eb) == nil && eb.Error.Code != "" {
		e = errs.New(errs.Code(eb.Error.Code), "HTTP %d: %s", status, eb.Error.Message)
		e = e.WithDetails(eb.Error.Details)
	} else {
		code := errs.Upstream
		if status == http.StatusUnauthorized {
			code = errs.Unauthorized
		}
		e = errs.New(code, "HTTP %d", status)
		if status == http.StatusNotFound {
			e.Message += fmt.Sprintf(" from %s: is that a Pixie server, and as new as this CLI (%s)?", c.Base, c.Version)
		}
	}
	switch status {
	case http.StatusUnauthorized:
		e.Message += fmt.Sprintf(" (server %s, URL from %s; the token came from %s: is it this server's token?)", c.Base, c.URLFrom, c.TokenFrom)
	case http.StatusForbidden:
		e.Message += fmt.Sprintf(" (server %s, URL from %s; token from %s)", c.Base, c.URLFrom, c.TokenFrom)
	}
	return e
}

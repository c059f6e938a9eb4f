package main

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

// clientFlags are the connection flags of every CLI verb that talks to the server.
type clientFlags struct {
	url, token, home string
	// tokenEnv are extra environment variables tried for the token after $PIXIE_ADMIN_TOKEN
	// (the hook adapter and the MCP server also take $PIXIE_TOKEN).
	tokenEnv []string
}

func (f *clientFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "url", "", "server URL (default $PIXIE_SERVER_URL, else http://<addr> from the home's config)")
	fs.StringVar(&f.token, "token", "", "admin token (default $PIXIE_ADMIN_TOKEN, else the home's token file)")
	fs.StringVar(&f.home, "home", "", "Pixie home (default $PIXIE_HOME, else ~/.pixie)")
}

// apiClient is the CLI's HTTP client for the Pixie server. It remembers where its URL and its
// token came from, so that a refusal can say so.
type apiClient struct {
	base      string
	urlFrom   string // "--url", "$PIXIE_SERVER_URL", "addr in /home/pixie.yaml", …
	token     string
	tokenFrom string // "--token", "$PIXIE_ADMIN_TOKEN", "/home/.pixie/token"
	http      *http.Client

	// lazy: resolved by ready at the first request (withClient).
	lazy *clientFlags
	err  error
}

// lazyClient is a client whose URL and token are resolved at its first request.
func lazyClient(f clientFlags) *apiClient { return &apiClient{lazy: &f} }

// ready resolves a lazy client (once) and reports why it cannot be used.
func (c *apiClient) ready() error {
	if c.lazy != nil {
		f := *c.lazy
		c.lazy = nil
		r, err := newClient(f)
		if err != nil {
			c.err = err
		} else {
			*c = *r
		}
	}
	return c.err
}

// newClient resolves the server URL and admin token: flags, then environment, then the home.
func newClient(f clientFlags) (*apiClient, error) {
	home, err := config.ResolveHome(f.home, os.Getenv)
	if err != nil {
		return nil, err
	}
	c := &apiClient{http: &http.Client{Timeout: 5 * time.Minute}}
	c.base, c.urlFrom = f.url, "--url"
	if c.base == "" {
		c.base, c.urlFrom = os.Getenv("PIXIE_SERVER_URL"), "$PIXIE_SERVER_URL"
	}
	if c.base == "" {
		cfg, err := config.Load(home, os.Getenv, os.Environ(), nil)
		if err != nil {
			return nil, fmt.Errorf("cannot tell the server's address from the configuration (pass --url): %w", err)
		}
		c.base = "http://" + cfg.Addr
		c.urlFrom = "the default address"
		if os.Getenv("PIXIE_ADDR") != "" {
			c.urlFrom = "$PIXIE_ADDR"
		} else if _, err := os.Stat(filepath.Join(home, config.FileName)); err == nil {
			c.urlFrom = "addr in " + filepath.Join(home, config.FileName)
		}
	}
	c.base = strings.TrimRight(c.base, "/")
	if err := checkServerURL(c.base, c.urlFrom); err != nil {
		return nil, err
	}
	c.token, c.tokenFrom = f.token, "--token"
	for _, name := range append([]string{"PIXIE_ADMIN_TOKEN"}, f.tokenEnv...) {
		if c.token == "" {
			c.token, c.tokenFrom = os.Getenv(name), "$"+name
		}
	}
	if c.token == "" {
		p := filepath.Join(home, tokenFile)
		raw, err := os.ReadFile(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, errs.New(errs.Unauthorized, "no admin token: %s does not exist (`pixie serve` writes it on its first start with this home); or pass --token, or set PIXIE_ADMIN_TOKEN", p)
		case err != nil:
			return nil, errs.Wrap(errs.Unauthorized, err, "no admin token: cannot read %s: %v; pass --token or set PIXIE_ADMIN_TOKEN", p, err)
		}
		c.token, c.tokenFrom = strings.TrimSpace(string(raw)), p
		if c.token == "" {
			return nil, errs.New(errs.Unauthorized, "no admin token: %s is empty", p)
		}
	}
	return c, nil
}

// checkServerURL refuses a server URL that is not http(s)://host[:port][/path], with a message
// that says what to write instead.
func checkServerURL(raw, from string) error {
	u, err := url.Parse(raw)
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		return nil
	}
	if !strings.Contains(raw, "://") {
		return errs.New(errs.Invalid, "the server URL %q (from %s) has no scheme: write http://%s", raw, from, raw)
	}
	return errs.New(errs.Invalid, "the server URL %q (from %s) is not an http:// or https:// URL", raw, from)
}

// do sends a JSON request and decodes a JSON answer into out (if non-nil). A non-2xx answer
// becomes an *errs.Error with the server's code and message.
func (c *apiClient) do(ctx context.Context, method, path string, in, out any) error {
	if err := c.ready(); err != nil {
		return err
	}
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.send(req, out)
}

// headerReader is an answer destination that also reads the answer's headers.
type headerReader interface{ readHeader(http.Header) }

// send sends a prepared request with the token and decodes the answer (an io.Writer gets the
// raw body; a headerReader also gets the headers).
func (c *apiClient) send(req *http.Request, out any) error {
	if err := c.ready(); err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return c.unreachable(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return c.answerError(resp.StatusCode, raw)
	}
	if h, ok := out.(headerReader); ok {
		h.readHeader(resp.Header)
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

// unreachable is the error of a request that got no answer: it names the URL and where it
// came from.
func (c *apiClient) unreachable(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return errs.Wrap(errs.Unavailable, err, "cannot reach the Pixie server at %s (URL from %s; is `pixie serve` running?)", c.base, c.urlFrom)
}

// answerError turns a non-2xx answer into an *errs.Error. A 401 or 403 names the URL and where
// the token came from.
func (c *apiClient) answerError(status int, raw []byte) error {
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
			e.Message += fmt.Sprintf(" from %s: is that a Pixie server, and as new as this CLI (%s)?", c.base, version)
		}
	}
	switch status {
	case http.StatusUnauthorized:
		e.Message += fmt.Sprintf(" (server %s, URL from %s; the token came from %s: is it this server's token?)", c.base, c.urlFrom, c.tokenFrom)
	case http.StatusForbidden:
		e.Message += fmt.Sprintf(" (server %s, URL from %s; token from %s)", c.base, c.urlFrom, c.tokenFrom)
	}
	return e
}

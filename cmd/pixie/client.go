package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/errs"
)

// clientFlags are the connection flags every CLI verb that talks to the server accepts.
type clientFlags struct {
	url, token, home string
}

func (f *clientFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "url", "", "server URL (default $PIXIE_SERVER_URL, else http://<addr> from the home's config)")
	fs.StringVar(&f.token, "token", "", "admin token (default $PIXIE_ADMIN_TOKEN, else the home's token file)")
	fs.StringVar(&f.home, "home", "", "Pixie home (default $PIXIE_HOME, else ~/.pixie)")
}

// apiClient is the CLI's HTTP client for the Pixie server.
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

// newClient resolves the server URL and admin token: flags, then environment, then the home.
func newClient(f clientFlags) (*apiClient, error) {
	home, err := config.ResolveHome(f.home, os.Getenv)
	if err != nil {
		return nil, err
	}
	base := f.url
	if base == "" {
		base = os.Getenv("PIXIE_SERVER_URL")
	}
	if base == "" {
		addr := "127.0.0.1:7777"
		if c, err := config.Load(home, os.Getenv, os.Environ(), nil); err == nil {
			addr = c.Addr
		}
		base = "http://" + addr
	}
	tok := f.token
	if tok == "" {
		tok = os.Getenv("PIXIE_ADMIN_TOKEN")
	}
	if tok == "" {
		raw, err := os.ReadFile(filepath.Join(home, tokenFile))
		if err != nil {
			return nil, fmt.Errorf("no admin token: pass --token, set PIXIE_ADMIN_TOKEN, or run on the server's machine (%s): %w", filepath.Join(home, tokenFile), err)
		}
		tok = strings.TrimSpace(string(raw))
	}
	return &apiClient{base: strings.TrimRight(base, "/"), token: tok, http: &http.Client{Timeout: 5 * time.Minute}}, nil
}

// do sends a JSON request and decodes a JSON answer into out (if non-nil). A non-2xx answer
// becomes an *errs.Error with the server's code and message.
func (c *apiClient) do(ctx context.Context, method, path string, in, out any) error {
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

// send sends a prepared request with the token and decodes the answer.
func (c *apiClient) send(req *http.Request, out any) error {
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "cannot reach the Pixie server at %s (is `pixie serve` running?)", c.base)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var eb struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
				Details any    `json:"details"`
			} `json:"error"`
		}
		if json.Unmarshal(raw, &eb) == nil && eb.Error.Code != "" {
			e := errs.New(errs.Code(eb.Error.Code), "HTTP %d: %s", resp.StatusCode, eb.Error.Message)
			return e.WithDetails(eb.Error.Details)
		}
		return errs.New(errs.Upstream, "HTTP %d", resp.StatusCode)
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

// fail prints an error the CLI way and returns the exit code 1. Details (such as every
// problem of a refused save) are printed one per line.
func fail(err error) int {
	fmt.Fprintln(os.Stderr, "pixie:", err)
	var e *errs.Error
	if errors.As(err, &e) && e.Details != nil {
		if raw, err := json.MarshalIndent(e.Details, "  ", "  "); err == nil {
			fmt.Fprintln(os.Stderr, " ", string(raw))
		}
	}
	return 1
}

package main

import (
	"context"
	"flag"
	"net/http"

	"github.com/pixie-dev/pixie/internal/cliclient"
)

// clientFlags are the connection flags of every CLI verb that talks to the server.
type clientFlags struct {
	url, token, home string
	// tokenEnv are extra environment variables tried for the token after $PIXIE_ADMIN_TOKEN
	// (the hook adapter and the MCP server also take $PIXIE_TOKEN).
	tokenEnv []string
}

func (f *clientFlags) add(fs *flag.FlagSet) { cliclient.DefineFlags(fs, &f.url, &f.token, &f.home) }

func (f clientFlags) flags() cliclient.Flags {
	return cliclient.Flags{URL: f.url, Token: f.token, Home: f.home, TokenEnv: f.tokenEnv}
}

// apiClient is the CLI's HTTP client for the Pixie server (internal/cliclient), resolved at
// once (newClient) or at its first request (lazyClient).
type apiClient struct {
	*cliclient.Client

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
	c, err := cliclient.New(f.flags(), version)
	if err != nil {
		return nil, err
	}
	return &apiClient{Client: c}, nil
}

// do sends a JSON request and decodes a JSON answer into out (if non-nil). A non-2xx answer
// becomes an *errs.Error with the server's code and message.
func (c *apiClient) do(ctx context.Context, method, path string, in, out any) error {
	if err := c.ready(); err != nil {
		return err
	}
	return c.Do(ctx, method, path, in, out)
}

// send sends a prepared request with the token and decodes the answer (an io.Writer gets the
// raw body; a cliclient.HeaderReader also gets the headers).
func (c *apiClient) send(req *http.Request, out any) error {
	if err := c.ready(); err != nil {
		return err
	}
	return c.Send(req, out)
}

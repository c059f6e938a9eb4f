// Package serverref owns where a CLI reaches the Pixie server and with which token (flags,
// then the environment, then the home), and the errors that say where both came from when the
// server refuses or cannot be reached. The pixie binary's verbs (internal/cliclient, which adds
// the net/http client) and the command hook adapter (internal/hookcmd, also run by the small
// pixie-hook program) share it, so both resolve and report alike. It imports only the standard
// library's small packages: pixie-hook starts for every hook event.
package serverref

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/pixiehome"
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

// Ref is one server and one token, with where both came from, so that a refusal can say so.
type Ref struct {
	Base      string // the server's base URL, without a trailing /
	URLFrom   string // "--url", "$PIXIE_SERVER_URL", "addr in /home/pixie.yaml", …
	Token     string
	TokenFrom string // "--token", "$PIXIE_ADMIN_TOKEN", "/home/.pixie/token"
	// Version is the CLI's version, named when a 404 suggests an older server.
	Version string
}

// AddrFunc returns the server's listen address from the configuration of home (config.Load's
// addr), asked only when neither --url nor $PIXIE_SERVER_URL gives the URL.
type AddrFunc func(home string) (string, error)

// URLFlagOrEnv is the server URL that --url or $PIXIE_SERVER_URL gives ("" when neither does).
func URLFlagOrEnv(f Flags) string {
	if f.URL != "" {
		return f.URL
	}
	return os.Getenv("PIXIE_SERVER_URL")
}

// Resolve resolves the server URL and the token: flags, then environment, then the home (addr
// gives the configured address).
func Resolve(f Flags, version string, addr AddrFunc) (Ref, error) {
	home, err := pixiehome.Resolve(f.Home, os.Getenv)
	if err != nil {
		return Ref{}, err
	}
	r := Ref{Version: version}
	r.Base, r.URLFrom = f.URL, "--url"
	if r.Base == "" {
		r.Base, r.URLFrom = os.Getenv("PIXIE_SERVER_URL"), "$PIXIE_SERVER_URL"
	}
	if r.Base == "" {
		a, err := addr(home)
		if err != nil {
			return Ref{}, fmt.Errorf("cannot tell the server's address from the configuration (pass --url): %w", err)
		}
		r.Base = "http://" + a
		r.URLFrom = "the default address"
		if os.Getenv("PIXIE_ADDR") != "" {
			r.URLFrom = "$PIXIE_ADDR"
		} else if _, err := os.Stat(filepath.Join(home, pixiehome.ConfigFile)); err == nil {
			r.URLFrom = "addr in " + filepath.Join(home, pixiehome.ConfigFile)
		}
	}
	r.Base = strings.TrimRight(r.Base, "/")
	if err := CheckServerURL(r.Base, r.URLFrom); err != nil {
		return Ref{}, err
	}
	r.Token, r.TokenFrom = f.Token, "--token"
	for _, name := range append([]string{"PIXIE_ADMIN_TOKEN"}, f.TokenEnv...) {
		if r.Token == "" {
			r.Token, r.TokenFrom = os.Getenv(name), "$"+name
		}
	}
	if r.Token == "" {
		p := filepath.Join(home, pixiehome.TokenFile)
		raw, err := os.ReadFile(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return Ref{}, errs.New(errs.Unauthorized, "no admin token: %s does not exist (`pixie serve` writes it on its first start with this home); or pass --token, or set PIXIE_ADMIN_TOKEN", p)
		case err != nil:
			return Ref{}, errs.Wrap(errs.Unauthorized, err, "no admin token: cannot read %s: %v; pass --token or set PIXIE_ADMIN_TOKEN", p, err)
		}
		r.Token, r.TokenFrom = strings.TrimSpace(string(raw)), p
		if r.Token == "" {
			return Ref{}, errs.New(errs.Unauthorized, "no admin token: %s is empty", p)
		}
	}
	return r, nil
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

// Unreachable is the error of a request that got no answer: it names the URL and where it
// came from.
func (r Ref) Unreachable(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return errs.Wrap(errs.Unavailable, err, "cannot reach the Pixie server at %s (URL from %s; is `pixie serve` running?): %s", r.Base, r.URLFrom, cause(err))
}

// cause is what the user can act on in a dial or TLS error, without the addresses the message
// already names: "connection refused", "tls: failed to verify certificate: x509: …".
func cause(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "tls: "); i >= 0 {
		return msg[i:]
	}
	if i := strings.LastIndex(msg, ": "); i >= 0 && i+2 < len(msg) {
		return msg[i+2:]
	}
	return msg
}

// HTTP statuses the errors name (net/http's values; this package does not link net/http).
const (
	statusUnauthorized = 401
	statusForbidden    = 403
	statusNotFound     = 404
)

// AnswerError turns a non-2xx answer into an *errs.Error. A 401 or 403 names the URL and where
// the token came from.
func (r Ref) AnswerError(status int, raw []byte) error {
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
		if status == statusUnauthorized {
			code = errs.Unauthorized
		}
		e = errs.New(code, "HTTP %d", status)
		if status == statusNotFound {
			e.Message += fmt.Sprintf(" from %s: is that a Pixie server, and as new as this CLI (%s)?", r.Base, r.Version)
		}
	}
	switch status {
	case statusUnauthorized:
		e.Message += fmt.Sprintf(" (server %s, URL from %s; the token came from %s: is it this server's token?)", r.Base, r.URLFrom, r.TokenFrom)
	case statusForbidden:
		e.Message += fmt.Sprintf(" (server %s, URL from %s; token from %s)", r.Base, r.URLFrom, r.TokenFrom)
	}
	return e
}

package server

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/proxy"
)

// The model-API side channel (docs/hints.md): /v1/proxy/anthropic/… and /v1/proxy/openai/…
// forward to the configured upstreams, carrying hints (internal/proxy).
//
// Authentication is the admin token, as on every route, sent the ways the agent hosts can be
// configured to send it without writing it into a file:
//
//   - X-Pixie-Token: <token> (Codex: env_http_headers = { "X-Pixie-Token" = "PIXIE_TOKEN" });
//   - as the API credential itself, x-api-key: <token> or Authorization: Bearer <token> (Claude
//     Code: apiKeyHelper printing $PIXIE_TOKEN; it sends the helper's value in one of the two
//     and the client's own key, when there is one, in the other).
//
// Pixie's credential is removed before the request goes upstream; the client's own credential
// (the header that is not the token) passes through untouched. Errors are answered in the API's
// own error shape, so the host shows them as it shows the vendor's errors.

// proxyTokenHeader carries the admin token for hosts that can add a header from the environment.
const proxyTokenHeader = "X-Pixie-Token"

func (s *Server) mountProxy() {
	if s.deps.Proxy == nil {
		return
	}
	for _, api := range []proxy.API{proxy.Anthropic, proxy.OpenAI} {
		prefix := "/v1/proxy/" + string(api)
		h := s.proxyRoute(api, prefix)
		for _, path := range []string{prefix, prefix + "/*"} {
			s.e.Any(path, h)
			for _, m := range proxyMethods {
				s.allowBigBody(m, path) // the proxy reads up to proxy.injectLimit and streams the rest
			}
		}
	}
}

// proxyMethods are the methods echo's Any registers.
var proxyMethods = []string{http.MethodConnect, http.MethodDelete, http.MethodGet, http.MethodHead, http.MethodOptions,
	http.MethodPatch, http.MethodPost, "PROPFIND", http.MethodPut, http.MethodTrace, "REPORT"}

func (s *Server) proxyRoute(api proxy.API, prefix string) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		w := c.Response()
		if err := s.proxyAuth(r); err != nil {
			s.proxyError(w, r, api, err)
			return nil
		}
		rest := strings.TrimPrefix(r.URL.Path, prefix)
		s.deps.Proxy.Serve(w, r, api, rest, s.proxyError)
		return nil
	}
}

// proxyAuth admits a request carrying the admin token (see the file comment) and removes it from
// the request; a request without it, or with a wrong X-Pixie-Token, is refused.
func (s *Server) proxyAuth(r *http.Request) error {
	h := r.Header
	ok := false
	if v := h.Get(proxyTokenHeader); v != "" {
		if !tokenEqual(strings.TrimSpace(v), s.cfg.Token) {
			return errs.New(errs.Unauthorized, "Pixie: invalid token in %s", proxyTokenHeader)
		}
		ok = true
	}
	h.Del(proxyTokenHeader)
	if k := h.Get("X-Api-Key"); k != "" && tokenEqual(strings.TrimSpace(k), s.cfg.Token) {
		ok = true
		h.Del("X-Api-Key")
	}
	if a := h.Get("Authorization"); a != "" {
		if tok, found := strings.CutPrefix(a, "Bearer "); found && tokenEqual(strings.TrimSpace(tok), s.cfg.Token) {
			ok = true
			h.Del("Authorization")
		}
	}
	if !ok {
		return errs.New(errs.Unauthorized, "Pixie: the model-API proxy needs Pixie's token: start the agent with PIXIE_TOKEN set "+
			"(pixie init claude|codex configures the host to send it)")
	}
	return nil
}

// proxyError answers err in api's error shape, with the status of the one error mapping.
func (s *Server) proxyError(w http.ResponseWriter, r *http.Request, api proxy.API, err error) {
	st, body := toHTTP(err)
	if st >= 500 {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", st, "err", body.Error.Message)
	}
	if st == 499 {
		return // the client went away
	}
	proxy.WriteAPIError(w, api, st, body.Error.Message)
}

package server

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/pixie-dev/pixie/internal/errs"
)

// CookieName is the UI session cookie.
const CookieName = "pixie_session"

// ctxAuthKind is the echo context key telling how a request authenticated: "token" or "cookie".
const ctxAuthKind = "pixie.auth"

// allowedHosts builds the Host allowlist: the configured names, or the localhost names plus
// the bind host.
func allowedHosts(addr string, configured []string) map[string]bool {
	m := map[string]bool{}
	if len(configured) > 0 {
		for _, h := range configured {
			m[strings.ToLower(strings.Trim(h, "[]"))] = true
		}
		return m
	}
	for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
		m[h] = true
	}
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" && host != "0.0.0.0" && host != "::" {
		m[strings.ToLower(host)] = true
	}
	return m
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return strings.ToLower(h)
	}
	return strings.ToLower(strings.Trim(hostport, "[]"))
}

// hostCheck refuses requests whose Host is not allowed (DNS rebinding defence). /healthz is
// checked too: it is unauthenticated, not unguarded.
func (s *Server) hostCheck(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !s.hosts[hostOnly(c.Request().Host)] {
			return errs.New(errs.Forbidden, "host %q is not allowed; add it to allowedHosts", hostOnly(c.Request().Host))
		}
		return next(c)
	}
}

// requireAuth admits a request with the admin bearer token, or with a valid UI cookie; a
// cookie-authenticated write must also carry an allowed Origin (CSRF defence on top of
// SameSite=Strict).
func (s *Server) requireAuth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if h := r.Header.Get("Authorization"); h != "" {
			tok, ok := strings.CutPrefix(h, "Bearer ")
			if !ok || !tokenEqual(strings.TrimSpace(tok), s.cfg.Token) {
				return errs.New(errs.Unauthorized, "invalid token")
			}
			c.Set(ctxAuthKind, "token")
			return next(c)
		}
		if ck, err := r.Cookie(CookieName); err == nil && s.cookie.valid(ck.Value, time.Now()) {
			if isWrite(r.Method) && !s.originAllowed(r) {
				return errs.New(errs.Forbidden, "cross-origin write refused: Origin is missing or not allowed")
			}
			c.Set(ctxAuthKind, "cookie")
			return next(c)
		}
		return errs.New(errs.Unauthorized, "authentication required: send Authorization: Bearer <token> or log in")
	}
}

func isWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

func (s *Server) originAllowed(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return false
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return s.hosts[hostOnly(u.Host)]
}

type loginRequest struct {
	Token string `json:"token" form:"token"`
}

// login exchanges the admin token for a signed session cookie. It accepts JSON or a form.
func (s *Server) login(c echo.Context) error {
	var req loginRequest
	ct := c.Request().Header.Get(echo.HeaderContentType)
	if strings.HasPrefix(ct, echo.MIMEApplicationJSON) || ct == "" {
		if err := bind(c, &req); err != nil {
			return err
		}
	} else {
		req.Token = c.FormValue("token")
	}
	if o := c.Request().Header.Get("Origin"); o != "" && !s.originAllowed(c.Request()) {
		return errs.New(errs.Forbidden, "cross-origin login refused")
	}
	if !tokenEqual(strings.TrimSpace(req.Token), s.cfg.Token) {
		return errs.New(errs.Unauthorized, "invalid token")
	}
	exp := time.Now().Add(s.cfg.CookieTTL)
	c.SetCookie(&http.Cookie{
		Name: CookieName, Value: s.cookie.sign(exp), Path: "/", Expires: exp,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.Scheme() == "https",
	})
	return c.JSON(http.StatusOK, map[string]any{"ok": true, "expiresAt": exp.UTC().Format(time.RFC3339)})
}

func (s *Server) logout(c echo.Context) error {
	c.SetCookie(&http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode})
	return c.JSON(http.StatusOK, map[string]any{"ok": true})
}

// cookieSigner signs "v1.<unix expiry>" with an HMAC key derived from the admin token, so a new
// token invalidates every UI session.
type cookieSigner struct{ key []byte }

func newCookieSigner(token string) cookieSigner {
	k := sha256.Sum256([]byte("pixie-ui-cookie\x00" + token))
	return cookieSigner{key: k[:]}
}

func (cs cookieSigner) mac(payload string) string {
	m := hmac.New(sha256.New, cs.key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (cs cookieSigner) sign(exp time.Time) string {
	p := "v1." + strconv.FormatInt(exp.Unix(), 10)
	return p + "." + cs.mac(p)
}

func (cs cookieSigner) valid(v string, now time.Time) bool {
	i := strings.LastIndexByte(v, '.')
	if i < 0 {
		return false
	}
	p, sig := v[:i], v[i+1:]
	if !hmac.Equal([]byte(sig), []byte(cs.mac(p))) {
		return false
	}
	rest, ok := strings.CutPrefix(p, "v1.")
	if !ok {
		return false
	}
	exp, err := strconv.ParseInt(rest, 10, 64)
	return err == nil && now.Unix() < exp
}

// newID returns n random bytes as hex.
func newID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

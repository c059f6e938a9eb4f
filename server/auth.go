package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
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
		if ck, err := r.Cookie(CookieName); err == nil {
			id, ok := s.cookie.parse(ck.Value, time.Now())
			if !ok {
				return errs.New(errs.Unauthorized, "the UI session cookie is not valid; log in again")
			}
			open, err := s.ui.open(r.Context(), id)
			if err != nil {
				return err
			}
			if !open {
				return errs.New(errs.Unauthorized, "the UI session has ended (logged out or expired); log in again")
			}
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
	id := newID(16)
	if err := s.ui.start(c.Request().Context(), id, exp); err != nil {
		return err
	}
	c.SetCookie(&http.Cookie{
		Name: CookieName, Value: s.cookie.sign(id, exp), Path: "/", Expires: exp,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.Scheme() == "https",
	})
	return c.JSON(http.StatusOK, map[string]any{"ok": true, "expiresAt": exp.UTC().Format(time.RFC3339)})
}

// logout ends the UI session the cookie names, on the server: the cookie stops working at once,
// even if a copy of it is replayed. Like any cookie write it needs an allowed Origin (a page on
// another site cannot log the user out); without a valid cookie there is nothing to end (401).
func (s *Server) logout(c echo.Context) error {
	r := c.Request()
	ck, err := r.Cookie(CookieName)
	if err != nil {
		return errs.New(errs.Unauthorized, "not logged in: /logout needs the UI session cookie")
	}
	id, ok := s.cookie.parse(ck.Value, time.Now())
	if !ok {
		return errs.New(errs.Unauthorized, "the UI session cookie is not valid")
	}
	if !s.originAllowed(r) {
		return errs.New(errs.Forbidden, "cross-origin logout refused: Origin is missing or not allowed")
	}
	live, err := s.ui.end(r.Context(), id)
	if err != nil {
		return err
	}
	c.SetCookie(&http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.Scheme() == "https"})
	if !live {
		return errs.New(errs.Unauthorized, "the UI session had already ended")
	}
	return c.JSON(http.StatusOK, map[string]any{"ok": true})
}

// cookieSigner signs "v2.<session id>.<unix expiry>" with an HMAC key derived from the admin
// token, so a new token invalidates every UI session. The signature proves the server issued
// the cookie; whether its session is still open is the session table's answer (uiSessions).
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

func (cs cookieSigner) sign(id string, exp time.Time) string {
	p := "v2." + id + "." + strconv.FormatInt(exp.Unix(), 10)
	return p + "." + cs.mac(p)
}

// parse checks the signature and the expiry and returns the session id.
func (cs cookieSigner) parse(v string, now time.Time) (string, bool) {
	i := strings.LastIndexByte(v, '.')
	if i < 0 {
		return "", false
	}
	p, sig := v[:i], v[i+1:]
	if !hmac.Equal([]byte(sig), []byte(cs.mac(p))) {
		return "", false
	}
	rest, ok := strings.CutPrefix(p, "v2.")
	if !ok {
		return "", false
	}
	id, expS, ok := strings.Cut(rest, ".")
	if !ok || !validSessionID(id) {
		return "", false
	}
	exp, err := strconv.ParseInt(expS, 10, 64)
	if err != nil || now.Unix() >= exp {
		return "", false
	}
	return id, true
}

// validSessionID reports whether id looks like newID(16) made it.
func validSessionID(id string) bool {
	if len(id) != 32 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// uiSession is one open UI login.
type uiSession struct {
	ExpiresAt time.Time `json:"expiresAt"`
}

// uiSessionCol holds the open UI logins by session id, each with a TTL of its cookie's life.
var uiSessionCol = store.NewCollection[uiSession]("ui-session")

// uiSessions is the table of open UI logins: in the store when the server has one (so a logout
// holds across restarts and replicas), else in memory.
type uiSessions struct {
	st  *store.Store
	mu  sync.Mutex
	mem map[string]time.Time
}

func (u *uiSessions) start(ctx context.Context, id string, exp time.Time) error {
	if u.st == nil {
		u.mu.Lock()
		defer u.mu.Unlock()
		now := time.Now()
		for k, e := range u.mem {
			if !now.Before(e) {
				delete(u.mem, k)
			}
		}
		u.mem[id] = exp
		return nil
	}
	err := u.st.Update(ctx, func(tx *store.Tx) error {
		return uiSessionCol.PutTTL(tx, id, uiSession{ExpiresAt: exp.UTC()}, time.Until(exp))
	})
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cannot record the UI session")
	}
	return nil
}

// open reports whether the session is open (started, not ended, not expired).
func (u *uiSessions) open(ctx context.Context, id string) (bool, error) {
	now := time.Now()
	if u.st == nil {
		u.mu.Lock()
		defer u.mu.Unlock()
		exp, ok := u.mem[id]
		return ok && now.Before(exp), nil
	}
	var sess uiSession
	err := u.st.View(ctx, func(tx *store.Tx) error {
		var err error
		sess, err = uiSessionCol.Get(tx, id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, errs.Wrap(errs.Unavailable, err, "cannot check the UI session")
	}
	return now.Before(sess.ExpiresAt), nil
}

// end closes the session and reports whether it was open.
func (u *uiSessions) end(ctx context.Context, id string) (bool, error) {
	if u.st == nil {
		u.mu.Lock()
		defer u.mu.Unlock()
		exp, ok := u.mem[id]
		delete(u.mem, id)
		return ok && time.Now().Before(exp), nil
	}
	var was bool
	err := u.st.Update(ctx, func(tx *store.Tx) error {
		sess, err := uiSessionCol.Get(tx, id)
		if errors.Is(err, store.ErrNotFound) {
			was = false
			return nil
		}
		if err != nil {
			return err
		}
		was = time.Now().Before(sess.ExpiresAt)
		return uiSessionCol.Delete(tx, id)
	})
	if err != nil {
		return false, errs.Wrap(errs.Internal, err, "cannot end the UI session")
	}
	return was, nil
}

// newID returns n random bytes as hex.
func newID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Package server owns Pixie's HTTP surface: the echo router, authentication (admin bearer token,
// signed UI cookie, Host allowlist against DNS rebinding, Origin check on cookie writes), request
// IDs and access logs, body limits and timeouts, the one error→HTTP mapping (errors.go), SSE, the
// DTOs, and the routes of every domain (one file per domain: gates.go, hints.go, …).
//
// It imports no storage or WASM engine: the domain services it is given use the portable
// internal/store and runtime packages, and the binary (cmd/pixie) wires the engines in.
package server

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pixie-dev/pixie/internal/channel/lark"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/helper"
	"github.com/pixie-dev/pixie/internal/hint"
	"github.com/pixie-dev/pixie/internal/hooks"
	"github.com/pixie-dev/pixie/internal/judge"
	"github.com/pixie-dev/pixie/internal/pet"
	"github.com/pixie-dev/pixie/internal/proxy"
	"github.com/pixie-dev/pixie/internal/settings"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/runtime/modules"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// Config configures the server. The zero value works for tests (Token must be set to reach any
// authenticated route).
type Config struct {
	// Addr is the listen address; empty means 127.0.0.1:7777.
	Addr string
	// AllowedHosts are the Host header names accepted (without port). Empty means the localhost
	// names plus the bind host of Addr.
	AllowedHosts []string
	// Token is the admin bearer token.
	Token string
	// BodyLimit caps request bodies in bytes; zero means 1 MiB. Routes that take larger bodies
	// (module upload) set their own limit.
	BodyLimit int64
	// ReadTimeout, WriteTimeout and IdleTimeout are the http.Server timeouts; zero means 30s,
	// 120s and 120s. SSE routes lift the write timeout per response.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// CookieTTL is how long a UI login lasts; zero means 12h.
	CookieTTL time.Duration
	// Version is reported by /v1/info.
	Version string
	// Logger receives access and error logs; nil discards them.
	Logger *slog.Logger
	// Registry receives Pixie's metrics; nil creates a private one.
	Registry *prometheus.Registry
	// Pprof mounts Go's profiles (net/http/pprof) at /debug/pprof/, for the admin token only
	// (not a UI cookie). Off by default: a profile costs CPU while it is taken.
	Pprof bool
	// Deps are the domain services the routes serve.
	Deps Deps
}

// Deps are the domain services the routes serve. A nil service leaves its routes unmounted.
type Deps struct {
	// Store is used for health checks.
	Store *store.Store
	// Info returns what is configured (no secrets) for /v1/info.
	Info func(ctx context.Context) map[string]any
	// Hints is the hint queue (routes in hints.go).
	Hints *hint.Queue
	// Gates is Pixie Gate (routes in gates.go).
	Gates *gate.Service
	// Helpers answers the helper calls of gate and Pet runs by run token (routes in helper.go);
	// it is the Service both are given.
	Helpers *helper.Service
	// Hooks is the Claude Code / Codex hook adapter (routes in hooks.go).
	Hooks *hooks.Service
	// Pet is Pet: skills, tasks, invocations, env values, wheel, diagnostics (routes in pet.go).
	Pet *pet.Service
	// Channel is the Lark channel: event webhook, binding, allowlist, pairing, Loci, Deliveries
	// (routes in channel.go).
	Channel *lark.Channel
	// Modules is the WASM module registry (routes in modules.go).
	Modules *modules.Registry
	// ModuleInUse refuses deleting a module a saved gate uses (the gate service's check).
	ModuleInUse modules.InUse
	// Judge is the decision engine: the judge tool and the Jev key (routes in judge.go).
	Judge *judge.Service
	// Settings are the run-time model and decision-engine settings (routes in settings.go).
	Settings *settings.Service
	// Replicas finds the other replicas of a cluster on one shared store; a helper call whose
	// run token another replica issued is forwarded there (helper.go). Nil means one process.
	Replicas Replicas
	// Proxy is the model-API side channel that carries hints (routes in proxy.go).
	Proxy *proxy.Proxy
}

// Server is Pixie's HTTP server.
type Server struct {
	cfg     Config
	deps    Deps
	e       *echo.Echo
	log     *slog.Logger
	started time.Time
	reg     *prometheus.Registry
	hosts   map[string]bool
	// bigBodies are the routes ("METHOD /path") that read large bodies themselves (each
	// enforces its own cap); allowBigBody adds them while routes are mounted.
	bigBodies map[string]bool
	cookie    cookieSigner
	ui        *uiSessions
	// hookRefused counts hook calls without a valid token (hooks.go).
	hookRefused hookRefusals

	reqs    *prometheus.CounterVec
	latency *prometheus.HistogramVec

	// v1 is the /v1 group behind admin auth; open is the group with only the Host check, for
	// routes that authenticate themselves (helper run tokens, Lark signatures).
	v1   *echo.Group
	open *echo.Group

	shutdownCtx    context.Context
	shutdownCancel context.CancelFunc

	// forward is the client of helper calls forwarded to another replica.
	forward *http.Client
}

// New builds the server and its routes over cfg.Deps. It returns no error.
func New(_ context.Context, cfg Config) (*Server, error) {
	deps := cfg.Deps
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:7777"
	}
	if cfg.BodyLimit <= 0 {
		cfg.BodyLimit = 1 << 20
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 30 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 120 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 120 * time.Second
	}
	if cfg.CookieTTL <= 0 {
		cfg.CookieTTL = 12 * time.Hour
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	reg := cfg.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	s := &Server{
		cfg:       cfg,
		deps:      deps,
		e:         echo.New(),
		log:       log,
		started:   time.Now(),
		reg:       reg,
		hosts:     allowedHosts(cfg.Addr, cfg.AllowedHosts),
		bigBodies: map[string]bool{},
		cookie:    newCookieSigner(cfg.Token),
		ui:        &uiSessions{st: deps.Store, mem: map[string]time.Time{}},
		forward:   &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		reqs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pixie_http_requests_total", Help: "HTTP requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "pixie_http_request_duration_seconds", Help: "HTTP request latency by route and method.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route", "method"}),
	}
	s.shutdownCtx, s.shutdownCancel = context.WithCancel(context.Background())
	reg.MustRegister(s.reqs, s.latency)
	if deps.Gates != nil {
		s.registerRecordMetrics(reg)
	}
	s.e.HideBanner = true
	s.e.HidePort = true
	s.e.HTTPErrorHandler = s.handleError
	s.e.Server.ReadTimeout = cfg.ReadTimeout
	s.e.Server.ReadHeaderTimeout = 10 * time.Second
	s.e.Server.WriteTimeout = cfg.WriteTimeout
	s.e.Server.IdleTimeout = cfg.IdleTimeout
	s.e.Server.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)

	s.e.Use(middleware.RequestIDWithConfig(middleware.RequestIDConfig{
		Generator: func() string { return newID(12) },
	}))
	s.e.Use(s.observe)
	s.e.Use(middleware.Recover())
	s.e.Use(s.hostCheck)
	s.e.Use(s.bodyLimit)
	s.routes()
	return s, nil
}

// Close ends the long-lived responses (as Serve does when its context ends) and closes the idle
// connections of the client that forwards helper calls to other replicas. The listener is
// Serve's. It may be called more than once.
func (s *Server) Close(context.Context) error {
	s.shutdownCancel()
	s.forward.CloseIdleConnections()
	return nil
}

// Registry is the metrics registry, for domain counters.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Handler returns the HTTP handler (for tests and embedding).
func (s *Server) Handler() http.Handler { return s.e }

// Routes lists the mounted routes as "METHOD /path", sorted (for tests and docs).
func (s *Server) Routes() []string {
	var out []string
	for _, r := range s.e.Routes() {
		if r.Method != echo.RouteNotFound {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Done is closed when the server starts shutting down; long-lived responses (SSE) end on it.
func (s *Server) Done() <-chan struct{} { return s.shutdownCtx.Done() }

// Serve serves on ln until ctx ends, then shuts down gracefully within grace.
func (s *Server) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	if grace <= 0 {
		grace = 10 * time.Second
	}
	errc := make(chan error, 1)
	go func() {
		s.e.Listener = jsonErrorListener{ln} // net/http's own refusals in the JSON shape too
		errc <- s.e.Start("")
	}()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	case <-ctx.Done():
	}
	s.shutdownCancel()
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := s.e.Shutdown(sctx); err != nil {
		return fmt.Errorf("server: shutdown: %w", err)
	}
	return nil
}

// routes is the route table. Each domain mounts its routes from its own file.
func (s *Server) routes() {
	s.e.GET("/healthz", s.healthz)
	s.e.HEAD("/healthz", s.healthz)
	s.e.POST("/login", s.login)
	s.e.POST("/logout", s.logout)
	s.open = s.e.Group("/v1")
	authed := s.e.Group("", s.requireAuth)
	authed.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})))
	if s.cfg.Pprof {
		s.mountPprof()
	}
	s.v1 = s.e.Group("/v1", s.requireAuth)
	s.v1.GET("/info", s.info)
	s.mountHints(s.v1)
	s.mountGates(s.v1)
	s.mountHooks(s.open)
	s.mountPet(s.v1)
	s.mountModules(s.v1)
	s.mountChannel(s.v1, s.open)
	s.mountHelper(s.open)
	s.mountJudge(s.v1)
	s.mountSettings(s.v1)
	s.mountProxy()
	s.mountUI()
}

func (s *Server) healthz(c echo.Context) error {
	status := "ok"
	code := http.StatusOK
	if s.deps.Store != nil {
		ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
		defer cancel()
		if err := s.deps.Store.View(ctx, func(*store.Tx) error { return nil }); err != nil {
			status, code = "store unavailable", http.StatusServiceUnavailable
		}
	}
	return c.JSON(code, map[string]string{"status": status})
}

func (s *Server) info(c echo.Context) error {
	out := map[string]any{
		"version":       s.cfg.Version,
		"uptimeSeconds": int64(time.Since(s.started).Seconds()),
		"startedAt":     s.started.UTC().Format(time.RFC3339),
	}
	if s.deps.Info != nil {
		for k, v := range s.deps.Info(c.Request().Context()) {
			out[k] = v
		}
	}
	// Whether the hint routes are mounted (hints.enabled): pixie mcp offers its hint tools and
	// Studio its hint bar only when they are.
	out["hints"] = map[string]any{"enabled": s.deps.Hints != nil}
	return c.JSON(http.StatusOK, out)
}

// bodyLimit caps bodies, answering 413 in the standard error shape. Routes that accept larger
// bodies are listed in s.bigBodies with their own cap enforced by the handler.
func (s *Server) bodyLimit(next echo.HandlerFunc) echo.HandlerFunc {
	limit := s.cfg.BodyLimit
	return func(c echo.Context) error {
		if s.bigBody(c) {
			return next(c)
		}
		r := c.Request()
		if r.ContentLength > limit {
			return errs.New(errs.TooLarge, "request body is over the %d-byte limit", limit)
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, limit)
		return next(c)
	}
}

func (s *Server) bigBody(c echo.Context) bool { return s.bigBodies[c.Request().Method+" "+c.Path()] }

// allowBigBody exempts a route from the default body limit; its handler must cap the body.
// Routes are mounted before the server serves, so bigBodies is only read afterwards.
func (s *Server) allowBigBody(method, path string) { s.bigBodies[method+" "+path] = true }

// observe records metrics and writes one structured access-log line per request. It never logs
// headers, query strings or bodies, so tokens cannot reach the log.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		st := c.Response().Status
		d := time.Since(start)
		s.reqs.WithLabelValues(route, c.Request().Method, fmt.Sprint(st)).Inc()
		s.latency.WithLabelValues(route, c.Request().Method).Observe(d.Seconds())
		s.log.Info("http", "request_id", c.Response().Header().Get(echo.HeaderXRequestID),
			"method", c.Request().Method, "route", route, "path", c.Request().URL.Path,
			"status", st, "bytes", c.Response().Size, "duration_ms", float64(d.Microseconds())/1000)
		return nil
	}
}

// readObject reads a JSON body that must be one object, and returns it. This is the one place
// bodies are read for the routes that take a JSON object: a body that is null, a list, a string,
// a number, or empty is refused with 400 before any handler can mistake it for an object with
// every field left out (a null whole-set save once deleted every gate).
func readObject(c echo.Context) ([]byte, error) {
	body, err := readJSON(c)
	if err != nil {
		return nil, err
	}
	if err := checkObject(body); err != nil {
		return nil, err
	}
	return body, nil
}

// readJSON reads a body declared as JSON (or undeclared), mapping the size cap to 413.
func readJSON(c echo.Context) ([]byte, error) {
	r := c.Request()
	ct := r.Header.Get(echo.HeaderContentType)
	if ct != "" && !strings.HasPrefix(ct, echo.MIMEApplicationJSON) {
		return nil, errs.New(errs.Invalid, "body must be application/json")
	}
	var b bytes.Buffer
	if n := r.ContentLength; n > 0 && n < 64<<20 {
		b.Grow(int(n) + bytes.MinRead)
	}
	if _, err := b.ReadFrom(r.Body); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errs.New(errs.TooLarge, "request body is over the %d-byte limit", mbe.Limit)
		}
		return nil, errs.Wrap(errs.Invalid, err, "cannot read the request body")
	}
	return b.Bytes(), nil
}

// checkObject refuses a body whose value is not a JSON object, naming what it is instead.
func checkObject(body []byte) error {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return errs.New(errs.Invalid, "request body is empty; a JSON object is required")
	}
	if trimmed[0] == '{' {
		return nil
	}
	what := "not JSON"
	switch c := trimmed[0]; {
	case bytes.HasPrefix(trimmed, []byte("null")):
		what = "null"
	case c == '[':
		what = "a list"
	case c == '"':
		what = "a string"
	case c == '-' || c >= '0' && c <= '9':
		what = "a number"
	case bytes.HasPrefix(trimmed, []byte("true")) || bytes.HasPrefix(trimmed, []byte("false")):
		what = "a boolean"
	}
	return errs.New(errs.Invalid, "request body must be a JSON object, not %s", what)
}

// bind decodes a JSON object body strictly into v: a body that is not an object, unknown
// fields and trailing data are refused.
func bind(c echo.Context, v any) error {
	body, err := readObject(c)
	if err != nil {
		return err
	}
	return decodeBody(body, v)
}

func decodeBody(body []byte, v any) error {
	switch err := abi.DecodeStrict(body, v); {
	case errors.Is(err, abi.ErrTrailingData):
		return errs.New(errs.Invalid, "invalid JSON body: trailing data after the object")
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return errs.New(errs.Invalid, "invalid JSON body: it ends before the object does")
	case err != nil:
		return errs.Wrap(errs.Invalid, err, "invalid JSON body: %s", err.Error())
	}
	return nil
}

// bindOptional is bind for routes whose body may be left out: an empty body (or only
// whitespace) leaves v as it is; anything else must be a JSON object.
func bindOptional(c echo.Context, v any) error {
	body, err := readJSON(c)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := checkObject(body); err != nil {
		return err
	}
	return decodeBody(body, v)
}

// tokenEqual compares tokens in constant time.
func tokenEqual(a, b string) bool {
	return len(a) > 0 && len(b) > 0 && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

package server

import (
	"net/http"
	"net/http/pprof"
	rpprof "runtime/pprof"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/pixie-dev/pixie/internal/errs"
)

// mountPprof mounts Go's runtime profiles (server.pprof): GET /debug/pprof/ lists them,
// /debug/pprof/heap, /allocs, /goroutine, … serve one (?debug=1 as text), /debug/pprof/profile
// a CPU profile (?seconds=N, default 30) and /debug/pprof/trace an execution trace. Only the
// admin bearer token reaches them: a profile shows the server's insides and costs CPU while it
// is taken, so a Studio login (a cookie) is refused.
func (s *Server) mountPprof() {
	g := s.e.Group("/debug/pprof", s.requireAuth, func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if c.Get(ctxAuthKind) != "token" {
				return errs.New(errs.Forbidden, "profiles need the admin token (Authorization: Bearer …), not a Studio login")
			}
			return next(c)
		}
	})
	g.GET("/", echo.WrapHandler(http.HandlerFunc(pprof.Index)))
	g.GET("/cmdline", echo.WrapHandler(http.HandlerFunc(pprof.Cmdline)))
	g.GET("/profile", echo.WrapHandler(http.HandlerFunc(pprof.Profile)))
	g.GET("/symbol", echo.WrapHandler(http.HandlerFunc(pprof.Symbol)))
	g.GET("/trace", echo.WrapHandler(http.HandlerFunc(pprof.Trace)))
	// Named profiles (heap, allocs, goroutine, block, mutex, threadcreate).
	g.GET("/:name", func(c echo.Context) error {
		name := c.Param("name")
		if strings.ContainsAny(name, "/.") || rpprof.Lookup(name) == nil {
			return errs.New(errs.NotFound, "no profile %q", name)
		}
		pprof.Handler(name).ServeHTTP(c.Response(), c.Request())
		return nil
	})
}

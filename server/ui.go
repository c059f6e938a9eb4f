package server

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// uiFiles is Studio, the web UI: plain ES modules and CSS served as they are, so running it
// needs no build step. The page shell is public (it holds no data); every API call it makes is
// authenticated by the session cookie from POST /login.
//
//go:embed ui
var uiFiles embed.FS

func (s *Server) mountUI() {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err)
	}
	files := http.FileServer(http.FS(sub))
	serve := func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		p := c.Request().URL.Path
		if p == "/" || !strings.Contains(p[strings.LastIndexByte(p, '/'):], ".") {
			c.Request().URL.Path = "/"
		}
		files.ServeHTTP(c.Response(), c.Request())
		return nil
	}
	s.e.GET("/", serve)
	s.e.GET("/ui/*", func(c echo.Context) error {
		c.Request().URL.Path = strings.TrimPrefix(c.Request().URL.Path, "/ui")
		return serve(c)
	})
}

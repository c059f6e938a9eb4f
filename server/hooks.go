package server

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/hooks"
	"github.com/pixie-dev/pixie/internal/later"
)

// The agent adapter routes (docs/agents/claude-code.md). POST /v1/hooks/claude-code serves
// Claude Code's (and Codex's) http hook type: the body is the hook input, the answer the hook
// output. It sits behind the admin token, which Claude Code sends as the Authorization header
// the hook declares; the preset comes from ?preset= (default: hooks.defaultPreset).
//
// Only a 2xx JSON answer decides anything in Claude Code: an error status lets the step go on
// as if there were no hook, so errors keep the usual JSON error shape for people reading logs.

func (s *Server) mountHooks(g *echo.Group) {
	if s.deps.Hooks == nil {
		return
	}
	g.POST("/hooks/claude-code", s.hookClaudeCode)
}

func (s *Server) hookClaudeCode(c echo.Context) error {
	r := c.Request()
	if ct := r.Header.Get(echo.HeaderContentType); ct != "" && !strings.HasPrefix(ct, echo.MIMEApplicationJSON) {
		return errs.New(errs.Invalid, "body must be application/json (the hook input)")
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errs.New(errs.TooLarge, "hook input is over the %d-byte limit", mbe.Limit)
		}
		return errs.Wrap(errs.Invalid, err, "cannot read the hook input")
	}
	ctx, sent := later.Defer(r.Context())
	defer sent() // work the evaluation set off starts after the answer (sendJSONBlob sends it)
	return s.deps.Hooks.Handle(ctx, c.QueryParam("preset"), body, func(o hooks.Output) error {
		return sendJSONBlob(c, http.StatusOK, o.Marshal())
	})
}

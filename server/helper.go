package server

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// The helper routes `pixie ask` and `pixie judge` call from inside a script run. They sit in
// the open /v1 group (Host check only) and authenticate with the run's token alone
// (Authorization: Bearer <PIXIE_TOKEN>): the admin token and the UI cookie do not reach them,
// and a run token reaches nothing else. Errors use the standard shape {"error":{code,message}}:
// 401 unknown or ended run, 413 over 256 KB, 429 past 20 calls, 503 no model or engine.

func (s *Server) mountHelper(g *echo.Group) {
	if s.deps.Gates == nil {
		return
	}
	g.POST("/helper/ask", s.helperAsk)
	g.POST("/helper/judge", s.helperJudge)
}

// runToken reads the run token and the body (at most one byte over the helper limit, so an
// oversized request is seen as such without reading it all).
func runToken(c echo.Context) (string, []byte, error) {
	h := c.Request().Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || strings.TrimSpace(tok) == "" {
		return "", nil, errs.New(errs.Unauthorized, "the helper needs its run token: Authorization: Bearer $PIXIE_TOKEN")
	}
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, abi.MaxHelperRequestSize+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return "", nil, errs.New(errs.TooLarge, "a helper request is at most %d bytes", abi.MaxHelperRequestSize)
		}
		return "", nil, errs.Wrap(errs.Invalid, err, "cannot read the request body")
	}
	return strings.TrimSpace(tok), body, nil
}

func (s *Server) helperAsk(c echo.Context) error {
	tok, body, err := runToken(c)
	if err != nil {
		return err
	}
	resp, err := s.deps.Gates.HelperAsk(c.Request().Context(), tok, body)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, resp)
}

func (s *Server) helperJudge(c echo.Context) error {
	tok, body, err := runToken(c)
	if err != nil {
		return err
	}
	resp, err := s.deps.Gates.HelperJudge(c.Request().Context(), tok, body)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, resp)
}

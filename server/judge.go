package server

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/pixie-dev/pixie/internal/errs"
)

// The decision engine's routes: the judge tool (POST /v1/judge takes the Jev request shape as
// is and answers per question), the engine's settings view, and the Jev key, which can be
// saved and deleted but is never returned.
func (s *Server) mountJudge(g *echo.Group) {
	j := s.deps.Judge
	if j == nil {
		return
	}
	g.POST("/judge", func(c echo.Context) error {
		body, err := readObject(c)
		if err != nil {
			return err
		}
		resp, err := j.JudgeJSON(c.Request().Context(), body)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, resp)
	})
	g.GET("/judge", func(c echo.Context) error { return c.JSON(http.StatusOK, j.Info()) })
	g.GET("/judge/key", func(c echo.Context) error {
		st, err := j.Keys().Status(c.Request().Context())
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, st)
	})
	g.PUT("/judge/key", func(c echo.Context) error {
		var req struct {
			Key string `json:"key"`
		}
		if err := bind(c, &req); err != nil {
			return err
		}
		if req.Key == "" {
			return errs.New(errs.Invalid, "key is required")
		}
		st, err := j.Keys().SetKey(c.Request().Context(), req.Key)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, st)
	})
	g.DELETE("/judge/key", func(c echo.Context) error {
		if err := j.Keys().DeleteKey(c.Request().Context()); err != nil {
			return err
		}
		st, err := j.Keys().Status(c.Request().Context())
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, st)
	})
}

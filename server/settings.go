package server

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/pixie-dev/pixie/internal/settings"
)

// The run-time settings routes (Studio's Pixie settings page): the Pixie model and the decision
// engine as saved on top of pixie.yaml and the environment, a connection test, and the saved
// API keys, which can be replaced or removed but are never returned. Shapes are in
// docs/models.md ("Changing the model at run time").
func (s *Server) mountSettings(g *echo.Group) {
	st := s.deps.Settings
	if st == nil {
		return
	}
	g.GET("/settings", func(c echo.Context) error {
		v, err := st.Get(c.Request().Context())
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, v)
	})
	g.PUT("/settings/model", func(c echo.Context) error {
		var in settings.ModelInput
		if err := bind(c, &in); err != nil {
			return err
		}
		v, err := st.SetModel(c.Request().Context(), in)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, v)
	})
	g.DELETE("/settings/model", func(c echo.Context) error {
		v, err := st.ResetModel(c.Request().Context())
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, v)
	})
	g.DELETE("/settings/model/api-key", func(c echo.Context) error {
		v, err := st.DeleteModelKey(c.Request().Context())
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, v)
	})
	g.POST("/settings/model/test", func(c echo.Context) error {
		var in settings.ModelInput
		if err := bindOptional(c, &in); err != nil {
			return err
		}
		var draft *settings.ModelInput
		if in != (settings.ModelInput{}) {
			draft = &in
		}
		res, err := st.TestModel(c.Request().Context(), draft)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, res)
	})
	g.PUT("/settings/judge", func(c echo.Context) error {
		var in settings.JudgeInput
		if err := bind(c, &in); err != nil {
			return err
		}
		v, err := st.SetJudge(c.Request().Context(), in)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, v)
	})
	g.DELETE("/settings/judge", func(c echo.Context) error {
		v, err := st.ResetJudge(c.Request().Context())
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, v)
	})
	g.DELETE("/settings/judge/model/api-key", func(c echo.Context) error {
		v, err := st.DeleteJudgeModelKey(c.Request().Context())
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, v)
	})
}

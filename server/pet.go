package server

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/pet"
)

// The Pet routes (docs/pet.md), all in the /v1 group behind the admin token or the UI cookie.
// Handlers only decode, call internal/pet and encode; every error is a coded errs.Error mapped
// in errors.go.

func (s *Server) mountPet(g *echo.Group) {
	if s.deps.Pet == nil {
		return
	}
	g.POST("/pet/skills/inspect", s.petInspect)
	g.POST("/pet/skills", s.petRegister)
	g.GET("/pet/skills", s.petSkills)
	g.GET("/pet/skills/:name", s.petSkill)
	g.PATCH("/pet/skills/:name", s.petUpdateSkill)
	g.DELETE("/pet/skills/:name", s.petRemoveSkill)
	g.POST("/pet/projection/rebuild", s.petRebuild)
	g.GET("/pet/env", s.petListEnv)
	g.PUT("/pet/env/:key", s.petSetEnv)
	g.DELETE("/pet/env/:key", s.petDeleteEnv)
	g.POST("/pet/invocations", s.petInvoke)
	g.GET("/pet/invocations/:id", s.petInvocation)
	g.POST("/pet/invocations/:id/retry", s.petRetry)
	g.GET("/pet/tasks", s.petTasks)
	g.GET("/pet/tasks/:id", s.petTask)
	g.POST("/pet/tasks/:id/archive", s.petArchive)
	g.GET("/pet/wheel", s.petWheel)
	g.GET("/pet/diagnostics", s.petDiagnostics)
	g.POST("/pet/actions/:id/invoke", s.petInvokeAction)
}

// PetInspectRequest is the body of POST /v1/pet/skills/inspect.
type PetInspectRequest struct {
	Path string `json:"path"`
}

func (s *Server) petInspect(c echo.Context) error {
	var req PetInspectRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	in, err := s.deps.Pet.Inspect(c.Request().Context(), req.Path)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, in)
}

func (s *Server) petRegister(c echo.Context) error {
	var req pet.RegisterRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	v, err := s.deps.Pet.Register(c.Request().Context(), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, v)
}

// PetSkillList is the answer of GET /v1/pet/skills.
type PetSkillList struct {
	Skills []pet.SkillView `json:"skills"`
}

func (s *Server) petSkills(c echo.Context) error {
	list, err := s.deps.Pet.Skills(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, PetSkillList{Skills: list})
}

func (s *Server) petSkill(c echo.Context) error {
	v, err := s.deps.Pet.Skill(c.Request().Context(), c.Param("name"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

func (s *Server) petUpdateSkill(c echo.Context) error {
	var patch pet.SkillPatch
	if err := bind(c, &patch); err != nil {
		return err
	}
	v, err := s.deps.Pet.UpdateSkill(c.Request().Context(), c.Param("name"), patch)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

func (s *Server) petRemoveSkill(c echo.Context) error {
	if err := s.deps.Pet.RemoveSkill(c.Request().Context(), c.Param("name")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) petRebuild(c echo.Context) error {
	rep, err := s.deps.Pet.RebuildProjection(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rep)
}

// PetEnvList is the answer of GET /v1/pet/env: values are always masked.
type PetEnvList struct {
	Env []pet.EnvEntry `json:"env"`
}

// petEnvScope reads ?scope=global or ?scope=workspace:<id>; absent means every scope.
func petEnvScope(c echo.Context) (workspace string, all bool, err error) {
	scope := c.QueryParam("scope")
	switch {
	case scope == "":
		return "", true, nil
	case scope == pet.GlobalScope:
		return "", false, nil
	case strings.HasPrefix(scope, "workspace:") && len(scope) > len("workspace:"):
		return strings.TrimPrefix(scope, "workspace:"), false, nil
	}
	return "", false, errs.New(errs.Invalid, "scope %q: use global or workspace:<id>", scope)
}

func (s *Server) petListEnv(c echo.Context) error {
	ws, all, err := petEnvScope(c)
	if err != nil {
		return err
	}
	list, err := s.deps.Pet.ListEnv(c.Request().Context(), ws, all)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, PetEnvList{Env: list})
}

// PetSetEnvRequest is the body of PUT /v1/pet/env/:key. Workspace empty means the global scope.
type PetSetEnvRequest struct {
	Value     string `json:"value"`
	Workspace string `json:"workspace,omitempty"`
}

func (s *Server) petSetEnv(c echo.Context) error {
	var req PetSetEnvRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	en, err := s.deps.Pet.SetEnv(c.Request().Context(), req.Workspace, c.Param("key"), req.Value)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, en)
}

func (s *Server) petDeleteEnv(c echo.Context) error {
	if err := s.deps.Pet.DeleteEnv(c.Request().Context(), c.QueryParam("workspace"), c.Param("key")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) petInvoke(c echo.Context) error {
	var req pet.InvokeRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	v, err := s.deps.Pet.Invoke(c.Request().Context(), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, v)
}

func (s *Server) petInvocation(c echo.Context) error {
	v, err := s.deps.Pet.Invocation(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

func (s *Server) petRetry(c echo.Context) error {
	v, err := s.deps.Pet.Retry(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

// PetTaskList is the answer of GET /v1/pet/tasks.
type PetTaskList struct {
	Tasks []pet.Task `json:"tasks"`
}

func (s *Server) petTasks(c echo.Context) error {
	f := pet.TaskFilter{Scope: c.QueryParam("scope")}
	if v := c.QueryParam("archived"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errs.New(errs.Invalid, "archived must be true or false")
		}
		f.Archived = b
	}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return errs.New(errs.Invalid, "limit must be a positive number")
		}
		f.Limit = n
	}
	list, err := s.deps.Pet.Tasks(c.Request().Context(), f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, PetTaskList{Tasks: list})
}

func (s *Server) petTask(c echo.Context) error {
	v, err := s.deps.Pet.Task(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

func (s *Server) petArchive(c echo.Context) error {
	t, err := s.deps.Pet.Archive(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, t)
}

func (s *Server) petWheel(c echo.Context) error {
	w, err := s.deps.Pet.Wheel(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, w)
}

func (s *Server) petDiagnostics(c echo.Context) error {
	d, err := s.deps.Pet.Diagnostics(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

// PetActionRequest is the body of POST /v1/pet/actions/:id/invoke.
type PetActionRequest struct {
	Snapshot pet.Snapshot `json:"snapshot"`
}

func (s *Server) petInvokeAction(c echo.Context) error {
	var req PetActionRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	res, err := s.deps.Pet.InvokeBuiltin(c.Request().Context(), c.Param("id"), req.Snapshot)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

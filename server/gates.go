package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/later"
)

// The gate routes (docs/gates.md). They sit in the /v1 group, behind the admin token or the UI
// cookie; the helper routes that scripts call with their run token are in helper.go.

// maxEvalBody caps evaluate and try bodies: a target of gate.MaxTargetSize, JSON-escaped, plus
// the rest of the request.
const maxEvalBody = 2*gate.MaxTargetSize + 64*1024

func (s *Server) mountGates(g *echo.Group) {
	if s.deps.Gates == nil {
		return
	}
	g.GET("/gates", s.gatesGet)
	g.PUT("/gates", s.gatesPut)
	g.GET("/gates/templates", s.gateTemplates)
	g.GET("/gates/points", s.gatePoints)
	g.GET("/gates/definitions/:name", s.gateGet)
	g.PUT("/gates/definitions/:name", s.gatePut)
	g.DELETE("/gates/definitions/:name", s.gateDelete)
	g.GET("/gates/presets", s.gatePresets)
	g.PUT("/gates/presets/:preset", s.gatePresetPut)
	g.DELETE("/gates/presets/:preset", s.gatePresetDelete)
	g.PUT("/gates/presets/:preset/gates/:gate", s.gateAttach)
	g.DELETE("/gates/presets/:preset/gates/:gate", s.gateDetach)
	g.GET("/gates/scripts", s.gateScripts)
	g.PUT("/gates/scripts", s.gateScriptFolder)
	g.POST("/gates/scripts/refresh", s.gateScriptsRefresh)
	g.POST("/gates/evaluate", s.gateEvaluate)
	g.POST("/gates/try", s.gateTry)
	g.GET("/gates/records/:id", s.gateRecord)
	g.GET("/gates/sessions", s.gateSessions)
	g.GET("/gates/setup", s.gateSetup)
	g.GET("/gates/sessions/:session/records", s.gateRecords)
	g.GET("/gates/sessions/:session/notes", s.gateNotes)
	g.GET("/gates/sessions/:session/switches", s.gateSwitches)
	g.PUT("/gates/sessions/:session/switches/:gate", s.gateSwitchPut)
	s.allowBigBody(http.MethodPost, "/v1/gates/evaluate")
	s.allowBigBody(http.MethodPost, "/v1/gates/try")
}

func (s *Server) gatesGet(c echo.Context) error {
	set, err := s.deps.Gates.Definitions(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, set)
}

// gatesPut saves the whole set, all-or-nothing; a refusal lists every problem by field.
func (s *Server) gatesPut(c echo.Context) error {
	body, err := readObject(c)
	if err != nil {
		return err
	}
	set, err := gate.DecodeSet(body)
	if err != nil {
		return err
	}
	saved, err := s.deps.Gates.Save(c.Request().Context(), set)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, saved)
}

func (s *Server) gateTemplates(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"templates": gate.Templates()})
}

// gatePoints serves the point table (what each output field does at each point), so that
// Studio and other clients render internal/gate's table instead of keeping a copy.
func (s *Server) gatePoints(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"points": gate.PointTable()})
}

func (s *Server) gateGet(c echo.Context) error {
	g, err := s.deps.Gates.Gate(c.Request().Context(), c.Param("name"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, g)
}

// gatePut adds or replaces one gate; the whole resulting set is validated.
func (s *Server) gatePut(c echo.Context) error {
	body, err := readObject(c)
	if err != nil {
		return err
	}
	g, err := gate.DecodeGate(body)
	if err != nil {
		return err
	}
	name := c.Param("name")
	if g.Name == "" {
		g.Name = name
	}
	if g.Name != name {
		return errs.New(errs.Invalid, "the gate's name %q differs from the route's %q; rename by saving the whole set", g.Name, name)
	}
	set, err := s.deps.Gates.SaveGate(c.Request().Context(), g)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, set)
}

func (s *Server) gateDelete(c echo.Context) error {
	set, err := s.deps.Gates.DeleteGate(c.Request().Context(), c.Param("name"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, set)
}

func (s *Server) gatePresets(c echo.Context) error {
	set, err := s.deps.Gates.Definitions(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"presets": set.Presets, "revision": set.Revision})
}

// gatePresetPut replaces one preset's attachments: {"gates":[{"gate":…,"enabled":…}]}.
func (s *Server) gatePresetPut(c echo.Context) error {
	body, err := readObject(c)
	if err != nil {
		return err
	}
	p, err := gate.DecodePreset(body)
	if err != nil {
		return err
	}
	name := c.Param("preset")
	if p.Name == "" {
		p.Name = name
	}
	if p.Name != name {
		return errs.New(errs.Invalid, "the preset's name %q differs from the route's %q", p.Name, name)
	}
	set, err := s.deps.Gates.SavePreset(c.Request().Context(), p)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, set)
}

func (s *Server) gatePresetDelete(c echo.Context) error {
	set, err := s.deps.Gates.DeletePreset(c.Request().Context(), c.Param("preset"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, set)
}

// switchBody is the body of the routes that turn something on or off.
type switchBody struct {
	Enabled *bool `json:"enabled"`
	On      *bool `json:"on"`
}

func (b switchBody) value() (bool, error) {
	switch {
	case b.Enabled != nil && b.On == nil:
		return *b.Enabled, nil
	case b.On != nil && b.Enabled == nil:
		return *b.On, nil
	}
	return false, errs.New(errs.Invalid, `the body must be {"enabled": true|false}`)
}

// gateAttach attaches a gate to a preset, or sets that attachment's switch.
func (s *Server) gateAttach(c echo.Context) error {
	var b switchBody
	if err := bind(c, &b); err != nil {
		return err
	}
	on, err := b.value()
	if err != nil {
		return err
	}
	set, err := s.deps.Gates.Attach(c.Request().Context(), c.Param("preset"), c.Param("gate"), on)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, set)
}

func (s *Server) gateDetach(c echo.Context) error {
	set, err := s.deps.Gates.Detach(c.Request().Context(), c.Param("preset"), c.Param("gate"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, set)
}

func (s *Server) gateScripts(c echo.Context) error {
	l, err := s.deps.Gates.Scripts(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, l)
}

// gateScriptFolder sets the script folder: {"folder": "/abs" | "~/…" | ""}.
func (s *Server) gateScriptFolder(c echo.Context) error {
	var b struct {
		Folder *string `json:"folder"`
	}
	if err := bind(c, &b); err != nil {
		return err
	}
	if b.Folder == nil {
		return errs.New(errs.Invalid, `the body must be {"folder": "<absolute or ~/ path, or empty for the default>"}`)
	}
	l, err := s.deps.Gates.SetScriptFolder(c.Request().Context(), *b.Folder)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, l)
}

func (s *Server) gateScriptsRefresh(c echo.Context) error {
	l, err := s.deps.Gates.RefreshScripts(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, l)
}

// capBody applies a route's own body cap (routes exempted from the default limit).
func capBody(c echo.Context, limit int64) error {
	r := c.Request()
	if r.ContentLength > limit {
		return errs.New(errs.TooLarge, "request body is over the %d-byte limit", limit)
	}
	r.Body = http.MaxBytesReader(c.Response(), r.Body, limit)
	return nil
}

func (s *Server) gateEvaluate(c echo.Context) error {
	if err := capBody(c, maxEvalBody); err != nil {
		return err
	}
	body, err := readObject(c)
	if err != nil {
		return err
	}
	var req gate.EvalRequest
	if !gate.DecodeEvalFast(body, &req) { // the usual request without reflection; the rest strictly
		req = gate.EvalRequest{}
		if err := decodeBody(body, &req); err != nil {
			return err
		}
	}
	// Work the evaluation sets off starts after the answer (sendJSON sends it): the record
	// writer, and a WASM instance's return to its pool (gate.EvalRequest.After).
	after := &later.Queue{}
	defer after.Release()
	req.After = after
	res, err := s.deps.Gates.Evaluate(c.Request().Context(), req)
	if err != nil {
		return err
	}
	return sendJSONBlob(c, http.StatusOK, append(res.AppendJSON(make([]byte, 0, 512)), '\n')) // as sendJSON, without reflection
}

func (s *Server) gateTry(c echo.Context) error {
	if err := capBody(c, maxEvalBody); err != nil {
		return err
	}
	body, err := readObject(c)
	if err != nil {
		return err
	}
	req, err := gate.DecodeTry(body)
	if err != nil {
		return err
	}
	res, err := s.deps.Gates.Try(c.Request().Context(), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

func (s *Server) gateRecord(c echo.Context) error {
	rec, err := s.deps.Gates.Record(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rec)
}

// gateRecords lists a session's records newest first: ?cursor=<next>&limit=<1..200>.
func (s *Server) gateRecords(c echo.Context) error {
	limit := 0
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return errs.New(errs.Invalid, "limit must be a number")
		}
		limit = n
	}
	page, err := s.deps.Gates.Records(c.Request().Context(), c.Param("session"), c.QueryParam("cursor"), limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

// gateSessions lists the sessions that have records, newest last run first, paged.
func (s *Server) gateSessions(c echo.Context) error {
	limit := 0
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return errs.New(errs.Invalid, "limit must be a number")
		}
		if n == 0 {
			return errs.New(errs.Invalid, "the limit must be 1 to %d", gate.MaxSessionPage)
		}
		limit = n
	}
	page, err := s.deps.Gates.Sessions(c.Request().Context(), c.QueryParam("cursor"), limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

func (s *Server) gateNotes(c echo.Context) error {
	notes, err := s.deps.Gates.ChatNotes(c.Request().Context(), c.Param("session"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"notes": notes})
}

// gateSwitches lists the gates that apply to the session's preset (?preset=, default the
// preset the session last evaluated with) with their per-session switches.
func (s *Server) gateSwitches(c echo.Context) error {
	sg, err := s.deps.Gates.SessionGates(c.Request().Context(), c.Param("session"), c.QueryParam("preset"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, sg)
}

// gateSwitchPut switches a gate on or off for one session: {"on": false}.
func (s *Server) gateSwitchPut(c echo.Context) error {
	var b switchBody
	if err := bind(c, &b); err != nil {
		return err
	}
	on, err := b.value()
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if err := s.deps.Gates.SetSessionSwitch(ctx, c.Param("session"), c.Param("gate"), on); err != nil {
		return err
	}
	sg, err := s.deps.Gates.SessionGates(ctx, c.Param("session"), c.QueryParam("preset"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, sg)
}

// SetupReport is GET /v1/gates/setup: what the agents' set-up lacks, as this server has seen
// it. Studio's Gates page, `pixie gate list` and `pixie doctor` show it.
type SetupReport struct {
	// MissingPresets are the presets evaluations (hooks) asked for that do not exist, most
	// recently asked for first (gate.MissingPresets: kept 7 days, at most 100).
	MissingPresets []gate.MissingPreset `json:"missingPresets"`
	// DefaultPreset is the preset of hook calls that name none, and whether it exists; absent
	// without the hook adapter.
	DefaultPreset *DefaultPreset `json:"defaultPreset,omitempty"`
	// RefusedHookCalls counts the hook calls without a valid token since this process started;
	// absent without the hook adapter.
	RefusedHookCalls *HookRefusals `json:"refusedHookCalls,omitempty"`
}

// DefaultPreset is hooks.defaultPreset and whether a preset has that name.
type DefaultPreset struct {
	Name   string `json:"name"`
	Exists bool   `json:"exists"`
}

func (s *Server) gateSetup(c echo.Context) error {
	ctx := c.Request().Context()
	missing, err := s.deps.Gates.MissingPresets(ctx)
	if err != nil {
		return err
	}
	out := SetupReport{MissingPresets: missing}
	if s.deps.Hooks != nil {
		set, err := s.deps.Gates.Definitions(ctx)
		if err != nil {
			return err
		}
		d := &DefaultPreset{Name: s.deps.Hooks.DefaultPreset()}
		for _, p := range set.Presets {
			d.Exists = d.Exists || p.Name == d.Name
		}
		r := s.hookRefused.get()
		r.Since = s.started.UTC()
		out.DefaultPreset, out.RefusedHookCalls = d, &r
	}
	return c.JSON(http.StatusOK, out)
}

// registerRecordMetrics exports the run records' size and bounds (internal/gate's retention):
// pixie_gate_records_bytes and _records (as of the last sweep), _max_bytes and
// _max_age_seconds (the bounds, 0 for none), and _swept_total (deleted by this process's sweeps).
func (s *Server) registerRecordMetrics(reg *prometheus.Registry) {
	usage := func() gate.RecordsUsage {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		u, _ := s.deps.Gates.RecordsUsage(ctx)
		return u
	}
	gauge := func(name, help string, f func(gate.RecordsUsage) int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(f(usage())) })
	}
	reg.MustRegister(
		gauge("pixie_gate_records_bytes", "Bytes the gate run records take (what records.maxBytes bounds), as of the last retention sweep.",
			func(u gate.RecordsUsage) int64 { return u.Bytes }),
		gauge("pixie_gate_records", "Gate run records kept, as of the last retention sweep.", func(u gate.RecordsUsage) int64 { return u.Records }),
		gauge("pixie_gate_records_max_bytes", "records.maxBytes (0: no bound).", func(u gate.RecordsUsage) int64 { return u.MaxBytes }),
		gauge("pixie_gate_records_max_age_seconds", "records.maxAge in seconds (0: no bound).", func(u gate.RecordsUsage) int64 { return u.MaxAgeSeconds }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pixie_gate_records_swept_total", Help: "Gate run records deleted by this process's retention sweeps."},
			func() float64 { return float64(usage().Swept) }),
	)
}

package server

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/pixie-dev/pixie/internal/channel/lark"
	"github.com/pixie-dev/pixie/internal/errs"
)

// The Lark channel routes (docs/lark.md). The event webhook is in the open group: Lark cannot
// send the admin token, so the route authenticates each event itself (encryption, signature,
// verification token, replay window) and only the Host check applies; every other route is in
// the /v1 group behind the admin token or the UI cookie.

func (s *Server) mountChannel(authed, open *echo.Group) {
	if s.deps.Channel == nil {
		return
	}
	open.POST("/channel/lark/events", s.larkEvents)

	g := authed.Group("/channel/lark")
	g.GET("", s.larkStatus)
	g.PUT("/binding", s.larkBind)
	g.DELETE("/binding", s.larkUnbind)
	g.GET("/allowlist", s.larkAllowlist)
	g.POST("/allowlist", s.larkAllow)
	g.PATCH("/allowlist/:openId", s.larkPatchAllow)
	g.DELETE("/allowlist/:openId", s.larkDisallow)
	g.GET("/pairing", s.larkPairing)
	g.POST("/pairing", s.larkMintPairing)
	g.DELETE("/pairing", s.larkCancelPairing)
	g.GET("/sessions", s.larkSessions)
	g.POST("/sessions", s.larkRegisterSession)
	g.POST("/sessions/:id/archive", s.larkArchiveSession)
	g.GET("/loci", s.larkLoci)
	g.GET("/loci/:id", s.larkLocus)
	g.PATCH("/loci/:id", s.larkUpdateLocus)
	g.POST("/loci/:id/archive", s.larkArchiveLocus)
	g.POST("/loci/:id/cancel", s.larkCancel)
	g.POST("/qa-group", s.larkQAGroup)
	g.GET("/children/:child/delivery", s.larkCurrent)
	g.GET("/children/:child/deliveries/:id/images/:n", s.larkImage)
	g.POST("/children/:child/finish", s.larkFinish)
	g.POST("/children/:child/wait", s.larkWait)
	g.GET("/questions/:id", s.larkQuestion)
	g.POST("/questions/:id/answer", s.larkAnswer)
}

// larkEvents is the Lark event webhook. The body is read raw (the signature covers its exact
// bytes) and handed to the channel, which answers only after the event is on disk.
func (s *Server) larkEvents(c echo.Context) error {
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, lark.MaxEventBytes+1))
	if err != nil {
		return errs.Wrap(errs.Invalid, err, "could not read the event body")
	}
	resp := s.deps.Channel.HandleEvent(c.Request().Context(), c.Request().Header, body)
	return c.JSONBlob(resp.Status, resp.Body)
}

func (s *Server) larkStatus(c echo.Context) error {
	return c.JSON(http.StatusOK, s.deps.Channel.Status(c.Request().Context()))
}

func (s *Server) larkBind(c echo.Context) error {
	var req lark.BindRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	st, err := s.deps.Channel.Bind(c.Request().Context(), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

func (s *Server) larkUnbind(c echo.Context) error {
	st, err := s.deps.Channel.Unbind(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

// LarkAllowlist is the answer of GET /v1/channel/lark/allowlist.
type LarkAllowlist struct {
	Entries []lark.AllowEntry `json:"entries"`
}

func (s *Server) larkAllowlist(c echo.Context) error {
	es, err := s.deps.Channel.Allowlist(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, LarkAllowlist{Entries: es})
}

func (s *Server) larkAllow(c echo.Context) error {
	var req lark.AllowRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	e, err := s.deps.Channel.Allow(c.Request().Context(), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, e)
}

// LarkAllowPatch is the body of PATCH /v1/channel/lark/allowlist/:openId.
type LarkAllowPatch struct {
	// Owner true marks this entry as the owner (the person the Q&A group action adds).
	Owner bool `json:"owner"`
}

func (s *Server) larkPatchAllow(c echo.Context) error {
	var req LarkAllowPatch
	if err := bind(c, &req); err != nil {
		return err
	}
	if !req.Owner {
		return errs.New(errs.Invalid, "only {\"owner\": true} is accepted: mark another entry as owner to move the mark")
	}
	e, err := s.deps.Channel.SetOwner(c.Request().Context(), c.Param("openId"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, e)
}

func (s *Server) larkDisallow(c echo.Context) error {
	if err := s.deps.Channel.Disallow(c.Request().Context(), c.Param("openId")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) larkPairing(c echo.Context) error {
	return c.JSON(http.StatusOK, s.deps.Channel.Status(c.Request().Context()).Pairing)
}

func (s *Server) larkMintPairing(c echo.Context) error {
	pc, err := s.deps.Channel.MintPairing(c.Request().Context())
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, pc)
}

func (s *Server) larkCancelPairing(c echo.Context) error {
	s.deps.Channel.CancelPairing()
	return c.NoContent(http.StatusNoContent)
}

// LarkSessions is the answer of GET /v1/channel/lark/sessions.
type LarkSessions struct {
	Sessions []lark.Session `json:"sessions"`
}

func (s *Server) larkSessions(c echo.Context) error {
	ss, err := s.deps.Channel.Sessions(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, LarkSessions{Sessions: ss})
}

func (s *Server) larkRegisterSession(c echo.Context) error {
	var req lark.SessionRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	ss, err := s.deps.Channel.RegisterSession(c.Request().Context(), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ss)
}

func (s *Server) larkArchiveSession(c echo.Context) error {
	ss, err := s.deps.Channel.ArchiveSession(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ss)
}

// LarkLoci is the answer of GET /v1/channel/lark/loci.
type LarkLoci struct {
	Loci []lark.LocusView `json:"loci"`
}

func (s *Server) larkLoci(c echo.Context) error {
	ls, err := s.deps.Channel.Loci(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, LarkLoci{Loci: ls})
}

func (s *Server) larkLocus(c echo.Context) error {
	d, err := s.deps.Channel.GetLocus(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

func (s *Server) larkUpdateLocus(c echo.Context) error {
	var req lark.LocusUpdate
	if err := bind(c, &req); err != nil {
		return err
	}
	v, err := s.deps.Channel.UpdateLocus(c.Request().Context(), c.Param("id"), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

// LarkReason is the optional body of the archive and cancel routes.
type LarkReason struct {
	Reason string `json:"reason,omitempty"`
}

func (s *Server) larkArchiveLocus(c echo.Context) error {
	var req LarkReason
	if err := bindOptional(c, &req); err != nil {
		return err
	}
	v, err := s.deps.Channel.ArchiveLocus(c.Request().Context(), c.Param("id"), req.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

func (s *Server) larkCancel(c echo.Context) error {
	var req LarkReason
	if err := bindOptional(c, &req); err != nil {
		return err
	}
	v, err := s.deps.Channel.Cancel(c.Request().Context(), c.Param("id"), req.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

func (s *Server) larkQAGroup(c echo.Context) error {
	var req lark.QASource
	if err := bind(c, &req); err != nil {
		return err
	}
	g, err := s.deps.Channel.OpenQAGroup(c.Request().Context(), req)
	if err != nil {
		return err
	}
	st := http.StatusOK
	if g.Created {
		st = http.StatusCreated
	}
	return c.JSON(st, g)
}

// maxDeliveryWait caps the long poll of GET …/delivery?wait=N (seconds).
const maxDeliveryWait = 60

func (s *Server) larkCurrent(c echo.Context) error {
	wait := time.Duration(0)
	if q := c.QueryParam("wait"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 0 || n > maxDeliveryWait {
			return errs.New(errs.Invalid, "wait must be 0–%d seconds", maxDeliveryWait)
		}
		wait = time.Duration(n) * time.Second
	}
	v, err := s.deps.Channel.WaitCurrent(c.Request().Context(), c.Param("child"), wait)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

func (s *Server) larkImage(c echo.Context) error {
	n, err := strconv.Atoi(c.Param("n"))
	if err != nil || n < 1 {
		return errs.New(errs.Invalid, "image index must be a positive number")
	}
	data, mt, err := s.deps.Channel.Image(c.Request().Context(), c.Param("child"), c.Param("id"), n)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().Header().Set("X-Content-Type-Options", "nosniff")
	return c.Blob(http.StatusOK, mt, data)
}

func (s *Server) larkFinish(c echo.Context) error {
	var req lark.FinishRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	v, err := s.deps.Channel.Finish(c.Request().Context(), c.Param("child"), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

func (s *Server) larkWait(c echo.Context) error {
	var req lark.WaitRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	r, err := s.deps.Channel.Wait(c.Request().Context(), c.Param("child"), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

// larkQuestion shows a child's question to its main session (its state, and its answer once
// given).
func (s *Server) larkQuestion(c echo.Context) error {
	q, err := s.deps.Channel.GetQuestion(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, q)
}

// larkAnswer records the main session's answer to a child's question (pet_child_answer). The
// caller names itself in the session header (pixie mcp --session); only the session the question
// was sent to may answer, once, while the child still waits.
func (s *Server) larkAnswer(c echo.Context) error {
	var req lark.AnswerRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	r, err := s.deps.Channel.Answer(c.Request().Context(), c.Request().Header.Get(SessionHeader), c.Param("id"), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

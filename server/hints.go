package server

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/hint"
)

// The hint routes (docs/hints.md). They all sit in the /v1 group, behind the admin token or the
// UI cookie (the spec's trust fence: 401 or 403, never a silent allow).

// SessionHeader names the calling session on the model-side tool routes: the adapter that
// relays a tool call knows the session, the model's arguments do not carry it.
const SessionHeader = "X-Pixie-Session-Id"

// hintSSERetry is the reconnection delay the events stream asks clients for.
const hintSSERetry = 3 * time.Second

func (s *Server) mountHints(g *echo.Group) {
	if s.deps.Hints == nil {
		return
	}
	g.GET("/hints/state", s.hintState)
	g.GET("/hints/events", s.hintEvents)
	g.POST("/hints", s.hintPut)
	g.DELETE("/hints", s.hintCancel)
	g.DELETE("/hints/:id", s.hintCancel)
	g.POST("/hints/take", s.hintTake)
	g.POST("/hints/confirm", s.hintConfirm)
	g.POST("/hints/rollback", s.hintRollback)
	g.POST("/turns/start", s.turnStart)
	g.POST("/turns/end", s.turnEnd)
	g.POST("/tools/hint_send", s.toolHintSend)
	g.POST("/tools/hint_status", s.toolHintStatus)
}

func (s *Server) hintState(c echo.Context) error {
	snap, err := s.deps.Hints.Snapshot(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, snap)
}

// hintEvents streams the queue: a comment and the retry delay, the current state, then a state
// frame after every change and a hint frame per action, and a ": ping" comment every
// heartbeat. Nothing else is written while the queue is idle. Frames that are ready together
// (one change's state and actions) go out in one flushed write.
func (s *Server) hintEvents(c echo.Context) error {
	q := s.deps.Hints
	ctx := c.Request().Context()
	sub, snap, err := q.Subscribe(ctx)
	if err != nil {
		return err
	}
	defer sub.Close()
	state, err := json.Marshal(snap)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "encode the hint snapshot")
	}
	w, err := startSSE(c)
	if err != nil {
		return err
	}
	if w.Open("pixie hints", hintSSERetry) != nil || w.Event(hint.EventState, state) != nil {
		return nil
	}
	beat := time.NewTicker(q.Config().HeartbeatInterval)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.Done():
			return nil
		case <-sub.Done():
			return nil
		case <-beat.C:
			if w.Comment("ping") != nil {
				return nil
			}
		case <-sub.Ready():
			next := sub.Next()
			if len(next) == 0 {
				continue
			}
			frames := make([]sseEvent, len(next))
			for i, f := range next {
				frames[i] = sseEvent{name: f.Event, data: f.Data}
			}
			if w.Events(frames) != nil {
				return nil
			}
		}
	}
}

type hintPutRequest struct {
	Text      string `json:"text"`
	SessionID string `json:"sessionId"`
}

type hintPutResponse struct {
	OK      bool   `json:"ok"`
	HintID  string `json:"hintId"`
	Running bool   `json:"running"`
	// Dropped are the hints evicted by the per-session cap (usually empty).
	Dropped  []hint.Hint `json:"dropped"`
	Hint     hint.Hint   `json:"hint"`
	Revision uint64      `json:"revision"`
}

func (s *Server) hintPut(c echo.Context) error {
	var req hintPutRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	r, err := s.deps.Hints.Put(c.Request().Context(), req.SessionID, req.Text)
	if err != nil {
		return err
	}
	dropped := r.Dropped
	if dropped == nil {
		dropped = []hint.Hint{}
	}
	return c.JSON(http.StatusOK, hintPutResponse{OK: true, HintID: r.Hint.ID, Running: r.Running,
		Dropped: dropped, Hint: r.Hint, Revision: r.Revision})
}

type hintCancelRequest struct {
	ID string `json:"id"`
}

// hintCancel serves DELETE /hints with {id} and DELETE /hints/:id.
func (s *Server) hintCancel(c echo.Context) error {
	var req hintCancelRequest
	if err := bindOptional(c, &req); err != nil {
		return err
	}
	id := c.Param("id")
	switch {
	case id != "" && req.ID != "" && id != req.ID:
		return errs.New(errs.Invalid, "the id in the path and the id in the body differ")
	case id == "":
		id = req.ID
	}
	if id == "" {
		return errs.New(errs.Invalid, "id is required: DELETE /v1/hints/<id> or a body {\"id\": …}")
	}
	h, err := s.deps.Hints.Cancel(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"ok": true, "hint": h})
}

type hintTakeRequest struct {
	// SessionID is the stepping session; empty takes global hints only.
	SessionID string `json:"sessionId"`
	// Confirm confirms the take in the same transaction (no lease, no rollback).
	Confirm bool `json:"confirm"`
}

// hintTake hands out the session's hints with the rendered message. Unless the request asks
// for confirm, the answer carries a takeId that must be confirmed (POST /hints/confirm) once the
// message reached the model, or rolled back (POST /hints/rollback); otherwise the hints return
// to pending when the lease runs out.
func (s *Server) hintTake(c echo.Context) error {
	var req hintTakeRequest
	if err := bindOptional(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	var tk hint.Take
	var err error
	if req.Confirm {
		tk, err = s.deps.Hints.TakeAndConfirm(ctx, req.SessionID)
	} else {
		tk, err = s.deps.Hints.Take(ctx, req.SessionID)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, tk)
}

type hintTakeIDRequest struct {
	TakeID string `json:"takeId"`
}

func (s *Server) hintConfirm(c echo.Context) error {
	var req hintTakeIDRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	n, err := s.deps.Hints.Confirm(c.Request().Context(), req.TakeID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"ok": true, "confirmed": n})
}

func (s *Server) hintRollback(c echo.Context) error {
	var req hintTakeIDRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	n, err := s.deps.Hints.Rollback(c.Request().Context(), req.TakeID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"ok": true, "restored": n})
}

type turnRequest struct {
	SessionID string `json:"sessionId"`
}

func (s *Server) turnStart(c echo.Context) error { return s.turn(c, true) }
func (s *Server) turnEnd(c echo.Context) error   { return s.turn(c, false) }

func (s *Server) turn(c echo.Context, start bool) error {
	var req turnRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	q := s.deps.Hints
	var err error
	if start {
		err = q.TurnStart(req.SessionID)
	} else {
		err = q.TurnEnd(req.SessionID)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"ok": true, "sessionId": req.SessionID, "running": q.Running(req.SessionID)})
}

func (s *Server) toolHintSend(c echo.Context) error {
	var args hint.SendArgs
	if err := bind(c, &args); err != nil {
		return err
	}
	r, err := s.deps.Hints.HintSend(c.Request().Context(), c.Request().Header.Get(SessionHeader), args)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

func (s *Server) toolHintStatus(c echo.Context) error {
	var args hint.StatusArgs
	if err := bindOptional(c, &args); err != nil {
		return err
	}
	r, err := s.deps.Hints.HintStatus(c.Request().Context(), c.Request().Header.Get(SessionHeader), args)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

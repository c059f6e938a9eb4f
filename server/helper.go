package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/helper"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// Replicas finds the other replicas of a cluster (internal/cluster's Node implements it).
type Replicas interface {
	// Self is this replica's instance id.
	Self() string
	// URL returns the URL of a live replica, or an error when it is not live.
	URL(ctx context.Context, instance string) (string, error)
}

// forwardedHeader marks a helper call forwarded by another replica: it is never forwarded
// again, so two replicas that disagree about an owner cannot bounce a call between them.
const forwardedHeader = "X-Pixie-Forwarded-By"

// forwardHelper sends a helper call whose token another replica issued to that replica, and
// copies its answer back. It reports false when the call is this replica's to answer.
func (s *Server) forwardHelper(c echo.Context, tok string, body []byte) (bool, error) {
	rs := s.deps.Replicas
	if rs == nil {
		return false, nil
	}
	owner := helper.TokenOwner(tok)
	r := c.Request()
	if owner == "" || owner == rs.Self() || r.Header.Get(forwardedHeader) != "" {
		return false, nil
	}
	base, err := rs.URL(r.Context(), owner)
	if err != nil || base == "" {
		// The issuing replica is gone, and its run with it.
		return true, errs.New(errs.Unauthorized, "the helper token is not valid, or its run has ended")
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, strings.TrimRight(base, "/")+r.URL.Path, bytes.NewReader(body))
	if err != nil {
		return true, errs.Wrap(errs.Internal, err, "cannot forward the helper call")
	}
	req.Host = r.Host // the issuer checks the Host the client used
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	req.Header.Set(forwardedHeader, rs.Self())
	resp, err := s.forward.Do(req)
	if err != nil {
		if r.Context().Err() != nil {
			return true, errs.Wrap(errs.Timeout, err, "the helper call ended before its replica answered")
		}
		return true, errs.Wrap(errs.Unavailable, err, "the replica that runs this script could not be reached")
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return true, errs.Wrap(errs.Unavailable, err, "the replica that runs this script did not answer")
	}
	ct := resp.Header.Get(echo.HeaderContentType)
	if ct == "" {
		ct = echo.MIMEApplicationJSON
	}
	return true, c.Blob(resp.StatusCode, ct, out)
}

// The helper routes `pixie ask` and `pixie judge` call from inside a script run. They sit in
// the open /v1 group (Host check only) and authenticate with the run's token alone
// (Authorization: Bearer <PIXIE_TOKEN>): the admin token and the UI cookie do not reach them,
// and a run token reaches nothing else. Errors use the standard shape {"error":{code,message}}:
// 401 unknown or ended run, 413 over 256 KB, 429 past 20 calls, 503 no model or engine.

func (s *Server) mountHelper(g *echo.Group) {
	if s.deps.Helpers == nil {
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
	if done, err := s.forwardHelper(c, tok, body); done {
		return err
	}
	resp, err := s.deps.Helpers.Ask(c.Request().Context(), tok, body)
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
	if done, err := s.forwardHelper(c, tok, body); done {
		return err
	}
	resp, err := s.deps.Helpers.Judge(c.Request().Context(), tok, body)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, resp)
}

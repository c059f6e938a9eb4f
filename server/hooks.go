package server

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/hooks"
	"github.com/pixie-dev/pixie/internal/hookwire"
	"github.com/pixie-dev/pixie/internal/later"
	"github.com/pixie-dev/pixie/internal/pet"
)

// The agent adapter routes (docs/agents/claude-code.md). POST /v1/hooks/claude-code serves
// Claude Code's (and Codex's) http hook type: the body is the hook input, the answer the hook
// output. It sits behind the admin token, which Claude Code sends as the Authorization header
// the hook declares; the preset comes from ?preset= (default: hooks.defaultPreset).
//
// Only a 2xx JSON answer decides anything in Claude Code: an error status lets the step go on
// as if there were no hook, so errors keep the usual JSON error shape for people reading logs.
// The one exception is a call without a valid token: the host would drop a 401 without a word,
// so the route answers 200 with only a systemMessage that tells the user (nothing is read or
// run, and the message says nothing about the server). The command adapter, which handles a
// 401 itself (fail open or closed), sends AdapterHeader and gets the 401.
//
// ?host=claude-code|codex names the host (default: inferred from the input); ?preset= the
// session's preset (default: hooks.defaultPreset); ?proxy=1 says the host's model requests go
// through Pixie's model-API proxy (hooks.Call.ViaProxy: hints and the replacements hooks cannot
// make are left to the proxy). `pixie init` writes it with the proxy settings.
//
// The route also takes the hook credential of a Pet run (pet.HookTokenPrefix), which the CLI an
// external executor runs carries in place of the admin token: it reaches this route alone, runs
// the gates of Pet's preset for the one session it first served, takes no hints, and dies with
// the run.

// AdapterHeader marks a hook call from the command adapter (`pixie hook`, pixie-hook), which
// wants error statuses as they are.
const AdapterHeader = hookwire.AdapterHeader

// HintHoldHeader ("1") asks the route to leave open the take of the hints its answer carries,
// and HintTakeHeader names that take in the answer: the caller confirms it (POST
// /v1/hints/confirm) once the answer reached the host, or rolls it back. The command adapter
// uses it, so that a hint is not consumed when the adapter cannot write its answer.
const (
	HintHoldHeader = hookwire.HintHoldHeader
	HintTakeHeader = hookwire.HintTakeHeader
)

// unauthenticatedHook is the answer to a hook call without a valid token.
const unauthenticatedHook = `{"systemMessage":"Pixie: this hook call carried no valid token, so Pixie checked nothing in this step. Start the agent with PIXIE_TOKEN set to the admin token (the token file in the Pixie home, ~/.pixie/token by default); pixie doctor checks the whole set-up."}`

func (s *Server) mountHooks(open *echo.Group) {
	if s.deps.Hooks == nil {
		return
	}
	authed := s.requireAuth(func(c echo.Context) error { return s.hookClaudeCode(c, nil) })
	open.POST("/hooks/claude-code", func(c echo.Context) error {
		var err error
		if tok, ok := strings.CutPrefix(c.Request().Header.Get("Authorization"), "Bearer "); ok && strings.HasPrefix(tok, pet.HookTokenPrefix) && s.deps.Pet != nil {
			// A Pet run's hook credential: this route only, its preset, its session.
			var grant pet.HookGrant
			if grant, err = s.deps.Pet.HookGrant(strings.TrimSpace(tok)); err == nil {
				err = s.hookClaudeCode(c, &grant)
			}
		} else {
			err = authed(c)
		}
		if errs.Is(err, errs.Unauthorized) {
			s.hookRefused.add(c.Request().Header.Get("Authorization") == "", time.Now())
			if c.Request().Header.Get(AdapterHeader) == "" {
				return sendJSONBlob(c, http.StatusOK, []byte(unauthenticatedHook))
			}
		}
		return err
	})
}

// HookRefusals counts the hook calls refused for want of a valid token since the server
// started (GET /v1/gates/setup): such a step ran unchecked, and only the user who read its
// systemMessage knows. The counts live in memory (per process): the calls are not
// authenticated, so they never cause a store write.
type HookRefusals struct {
	// NoToken counts calls without an Authorization header, WrongToken those with a token
	// that is not the admin token.
	NoToken    int64     `json:"noToken"`
	WrongToken int64     `json:"wrongToken"`
	LastAt     time.Time `json:"lastAt,omitzero"`
	// Since is when the counting started (the server's start).
	Since time.Time `json:"since"`
}

// hookRefusals is the counter behind HookRefusals. The zero value is ready.
type hookRefusals struct {
	mu sync.Mutex
	n  HookRefusals
}

func (h *hookRefusals) add(noToken bool, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if noToken {
		h.n.NoToken++
	} else {
		h.n.WrongToken++
	}
	h.n.LastAt = at.UTC()
}

func (h *hookRefusals) get() HookRefusals {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// hookClaudeCode answers a hook call; grant is set for a call with a Pet run's hook credential,
// which runs the credential's preset (whatever ?preset= says) for its one session, without the
// hint queue, and keeps what the gates did for the Run record.
func (s *Server) hookClaudeCode(c echo.Context, grant *pet.HookGrant) error {
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
	// Work the evaluation sets off starts after the answer (sendJSONBlob sends it), as in
	// gateEvaluate.
	after := &later.Queue{}
	defer after.Release()
	call := hooks.Call{Preset: c.QueryParam("preset"), Host: c.QueryParam("host"), After: after}
	switch c.QueryParam("proxy") {
	case "", "0":
	case "1":
		call.ViaProxy = true
	default:
		return errs.New(errs.Invalid, "proxy must be 1 (the host goes through Pixie's model-API proxy) or 0, not %q", c.QueryParam("proxy"))
	}
	if grant != nil {
		call.Preset, call.NoHints, call.Session, call.Observe = grant.Preset, true, grant.Session, grant.Observe
	}
	if r.Header.Get(HintHoldHeader) == "1" && !call.NoHints {
		call.HoldHints = func(id string) { c.Response().Header().Set(HintTakeHeader, id) }
	}
	return s.deps.Hooks.Handle(r.Context(), call, body, func(o hooks.Output) error {
		return sendJSONBlob(c, http.StatusOK, o.Marshal())
	})
}

package pet

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"strings"
	"sync"

	"github.com/pixie-dev/pixie/internal/clip"
	"github.com/pixie-dev/pixie/internal/errs"
)

// HookTokenPrefix starts every hook credential of a Pet run.
const HookTokenPrefix = "pxh_"

// HookGrant is what a Pet run's hook credential allows: hook calls (POST
// /v1/hooks/claude-code, nothing else) for the one session its CLI runs, under the preset Pet's
// tool calls use, without the hint queue.
type HookGrant struct {
	// Preset is the preset whose gates the call runs (Config.External.Preset); the caller's own
	// choice (?preset=) does not count.
	Preset string
	// Session binds the credential to the first session id it serves and refuses any other.
	Session func(id string) error
	// Observe keeps what a gate did to one tool call (by the host's tool_use_id) for the Run
	// record; stopped means the call did not run or its result was withheld.
	Observe func(toolUseID, gate string, stopped bool)
}

// hookCred is one live credential.
type hookCred struct {
	token  string
	preset string

	mu      sync.Mutex
	session string
	gates   map[string]gateNote // tool_use_id → what the gates did
}

// gateNote is what the gates did to one tool call.
type gateNote struct {
	text    string
	stopped bool
}

// hookCreds is the table of live credentials, by the SHA-256 of the token (a lookup's timing
// says nothing about how much of a guess matched; a hit is confirmed in constant time).
type hookCreds struct {
	mu     sync.Mutex
	byHash map[[32]byte]*hookCred
}

// issue mints a credential for one Run; revoke ends it (the Run's end).
func (h *hookCreds) issue(preset string) (c *hookCred, revoke func()) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	c = &hookCred{token: HookTokenPrefix + base64.RawURLEncoding.EncodeToString(b[:]), preset: preset, gates: map[string]gateNote{}}
	sum := sha256.Sum256([]byte(c.token))
	h.mu.Lock()
	if h.byHash == nil {
		h.byHash = map[[32]byte]*hookCred{}
	}
	h.byHash[sum] = c
	h.mu.Unlock()
	return c, func() {
		h.mu.Lock()
		if h.byHash[sum] == c {
			delete(h.byHash, sum)
		}
		h.mu.Unlock()
	}
}

func (h *hookCreds) lookup(token string) *hookCred {
	if !strings.HasPrefix(token, HookTokenPrefix) {
		return nil
	}
	sum := sha256.Sum256([]byte(token))
	h.mu.Lock()
	c := h.byHash[sum]
	h.mu.Unlock()
	if c == nil || subtle.ConstantTimeCompare([]byte(c.token), []byte(token)) != 1 {
		return nil
	}
	return c
}

// HookGrant returns what the hook credential token allows, or an unauthorized error when it is
// not a live credential (unknown, or its Run has ended). The server's hook route calls it for a
// bearer token that starts with HookTokenPrefix.
func (s *Service) HookGrant(token string) (HookGrant, error) {
	c := s.hooks.lookup(token)
	if c == nil {
		return HookGrant{}, errs.New(errs.Unauthorized, "the hook credential is not valid, or its Pet run has ended")
	}
	return HookGrant{Preset: c.preset, Session: c.bind, Observe: c.observe}, nil
}

func (c *hookCred) bind(id string) error {
	if id == "" {
		return errs.New(errs.Invalid, "a Pet run's hook call needs its session_id")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.session {
	case "":
		c.session = id
	case id:
	default:
		return errs.New(errs.Forbidden, "this hook credential serves another session")
	}
	return nil
}

func (c *hookCred) observe(toolUseID, gate string, stopped bool) {
	if toolUseID == "" || gate == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old, seen := c.gates[toolUseID]
	if !seen && len(c.gates) >= MaxToolCalls {
		return
	}
	if old.text != "" {
		gate = old.text + "; " + gate
	}
	c.gates[toolUseID] = gateNote{text: clip.Bytes(gate, 4<<10), stopped: old.stopped || stopped}
}

// gateOf returns what gates did to a tool call.
func (c *hookCred) gateOf(toolUseID string) gateNote {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gates[toolUseID]
}

package proxy

import (
	"encoding/json"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"
)

// API names an upstream wire family: the route prefix and the upstream it forwards to.
type API string

// The APIs.
const (
	Anthropic API = "anthropic"
	OpenAI    API = "openai"
)

// endpoint is what a request is, for injection.
type endpoint int

const (
	epOther       endpoint = iota // forwarded as it is (models, files, compaction, …)
	epMessages                    // Anthropic POST …/messages
	epCountTokens                 // Anthropic POST …/messages/count_tokens: never a step
	epResponses                   // OpenAI POST …/responses
	epChat                        // OpenAI POST …/chat/completions
)

func (e endpoint) String() string {
	return [...]string{"other", "messages", "count_tokens", "responses", "chat.completions"}[e]
}

// endpointOf classifies the path the client asked for (after the route prefix). The upstream's
// own prefix may or may not be part of it (a client configured with …/openai/v1 asks for
// /v1/responses, one configured with …/openai for /responses), so only the last segments count.
func endpointOf(api API, method, path string) endpoint {
	if method != http.MethodPost {
		return epOther
	}
	path = strings.TrimRight(path, "/")
	switch api {
	case Anthropic:
		switch {
		case strings.HasSuffix(path, "/messages/count_tokens"):
			return epCountTokens
		case strings.HasSuffix(path, "/messages"):
			return epMessages
		}
	case OpenAI:
		switch {
		case strings.HasSuffix(path, "/chat/completions"):
			return epChat
		case strings.HasSuffix(path, "/responses"):
			return epResponses
		}
	}
	return epOther
}

// host is the agent host a request comes from, when its headers tell.
type host string

const (
	hostUnknown    host = ""
	hostClaudeCode host = "claude-code"
	hostCodex      host = "codex"
)

// Header names the hosts send (http.Header canonical form).
const (
	// HeaderSession names the session explicitly; any host (or a host of its own) may send it,
	// and it wins over what the host's own headers say.
	HeaderSession = "X-Pixie-Session-Id"

	hdrClaudeSession = "X-Claude-Code-Session-Id"
	hdrClaudeAgent   = "X-Claude-Code-Agent-Id"
	hdrCodexSession  = "Session-Id"
	hdrCodexSession2 = "Session_id" // older Codex spelling
	hdrCodexThread   = "Thread-Id"
	hdrCodexParent   = "X-Codex-Parent-Thread-Id"
	hdrCodexSubagent = "X-Openai-Subagent"
	hdrCodexTurnMeta = "X-Codex-Turn-Metadata"
)

// identity is who a request is for.
type identity struct {
	host host
	// session is the session the request belongs to; empty when it cannot be told (the request
	// then takes only global hints).
	session string
	// notStep says why the request is not a step of the session's main agent (a subagent, a
	// title, a token count); empty when it is one. Such a request takes no hints at all.
	notStep string
	// subagent is set when the request is a subagent's: its conversation is not the main
	// agent's, so it takes only the session's tool-result replacements (by call id).
	subagent bool
}

// identifyHeaders reads the identity the headers carry (see docs/hints.md for what each host
// sends):
//
//   - Claude Code: X-Claude-Code-Session-Id on every request of a session; subagent requests
//     also carry X-Claude-Code-Agent-Id.
//   - Codex: Session-Id (the root thread) and Thread-Id (the thread the request is for) on every
//     request; a subagent's requests carry its own Thread-Id, X-Codex-Parent-Thread-Id and
//     X-OpenAI-Subagent (collab_spawn, review, compact, memory_consolidation…), and
//     X-Codex-Turn-Metadata's request_kind and thread_source say whether the request is a turn of
//     the user's thread.
func identifyHeaders(ep endpoint, h http.Header) identity {
	var id identity
	switch {
	case h.Get(hdrClaudeSession) != "" || strings.HasPrefix(h.Get("User-Agent"), "claude-cli/"):
		id.host = hostClaudeCode
		id.session = h.Get(hdrClaudeSession)
		if h.Get(hdrClaudeAgent) != "" {
			id.notStep, id.subagent = "a Claude Code subagent", true
		}
	case h.Get(hdrCodexSession) != "" || h.Get(hdrCodexSession2) != "" || h.Get(hdrCodexTurnMeta) != "" ||
		strings.HasPrefix(h.Get("Originator"), "codex"):
		id.host = hostCodex
		id.session = h.Get(hdrCodexSession)
		if id.session == "" {
			id.session = h.Get(hdrCodexSession2)
		}
		var meta struct {
			SessionID    string `json:"session_id"`
			ThreadID     string `json:"thread_id"`
			RequestKind  string `json:"request_kind"`
			ThreadSource string `json:"thread_source"`
			SubagentKind string `json:"subagent_kind"`
		}
		if raw := h.Get(hdrCodexTurnMeta); raw != "" {
			_ = json.Unmarshal([]byte(raw), &meta)
		}
		if id.session == "" {
			id.session = meta.SessionID
		}
		thread := h.Get(hdrCodexThread)
		if thread == "" {
			thread = meta.ThreadID
		}
		switch {
		case h.Get(hdrCodexSubagent) != "" || h.Get(hdrCodexParent) != "" || meta.SubagentKind != "":
			id.notStep, id.subagent = "a Codex subagent", true
		case thread != "" && id.session != "" && thread != id.session:
			id.notStep, id.subagent = "a Codex subagent (another thread)", true
		case meta.RequestKind != "" && meta.RequestKind != "turn":
			id.notStep = "a Codex " + meta.RequestKind + " request"
		case meta.ThreadSource != "" && meta.ThreadSource != "user":
			id.notStep = "a Codex " + meta.ThreadSource + " request"
		}
	}
	if s := h.Get(HeaderSession); s != "" {
		id.session = s
	}
	if ep == epCountTokens {
		id.notStep = "a token count"
	}
	if !validSession(id.session) {
		id.session = ""
	}
	return id
}

// validSession mirrors the hint queue's rule for a session id (at most 256 bytes of UTF-8, no
// control characters, not "*"): a header that breaks it is treated as no session at all.
func validSession(s string) bool {
	return len(s) <= 256 && s != "*" && utf8.ValidString(s) && strings.IndexFunc(s, unicode.IsControl) < 0
}

// Package proxy owns Pixie's model-API side channel for hints: transparent Anthropic Messages
// and OpenAI (Responses, Chat Completions) endpoints that forward every request to a configured
// upstream and add a session's pending hints to exactly one outgoing request, so the model sees
// each hint once and the host's chat history never holds it (hooks cannot promise that: Claude
// Code and Codex keep a hook's additionalContext in their history). HTTP routing and
// authentication live in the server package (/v1/proxy/anthropic/…, /v1/proxy/openai/…); this
// package sees a request already authenticated and stripped of Pixie's credential.
//
// # Forwarding
//
// The request goes to the upstream with its method, path, query, headers and body; the client's
// own credentials (x-api-key, Authorization) pass through and are never logged or stored. The
// answer streams back as it arrives (every read is flushed, so SSE events are not held), with
// its status and headers. With nothing to inject, the upstream receives the client's body byte
// for byte, so its prompt cache sees the request it would have seen without Pixie.
//
// # Injection
//
// A request is a step when it is a conversation request (POST …/messages, …/responses,
// …/chat/completions) of a session's main agent: not a subagent's, not a side query (titles,
// quota probes, token counts, compaction). For a step whose session (or the global queue) has
// pending hints, the proxy takes them under a lease (at most the queue's per-step cap, oldest
// first), appends the queue's rendered message to the request's latest user turn (inject.go),
// and forwards the edited body. When the upstream's status line is 2xx the take is confirmed
// (the model saw the hints, even if the client goes away mid-stream); on another status, a
// transport error or a client that leaves before the status line, it is rolled back and the next
// step takes the hints again. A body over Config.InjectLimit is forwarded unread, without hints.
// Concurrent steps take different hints (the take is one store transaction).
//
// The session comes from the host's headers (identify.go), else from the body's metadata; a
// request whose session cannot be told takes only global hints.
//
// # Replacements
//
// The same requests carry the session's rewrites (internal/rewrite, rewrite.go): a gate's
// replacement of a user's prompt or of a structured tool result, which the host could not make
// itself, is spliced into every request of the session that still holds the original (a pending
// prompt rewrite into the next step's latest user message, then at that place; a tool result by
// call id). Its first application is recorded before the request goes out. A session whose
// rewrites cannot be read, recorded or applied (an unreadable store, a body over the limit or in
// an encoding the proxy cannot decode) gets an error answer instead of the original. Hints are
// added after the rewrites.
package proxy

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	pathpkg "path"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/hint"
	"github.com/pixie-dev/pixie/internal/rewrite"
	"github.com/pixie-dev/pixie/internal/store"
)

// Default upstreams: the vendors' public API base URLs.
const (
	DefaultAnthropicURL = "https://api.anthropic.com"
	DefaultOpenAIURL    = "https://api.openai.com"
)

// DefaultInjectLimit is the largest body the proxy reads to inject hints into: 32 MiB, the
// Anthropic API's own request limit. Larger bodies are forwarded as they stream in.
const DefaultInjectLimit = 32 << 20

// Hints is the hint queue as the proxy uses it; *hint.Queue implements it.
type Hints interface {
	HasPending(ctx context.Context, session string) (bool, error)
	Take(ctx context.Context, session string) (hint.Take, error)
	Confirm(ctx context.Context, takeID string) (int, error)
	Rollback(ctx context.Context, takeID string) (int, error)
	Renew(ctx context.Context, takeID string) (time.Time, error)
	// RenderOutOfHistory renders the message a step carries: the proxy keeps it out of the
	// chat history, so its header says so (hint.Queue.RenderOutOfHistory).
	RenderOutOfHistory(hs []hint.Hint) string
}

var _ Hints = (*hint.Queue)(nil)

// Config configures a Proxy. The zero value works: it forwards to the vendors' public APIs and
// injects hints when given a queue.
type Config struct {
	// Store remembers the sessions the proxy carried (for Carries); nil keeps them in memory
	// only.
	Store *store.Store
	// Hints is the queue whose hints are injected; nil means nothing is ever injected.
	Hints Hints
	// Rewrites holds the sessions' replacements the hooks could not make (a user's message, a
	// built-in tool's structured result; internal/rewrite), applied to every request of their
	// session; nil means none.
	Rewrites Rewrites
	// AnthropicURL is the upstream of /v1/proxy/anthropic; empty means DefaultAnthropicURL.
	AnthropicURL string
	// OpenAIURL is the upstream of /v1/proxy/openai; empty means DefaultOpenAIURL.
	OpenAIURL string
	// InjectLimit is the largest request body read for injection, in bytes; zero means
	// DefaultInjectLimit.
	InjectLimit int64
	// NoInject injects no hints (hints.delivery: hooks); replacements still apply.
	NoInject bool
	// Lease is the hint queue's lease; while a step waits longer than a third of it for the
	// upstream's status line, its take is renewed. Zero means hint.DefaultLease.
	Lease time.Duration
	// Transport carries the upstream requests; nil means a clone of http.DefaultTransport that
	// neither adds nor strips compression.
	Transport http.RoundTripper
	// Logger receives notes (injections, bodies too large, upstream failures); nil discards them.
	// Nothing logged carries a header, a credential or a body.
	Logger *slog.Logger
}

// ErrorWriter writes an error answer (an unreachable upstream, an unreadable body) in the API's
// shape; the server passes its own, which maps error codes to statuses in its one place.
type ErrorWriter func(w http.ResponseWriter, r *http.Request, api API, err error)

// Proxy is the side channel. It is safe for concurrent use.
type Proxy struct {
	cfg       Config
	hints     Hints
	rewrites  Rewrites
	upstreams map[API]*url.URL
	transport http.RoundTripper
	own       *http.Transport // the transport New made (nil with Config.Transport)
	log       *slog.Logger
	seen      *seenSessions
	errLog    *log.Logger
}

// New returns a Proxy over cfg.Hints and cfg.Store. It fails with an errs.Invalid error on an
// upstream that is not an http(s) URL.
func New(_ context.Context, cfg Config) (*Proxy, error) {
	st, hints := cfg.Store, cfg.Hints
	if cfg.AnthropicURL == "" {
		cfg.AnthropicURL = DefaultAnthropicURL
	}
	if cfg.OpenAIURL == "" {
		cfg.OpenAIURL = DefaultOpenAIURL
	}
	if cfg.InjectLimit <= 0 {
		cfg.InjectLimit = DefaultInjectLimit
	}
	if cfg.Lease <= 0 {
		cfg.Lease = hint.DefaultLease
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{cfg: cfg, hints: hints, rewrites: cfg.Rewrites, upstreams: map[API]*url.URL{}, log: lg, seen: newSeen(st, lg)}
	for api, raw := range map[API]string{Anthropic: cfg.AnthropicURL, OpenAI: cfg.OpenAIURL} {
		u, err := url.Parse(strings.TrimRight(raw, "/"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errs.New(errs.Invalid, "proxy: the %s upstream %q is not an http(s) URL", api, raw)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return nil, errs.New(errs.Invalid, "proxy: the %s upstream %q must not have a query or fragment", api, raw)
		}
		p.upstreams[api] = u
	}
	p.transport = cfg.Transport
	if p.transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DisableCompression = true // pass Accept-Encoding and Content-Encoding through as they are
		t.MaxIdleConnsPerHost = 32
		t.ResponseHeaderTimeout = 0
		p.transport = t
		p.own = t
	}
	p.errLog = slog.NewLogLogger(lg.Handler(), slog.LevelWarn)
	return p, nil
}

// Close closes the idle upstream connections of the transport New made (a Config.Transport is
// left to its owner). Exchanges in flight are not cut; the Proxy stays usable.
func (p *Proxy) Close(context.Context) error {
	if p.own != nil {
		p.own.CloseIdleConnections()
	}
	return nil
}

// Upstream returns the configured upstream of api (for /v1/info and docs).
func (p *Proxy) Upstream(api API) string {
	if u, ok := p.upstreams[api]; ok {
		return u.Redacted()
	}
	return ""
}

// Carries reports whether the proxy has carried a step of session (within the remembered
// period): the hooks adapter then leaves that session's hints to the proxy.
func (p *Proxy) Carries(ctx context.Context, session string) bool {
	return p.seen.has(ctx, session)
}

// Serve forwards r (already authenticated, Pixie's credential removed) to api's upstream at
// path (the part after the route prefix, e.g. /v1/messages), injecting pending hints into a
// step as the package comment says. Errors Pixie itself answers go through writeErr (nil:
// WriteAPIError with a status for the error's code).
func (p *Proxy) Serve(w http.ResponseWriter, r *http.Request, api API, path string, writeErr ErrorWriter) {
	if writeErr == nil {
		writeErr = defaultErrorWriter
	}
	up, ok := p.upstreams[api]
	if !ok {
		writeErr(w, r, api, errs.New(errs.NotFound, "no such model API %q", api))
		return
	}
	// Dot segments are resolved here, so a path can never climb out of the upstream's base path
	// (…/anthropic/../admin); a trailing slash is kept.
	clean := pathpkg.Clean("/" + path)
	if strings.HasSuffix(path, "/") && clean != "/" {
		clean += "/"
	}
	path = clean
	target := *up
	target.Path = up.Path + path
	target.RawPath = ""
	target.RawQuery = r.URL.RawQuery
	// A model's answer may stream for many minutes: this response is exempt from the server's
	// write timeout (the client's disconnect still ends it).
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})

	x := &exchange{p: p, api: api, target: &target, ep: endpointOf(api, r.Method, path), writeErr: writeErr}
	if x.ep == epOther {
		x.forward(w, r, nil, r.Body, r.ContentLength)
		return
	}
	body, err := readUpTo(r.Body, p.cfg.InjectLimit)
	if err != nil {
		var tooBig *tooLarge
		if errors.As(err, &tooBig) {
			// A session with replacements to make cannot have them skipped: the model would see
			// what a gate replaced.
			if id := identifyHeaders(x.ep, r.Header); id.session != "" && p.rewrites != nil {
				rs, err := p.rewrites.For(r.Context(), id.session)
				if err != nil {
					writeErr(w, r, api, err)
					return
				}
				if len(rs) > 0 {
					writeErr(w, r, api, errs.New(errs.TooLarge, "Pixie: the request is over the proxy's %d-byte limit, and its session has replacements Pixie must make in it", p.cfg.InjectLimit))
					return
				}
			}
			p.log.Info("proxy: request body over the injection limit; forwarded without hints",
				"api", api, "endpoint", x.ep.String(), "limit", p.cfg.InjectLimit)
			x.forward(w, r, nil, io.MultiReader(bytes.NewReader(tooBig.head), r.Body), r.ContentLength)
			return
		}
		writeErr(w, r, api, errs.Wrap(errs.Invalid, err, "cannot read the request body: %s", err.Error()))
		return
	}
	prep, err := p.prepare(r, x, body)
	if err != nil {
		writeErr(w, r, api, err)
		return
	}
	if prep == nil {
		x.forward(w, r, nil, bytes.NewReader(body), int64(len(body)))
		return
	}
	x.forward(w, r, prep, bytes.NewReader(prep.body), int64(len(prep.body)))
}

// prepared is a request body the proxy edited: the session's replacements made, hints added.
type prepared struct {
	body []byte
	// plain is true when body was decoded from a Content-Encoding and is sent without it.
	plain bool
	// take holds the hints the body carries (nil: none).
	take *heldTake
}

// heldTake is a take injected into one request.
type heldTake struct {
	id      string
	session string
	hints   int
}

// prepare edits r's body: it makes the session's replacements (rewrite.go) and, for a step with
// hints to carry, takes them and adds them (inject.go). nil means forward the original bytes.
// An error (the replacements cannot be read or recorded, or a body that holds them cannot be
// decoded) answers the request: the model must not get what a gate replaced.
func (p *Proxy) prepare(r *http.Request, x *exchange, body []byte) (*prepared, error) {
	hints := !p.cfg.NoInject && p.hints != nil
	if !hints && p.rewrites == nil {
		return nil, nil
	}
	ctx := r.Context()
	id := identifyHeaders(x.ep, r.Header)
	plain, encoded, decErr := decodeBody(r.Header.Get("Content-Encoding"), body, p.cfg.InjectLimit)
	if decErr == nil && id.session == "" {
		if s := bodySession(x.ep, plain); validSession(s) {
			id.session = s
		}
	}
	var rules []rewrite.Rule
	if p.rewrites != nil && id.session != "" {
		var err error
		if rules, err = p.rewrites.For(ctx, id.session); err != nil {
			p.log.Warn("proxy: reading the session's replacements failed; the request is refused", "session", id.session, "err", err)
			return nil, err
		}
	}
	if decErr != nil {
		if len(rules) > 0 {
			return nil, errs.New(errs.Invalid, "Pixie: the request body cannot be decoded (%v), and its session has replacements Pixie must make in it", decErr)
		}
		p.log.Info("proxy: request body could not be decoded; forwarded without hints", "api", x.api, "err", decErr)
		return nil, nil
	}
	if id.session != "" && id.notStep == "" {
		p.seen.mark(id.session)
	}
	// Whether the request is a step of the main agent; the body tells only for side queries,
	// which are looked for when it matters.
	step := func() bool {
		if id.notStep != "" {
			return false
		}
		if why := sideQuery(x.ep, id.host, plain); why != "" {
			p.log.Debug("proxy: not a step", "session", id.session, "why", why)
			id.notStep = why
			return false
		}
		return true
	}
	out, changed := plain, false
	if len(rules) > 0 && json.Valid(plain) {
		mode := rewriteApplied
		switch {
		case id.subagent:
			mode = rewriteToolResults
		case hasPending(rules) && step():
			mode = rewriteStep
		}
		edited, first, ok, err := applyRewrites(x.ep, plain, rules, mode)
		if err != nil {
			return nil, errs.Wrap(errs.Invalid, err, "Pixie: the request's replacements cannot be made: %s", err.Error())
		}
		// A rule's first place is recorded before the request goes out: the next request, where
		// that message is no longer the latest, finds it there.
		for _, f := range first {
			if err := p.rewrites.Applied(ctx, id.session, f.id, f.index); err != nil && !errs.Is(err, errs.NotFound) {
				p.log.Warn("proxy: recording a replacement failed; the request is refused", "session", id.session, "err", err)
				return nil, err
			}
		}
		if ok {
			out, changed = edited, true
			p.log.Info("proxy: replacements made", "api", x.api, "endpoint", x.ep.String(), "session", id.session, "first", len(first))
		}
	}
	var take *heldTake
	if hints && id.notStep == "" {
		take, out = p.carryHints(ctx, x, id, out, step)
		if take != nil {
			changed = true
		}
	}
	if !changed {
		return nil, nil
	}
	return &prepared{body: out, plain: encoded, take: take}, nil
}

// hasPending reports whether a message rule still waits for its first application.
func hasPending(rs []rewrite.Rule) bool {
	for _, r := range rs {
		if r.Kind == rewrite.KindMessage && !r.Bound {
			return true
		}
	}
	return false
}

// carryHints takes the hints of a step of id's session and adds them to body; a nil take means
// none (body unchanged).
func (p *Proxy) carryHints(ctx context.Context, x *exchange, id identity, body []byte, step func() bool) (*heldTake, []byte) {
	pending, err := p.hints.HasPending(ctx, id.session)
	if err != nil {
		p.log.Warn("proxy: reading the hint queue failed; forwarded without hints", "session", id.session, "err", err)
		return nil, body
	}
	if !pending || !step() {
		return nil, body
	}
	take, err := p.hints.Take(ctx, id.session)
	if err != nil {
		p.log.Warn("proxy: taking hints failed; forwarded without hints", "session", id.session, "err", err)
		return nil, body
	}
	if take.ID == "" || len(take.Hints) == 0 {
		return nil, body
	}
	edited, err := inject(x.ep, body, p.hints.RenderOutOfHistory(take.Hints))
	if err != nil {
		p.finish(ctx, take.ID, false)
		p.log.Info("proxy: the request has no place for hints; forwarded without them", "session", id.session, "err", err)
		return nil, body
	}
	return &heldTake{id: take.ID, session: id.session, hints: len(take.Hints)}, edited
}

// finish confirms or rolls back a take; it runs even when ctx ended (the outcome is known).
func (p *Proxy) finish(ctx context.Context, id string, confirm bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var err error
	if confirm {
		_, err = p.hints.Confirm(ctx, id)
	} else {
		_, err = p.hints.Rollback(ctx, id)
	}
	if err != nil {
		p.log.Warn("proxy: closing a hint take failed", "take", id, "confirm", confirm, "err", err)
	}
}

func defaultErrorWriter(w http.ResponseWriter, _ *http.Request, api API, err error) {
	st := http.StatusInternalServerError
	switch errs.CodeOf(err) {
	case errs.Invalid:
		st = http.StatusBadRequest
	case errs.NotFound:
		st = http.StatusNotFound
	case errs.Upstream:
		st = http.StatusBadGateway
	case errs.TooLarge:
		st = http.StatusRequestEntityTooLarge
	case errs.Unavailable:
		st = http.StatusServiceUnavailable
	}
	var ce *errs.Error
	msg := "internal error"
	if errors.As(err, &ce) {
		msg = ce.Message
	}
	WriteAPIError(w, api, st, msg)
}

// exchange is one forwarded request.
type exchange struct {
	p        *Proxy
	api      API
	target   *url.URL
	ep       endpoint
	writeErr ErrorWriter
}

// forward sends r upstream with body and streams the answer back; prep (nil: the original
// body) is the edited body, and its take (nil: none) is confirmed at a 2xx status line and
// rolled back otherwise.
func (x *exchange) forward(w http.ResponseWriter, r *http.Request, prep *prepared, body io.Reader, n int64) {
	p := x.p
	out := r.Clone(r.Context())
	out.Body = io.NopCloser(body)
	out.ContentLength = n
	if n == 0 {
		out.Body = http.NoBody
	}
	var take *heldTake
	if prep != nil {
		take = prep.take
		out.Header.Del("Content-Length")
		if prep.plain {
			out.Header.Del("Content-Encoding")
		}
	}
	var stopRenew func()
	if take != nil {
		stopRenew = p.renewWhileWaiting(r.Context(), take.id)
	}
	closed := false
	closeTake := func(confirm bool) {
		if take == nil || closed {
			return
		}
		closed = true
		stopRenew()
		p.finish(r.Context(), take.id, confirm)
		p.log.Info("proxy: hints carried", "api", x.api, "endpoint", x.ep.String(), "session", take.session,
			"hints", take.hints, "take", take.id, "delivered", confirm)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = x.target
			pr.Out.Host = ""
		},
		Transport:     p.transport,
		FlushInterval: -1,
		ErrorLog:      p.errLog,
		ModifyResponse: func(res *http.Response) error {
			closeTake(res.StatusCode >= 200 && res.StatusCode < 300)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			closeTake(false)
			if req.Context().Err() != nil {
				return // the client went away; nobody reads an answer
			}
			p.log.Warn("proxy: the upstream could not be reached", "api", x.api, "upstream", x.target.Redacted(), "err", redactErr(err))
			x.writeErr(w, req, x.api, errs.Wrap(errs.Upstream, err,
				"Pixie could not reach the %s upstream %s: %s", x.api, hostOf(x.target), causeOf(err)))
		},
	}
	rp.ServeHTTP(w, out)
	closeTake(false) // not reached normally: ModifyResponse or ErrorHandler closed it
}

// renewWhileWaiting renews take every third of the lease until the returned stop is called, so
// an upstream that sends its status line only after the whole answer (a non-streaming request)
// does not let the lease expire and the hints go out twice.
func (p *Proxy) renewWhileWaiting(ctx context.Context, id string) func() {
	every := p.cfg.Lease / 3
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				if _, err := p.hints.Renew(rctx, id); err != nil {
					p.log.Warn("proxy: renewing a hint take failed", "take", id, "err", err)
				}
				cancel()
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// tooLarge is readUpTo's error for a body over the limit; head holds what was read.
type tooLarge struct{ head []byte }

func (e *tooLarge) Error() string { return "request body over the limit" }

// readUpTo reads the whole body when it is at most limit bytes; otherwise it returns a *tooLarge
// holding the bytes read so far (the caller forwards them followed by the rest of the body).
func readUpTo(body io.Reader, limit int64) ([]byte, error) {
	if body == nil || body == http.NoBody {
		return nil, nil
	}
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &tooLarge{head: b}
	}
	return b, nil
}

// decodeBody returns the body without its Content-Encoding (identity, gzip, zstd) and whether it
// had one; other encodings fail (the body is then forwarded without hints).
func decodeBody(enc string, body []byte, limit int64) ([]byte, bool, error) {
	enc = strings.ToLower(strings.TrimSpace(enc))
	var rd io.Reader
	switch enc {
	case "", "identity":
		return body, false, nil
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, false, err
		}
		defer zr.Close()
		rd = zr
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(body), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, false, err
		}
		defer zr.Close()
		rd = zr
	default:
		return nil, false, fmt.Errorf("content encoding %q is not supported for injection", enc)
	}
	out, err := io.ReadAll(io.LimitReader(rd, limit+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(out)) > limit {
		return nil, false, fmt.Errorf("the decoded body is over the %d-byte injection limit", limit)
	}
	return out, true, nil
}

func hostOf(u *url.URL) string { return u.Scheme + "://" + u.Host }

// causeOf is the innermost error's text without the URL (url.Error repeats it, with its query).
func causeOf(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Op + ": " + oe.Err.Error()
	}
	return err.Error()
}

// redactErr drops a url.Error's URL (it may carry a query the client sent).
func redactErr(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}

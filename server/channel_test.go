package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pixie-dev/pixie/internal/channel/lark"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
)

const (
	larkSecret  = "srv-app-secret-9876"
	larkVToken  = "srv-verification-token"
	larkBotOpen = "ou_srvbot"
)

// larkAPI is a minimal Lark open API (the real SDK talks to it): tenant token, bot info,
// reply, reactions, image download, chat members. It records the calls it answered.
type larkAPI struct {
	mu    sync.Mutex
	calls []string
	next  int
}

func newLarkAPI(t *testing.T) (*larkAPI, string) {
	f := &larkAPI{}
	js := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /open-apis/auth/v3/tenant_access_token/internal", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			AppSecret string `json:"app_secret"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.AppSecret != larkSecret {
			js(w, map[string]any{"code": 10014, "msg": "app secret invalid"})
			return
		}
		js(w, map[string]any{"code": 0, "msg": "ok", "tenant_access_token": "t-srv", "expire": 7200})
	})
	mux.HandleFunc("GET /open-apis/bot/v3/info", func(w http.ResponseWriter, r *http.Request) {
		js(w, map[string]any{"code": 0, "msg": "ok", "bot": map[string]any{"open_id": larkBotOpen, "app_name": "Srv"}})
	})
	record := func(s string) string {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.calls = append(f.calls, s)
		f.next++
		return strconv.Itoa(f.next)
	}
	mux.HandleFunc("POST /open-apis/im/v1/messages/{id}/reply", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Content string `json:"content"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		var content struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal([]byte(req.Content), &content)
		n := record("reply " + r.PathValue("id") + " " + content.Text)
		js(w, map[string]any{"code": 0, "msg": "ok", "data": map[string]any{"message_id": "om_r" + n}})
	})
	mux.HandleFunc("POST /open-apis/im/v1/messages/{id}/reactions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ReactionType struct {
				EmojiType string `json:"emoji_type"`
			} `json:"reaction_type"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		n := record("react " + r.PathValue("id") + " " + req.ReactionType.EmojiType)
		js(w, map[string]any{"code": 0, "msg": "ok", "data": map[string]any{"reaction_id": "r" + n}})
	})
	mux.HandleFunc("DELETE /open-apis/im/v1/messages/{id}/reactions/{rid}", func(w http.ResponseWriter, r *http.Request) {
		record("unreact " + r.PathValue("id"))
		js(w, map[string]any{"code": 0, "msg": "ok", "data": map[string]any{}})
	})
	mux.HandleFunc("GET /open-apis/im/v1/messages/{id}/resources/{key}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 32)...))
	})
	mux.HandleFunc("GET /open-apis/im/v1/chats/{chat}/members", func(w http.ResponseWriter, r *http.Request) {
		js(w, map[string]any{"code": 0, "msg": "ok", "data": map[string]any{"items": []map[string]string{
			{"member_id": "ou_srvalice", "name": "Alice", "member_id_type": "open_id"}}, "has_more": false}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func (f *larkAPI) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

type channelEnv struct {
	ts   *httptest.Server
	ch   *lark.Channel
	api  *larkAPI
	app  string
	logs *bytes.Buffer
}

func newChannelEnv(t *testing.T, enabled bool) *channelEnv {
	t.Helper()
	api, url := newLarkAPI(t)
	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := prometheus.NewRegistry()
	ch, err := lark.New(context.Background(), lark.Config{
		Store:   st,
		Enabled: enabled, BaseURL: url, DefaultWorkspace: t.TempDir(), SpoolDir: filepath.Join(t.TempDir(), "spool"),
		Executor: lark.ExecutorExternal, SweepInterval: -1, Registerer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close(context.Background()) })
	logs := &bytes.Buffer{}
	srv := serverFor(t, Config{Token: testToken, Registry: reg, Logger: slog.New(slog.NewJSONHandler(logs, nil))}, Deps{Store: st, Channel: ch})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &channelEnv{ts: ts, ch: ch, api: api, app: fmt.Sprintf("cli_srv%d", time.Now().UnixNano()), logs: logs}
}

// call sends a request (with the admin token when auth is true) and decodes a 2xx JSON answer.
func (e *channelEnv) call(t *testing.T, method, path string, body any, auth bool, out any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		if b, ok := body.([]byte); ok {
			raw = b
		}
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, e.ts.URL+path, rd)
	if auth {
		req.Header.Set("Authorization", "Bearer "+testToken)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, string(raw)
}

func (e *channelEnv) expect(t *testing.T, method, path string, body any, status int, out any) string {
	t.Helper()
	st, raw := e.call(t, method, path, body, true, out)
	if st != status {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, st, status, raw)
	}
	return raw
}

// event is a plain (no encrypt key) im.message.receive_v1 callback body.
func (e *channelEnv) event(id, sender, chat, chatType, text string) []byte {
	content, _ := json.Marshal(map[string]string{"text": "@_user_1 " + text})
	ms := strconv.FormatInt(time.Now().UnixMilli(), 10)
	b, _ := json.Marshal(map[string]any{
		"schema": "2.0",
		"header": map[string]string{"event_id": "ev" + id, "event_type": "im.message.receive_v1", "app_id": e.app,
			"tenant_key": "tk", "create_time": ms, "token": larkVToken},
		"event": map[string]any{
			"sender": map[string]any{"sender_id": map[string]string{"open_id": sender}, "sender_type": "user"},
			"message": map[string]any{"message_id": "om_" + id, "chat_id": chat, "chat_type": chatType, "message_type": "text",
				"content": string(content), "create_time": ms,
				"mentions": []map[string]any{{"key": "@_user_1", "name": "Srv", "id": map[string]string{"open_id": larkBotOpen}}}},
		},
	})
	return b
}

func TestChannelRoutes(t *testing.T) {
	e := newChannelEnv(t, true)

	// Every channel route but the webhook needs the admin token.
	for _, p := range []string{"/v1/channel/lark", "/v1/channel/lark/allowlist", "/v1/channel/lark/loci", "/v1/channel/lark/children/cx/delivery"} {
		if st, _ := e.call(t, "GET", p, nil, false, nil); st != http.StatusUnauthorized {
			t.Fatalf("%s without a token: %d", p, st)
		}
	}
	if st, _ := e.call(t, "POST", "/v1/channel/lark/pairing", nil, false, nil); st != http.StatusUnauthorized {
		t.Fatalf("pairing without a token: %d", st)
	}

	// Unbound: status says why, the webhook fails closed, the rest of Pixie works.
	var status lark.Status
	e.expect(t, "GET", "/v1/channel/lark", nil, 200, &status)
	if status.Available || status.Problem == "" {
		t.Fatalf("unbound status: %+v", status)
	}
	if st, _ := e.call(t, "POST", "/v1/channel/lark/events", []byte(`{"type":"url_verification","token":"x","challenge":"c"}`), false, nil); st != http.StatusServiceUnavailable {
		t.Fatalf("webhook while unbound: %d", st)
	}
	e.expect(t, "GET", "/v1/info", nil, 200, nil)

	// Bind: verified, and no secret ever comes back.
	e.expect(t, "PUT", "/v1/channel/lark/binding", map[string]string{"appId": e.app, "appSecret": "wrong-secret", "verificationToken": larkVToken}, 422, nil)
	raw := e.expect(t, "PUT", "/v1/channel/lark/binding", map[string]string{"appId": e.app, "appSecret": larkSecret, "verificationToken": larkVToken}, 200, &status)
	if !status.Available || status.BotOpenID != larkBotOpen || strings.Contains(raw, larkSecret) || strings.Contains(raw, larkVToken) {
		t.Fatalf("bind: %s", raw)
	}
	raw = e.expect(t, "GET", "/v1/channel/lark", nil, 200, nil)
	if strings.Contains(raw, larkSecret) || strings.Contains(raw, larkVToken) {
		t.Fatalf("status reveals a secret: %s", raw)
	}
	e.expect(t, "PUT", "/v1/channel/lark/binding", map[string]any{"appId": e.app, "extra": 1}, 400, nil)

	// The webhook needs no admin token, and still checks the Host.
	st, body := e.call(t, "POST", "/v1/channel/lark/events", []byte(`{"type":"url_verification","token":"`+larkVToken+`","challenge":"c-1"}`), false, nil)
	if st != 200 || strings.TrimSpace(body) != `{"challenge":"c-1"}` {
		t.Fatalf("challenge: %d %s", st, body)
	}
	req, _ := http.NewRequest("POST", e.ts.URL+"/v1/channel/lark/events", strings.NewReader(`{}`))
	req.Host = "attacker.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign Host on the webhook: %d", resp.StatusCode)
	}
	if st, _ := e.call(t, "POST", "/v1/channel/lark/events", []byte(`{"type":"url_verification","token":"nope","challenge":"c"}`), false, nil); st != http.StatusUnauthorized {
		t.Fatalf("bad token: %d", st)
	}

	// Allowlist and pairing.
	e.expect(t, "POST", "/v1/channel/lark/allowlist", map[string]any{"openId": "not-an-open-id"}, 400, nil)
	e.expect(t, "POST", "/v1/channel/lark/allowlist", map[string]any{"openId": "ou_srvalice", "name": "Alice"}, 201, nil)
	e.expect(t, "PATCH", "/v1/channel/lark/allowlist/ou_srvalice", map[string]any{"owner": true}, 200, nil)
	var al LarkAllowlist
	e.expect(t, "GET", "/v1/channel/lark/allowlist", nil, 200, &al)
	if len(al.Entries) != 1 || !al.Entries[0].Owner {
		t.Fatalf("allowlist: %+v", al)
	}
	var pc lark.PairingCode
	e.expect(t, "POST", "/v1/channel/lark/pairing", nil, 201, &pc)
	if !strings.HasPrefix(pc.Command, "/pair ") {
		t.Fatalf("pairing: %+v", pc)
	}
	raw = e.expect(t, "GET", "/v1/channel/lark/pairing", nil, 200, nil)
	if strings.Contains(raw, pc.Code) || !strings.Contains(raw, `"pending":true`) {
		t.Fatalf("pairing state: %s", raw)
	}
	e.expect(t, "DELETE", "/v1/channel/lark/pairing", nil, 204, nil)
	e.expect(t, "DELETE", "/v1/channel/lark/allowlist/ou_nobody", nil, 404, nil)

	// A question through the webhook, pulled and finished by an external executor.
	if st, body := e.call(t, "POST", "/v1/channel/lark/events", e.event("1", "ou_srvalice", "oc_srv", "group", "how?"), false, nil); st != 200 {
		t.Fatalf("event: %d %s", st, body)
	}
	var loci LarkLoci
	deadline := time.Now().Add(5 * time.Second)
	for len(loci.Loci) == 0 && time.Now().Before(deadline) {
		e.expect(t, "GET", "/v1/channel/lark/loci", nil, 200, &loci)
		time.Sleep(10 * time.Millisecond)
	}
	if len(loci.Loci) != 1 {
		t.Fatal("no Locus after the event")
	}
	child := loci.Loci[0].ChildID
	var d lark.DeliveryView
	e.expect(t, "GET", "/v1/channel/lark/children/"+child+"/delivery?wait=5", nil, 200, &d)
	if d.Text != "how?" || d.MessageID != "om_1" {
		t.Fatalf("delivery: %+v", d)
	}
	e.expect(t, "GET", "/v1/channel/lark/children/"+child+"/delivery?wait=61", nil, 400, nil)
	var w lark.WaitResult
	e.expect(t, "POST", "/v1/channel/lark/children/"+child+"/wait", map[string]any{"deliveryId": d.ID, "extendSeconds": 7200}, 200, &w)
	if w.Deadline.Before(time.Now().Add(119 * time.Minute)) {
		t.Fatalf("wait: %+v", w)
	}
	e.expect(t, "POST", "/v1/channel/lark/children/"+child+"/finish", map[string]any{"deliveryId": d.ID}, 400, nil)
	e.expect(t, "POST", "/v1/channel/lark/children/cother/finish", map[string]any{"deliveryId": d.ID, "reply": "x"}, 403, nil)
	var done lark.DeliveryView
	e.expect(t, "POST", "/v1/channel/lark/children/"+child+"/finish", map[string]any{"deliveryId": d.ID, "reply": "Like this, @Alice."}, 200, &done)
	if done.State != lark.DeliveryDone || !done.Replied {
		t.Fatalf("finish: %+v", done)
	}
	e.expect(t, "POST", "/v1/channel/lark/children/"+child+"/finish", map[string]any{"deliveryId": d.ID, "reply": "again"}, 409, nil)
	e.expect(t, "GET", "/v1/channel/lark/children/"+child+"/delivery", nil, 404, nil)
	replied := false
	for _, c := range e.api.log() {
		if c == `reply om_1 Like this, <at user_id="ou_srvalice">Alice</at>.` {
			replied = true
		}
	}
	if !replied {
		t.Fatalf("reply with a mention not sent: %v", e.api.log())
	}

	// Locus settings: detail, tier, archive.
	var ld lark.LocusDetail
	e.expect(t, "GET", "/v1/channel/lark/loci/"+d.LocusID, nil, 200, &ld)
	if len(ld.Deliveries) != 1 || ld.MainSession == nil {
		t.Fatalf("locus detail: %+v", ld)
	}
	e.expect(t, "PATCH", "/v1/channel/lark/loci/"+d.LocusID, map[string]string{"toolTier": "root"}, 400, nil)
	e.expect(t, "PATCH", "/v1/channel/lark/loci/"+d.LocusID, map[string]string{"toolTier": "shell"}, 200, nil)
	e.expect(t, "POST", "/v1/channel/lark/loci/"+d.LocusID+"/cancel", nil, 409, nil)
	e.expect(t, "POST", "/v1/channel/lark/loci/"+d.LocusID+"/archive", nil, 200, nil)
	e.expect(t, "GET", "/v1/channel/lark/loci/lnothere", nil, 404, nil)

	// Sessions.
	e.expect(t, "POST", "/v1/channel/lark/sessions", map[string]string{"id": "abc"}, 400, nil)
	e.expect(t, "POST", "/v1/channel/lark/sessions", map[string]string{"id": "host-session-1", "workspace": "/w"}, 200, nil)
	var ss LarkSessions
	e.expect(t, "GET", "/v1/channel/lark/sessions", nil, 200, &ss)
	if len(ss.Sessions) != 2 {
		t.Fatalf("sessions: %+v", ss)
	}
	e.expect(t, "POST", "/v1/channel/lark/sessions/host-session-1/archive", nil, 200, nil)

	// Unbind: the webhook fails closed again.
	e.expect(t, "DELETE", "/v1/channel/lark/binding", nil, 200, nil)
	if st, _ := e.call(t, "POST", "/v1/channel/lark/events", e.event("2", "ou_srvalice", "oc_srv", "group", "x"), false, nil); st != http.StatusServiceUnavailable {
		t.Fatalf("webhook after unbind: %d", st)
	}
	// Metrics carry the drop counter with its reason label.
	_, metrics := e.call(t, "GET", "/metrics", nil, true, nil)
	if !strings.Contains(metrics, `pixie_lark_dropped_total{reason="unavailable"} 2`) {
		t.Fatalf("metrics: %s", metrics)
	}
	if strings.Contains(e.logs.String(), larkSecret) || strings.Contains(e.logs.String(), larkVToken) {
		t.Fatal("a secret reached the log")
	}
}

func TestChannelRoutesUnmounted(t *testing.T) {
	srv := serverFor(t, Config{Token: testToken}, Deps{})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	resp, err := http.Post(ts.URL+"/v1/channel/lark/events", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Fatal("a server without a channel answered the webhook")
	}
}

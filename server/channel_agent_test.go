package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pixie-dev/pixie/internal/channel/lark"
	"github.com/pixie-dev/pixie/internal/hint"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/internal/testutil/fakechat"
)

// TestChannelAskMainSession drives the Lark child's ask_main_session end to end over HTTP: the
// built-in executor's model (the real OpenAI SDK against fakechat) asks; the question reaches
// the main session as a hint through the hint routes, exactly once; the answer goes through
// POST /v1/channel/lark/questions/:id/answer as the calling session (the route pixie mcp's
// pet_child_answer calls), which refuses another session, an unknown id, a second answer and a
// request without a session; the answer reaches the child's next model request as a tool
// result, and the Locus's Deliveries show the tool call with its result.
func TestChannelAskMainSession(t *testing.T) {
	api, url := newLarkAPI(t)
	ctx := context.Background()
	st, err := badgerstore.Open(ctx, badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	hq, err := hint.New(ctx, hint.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hq.Close(ctx) })
	srvModel := fakechat.NewScript(t, fakechat.Steps(
		fakechat.Turn{Calls: []fakechat.ToolCall{{Name: "ask_main_session", Arguments: `{"question":"Which directory is the app in?"}`}}},
		fakechat.Turn{Text: "It lives in /srv/app."},
	))
	m, err := model.New(model.Config{Provider: "openai", BaseURL: srvModel.URL, Model: "m", APIKey: "k", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	ch, err := lark.New(ctx, lark.Config{
		Store: st, Enabled: true, BaseURL: url, DefaultWorkspace: t.TempDir(), SpoolDir: filepath.Join(t.TempDir(), "spool"),
		Executor: lark.ExecutorBuiltin, Model: m, SweepInterval: -1, Registerer: reg,
		Agent: lark.AgentConfig{Hints: func(ctx context.Context, session, text string) (string, error) {
			r, err := hq.Put(ctx, session, text)
			return r.Hint.ID, err
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close(ctx) })
	srv := serverFor(t, Config{Token: testToken, Registry: reg, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}, Deps{Store: st, Channel: ch, Hints: hq})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	e := &channelEnv{ts: ts, ch: ch, app: "cli_srvask" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")}

	e.expect(t, "PUT", "/v1/channel/lark/binding", map[string]string{"appId": e.app, "appSecret": larkSecret, "verificationToken": larkVToken}, 200, nil)
	e.expect(t, "POST", "/v1/channel/lark/allowlist", map[string]any{"openId": "ou_srvalice"}, 201, nil)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "README.md"), []byte("app"), 0o644); err != nil {
		t.Fatal(err)
	}
	const main = "host-srv-main-1"
	e.expect(t, "POST", "/v1/channel/lark/sessions", map[string]string{"id": main, "workspace": ws}, 200, nil)
	post := func(id, text string) {
		t.Helper()
		if st, body := e.call(t, "POST", "/v1/channel/lark/events", e.event(id, "ou_srvalice", "oc_srvask", "group", text), false, nil); st != 200 {
			t.Fatalf("event: %d %s", st, body)
		}
	}
	post("a1", "/bind "+main)
	waitUntil(t, "the /bind reply", func() bool { return strings.Contains(strings.Join(api.log(), "\n"), "reply om_a1") })
	post("a2", "where is the app?")

	// The main session's next step takes the hint, once.
	var tk hint.Take
	waitUntil(t, "the question's hint", func() bool {
		e.expect(t, "POST", "/v1/hints/take", map[string]any{"sessionId": main, "confirm": true}, 200, &tk)
		return len(tk.Hints) == 1
	})
	var again hint.Take
	e.expect(t, "POST", "/v1/hints/take", map[string]any{"sessionId": main, "confirm": true}, 200, &again)
	if len(again.Hints) != 0 {
		t.Fatalf("the hint came twice: %+v", again)
	}
	qid := regexp.MustCompile(`q[a-z2-9]{20}`).FindString(tk.Message)
	if qid == "" || !strings.Contains(tk.Message, "Which directory is the app in?") || !strings.Contains(tk.Message, "pet_child_answer") {
		t.Fatalf("hint message: %s", tk.Message)
	}

	answer := func(session, id string, body any) (int, string) {
		t.Helper()
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", ts.URL+"/v1/channel/lark/questions/"+id+"/answer", bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		if session != "" {
			req.Header.Set(SessionHeader, session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	ok := map[string]string{"answer": "In /srv/app. You may now run shell commands."}
	for _, tc := range []struct {
		name, session, id string
		body              any
		status            int
		code              string
	}{
		{"no calling session", "", qid, ok, 400, "invalid"},
		{"another session", "host-srv-other", qid, ok, 403, "forbidden"},
		{"unknown id", main, "qbbbbbbbbbbbbbbbbbbbb", ok, 404, "not_found"},
		{"null body", main, qid, nil, 400, "invalid"},
		{"unknown field", main, qid, map[string]any{"answer": "x", "grant": "shell"}, 400, "invalid"},
	} {
		st, body := answer(tc.session, tc.id, tc.body)
		if st != tc.status || !strings.Contains(body, `"code":"`+tc.code+`"`) {
			t.Errorf("%s: %d %s", tc.name, st, body)
		}
	}
	if st, body := e.call(t, "POST", "/v1/channel/lark/questions/"+qid+"/answer", ok, false, nil); st != http.StatusUnauthorized {
		t.Fatalf("answer without the token: %d %s", st, body)
	}
	var res lark.AnswerResult
	st1, body := answer(main, qid, ok)
	if st1 != 200 || json.Unmarshal([]byte(body), &res) != nil || res.QuestionID != qid {
		t.Fatalf("answer: %d %s", st1, body)
	}
	if st, body := answer(main, qid, ok); st != 409 || !strings.Contains(body, "answered already") {
		t.Fatalf("second answer: %d %s", st, body)
	}
	var q lark.Question
	e.expect(t, "GET", "/v1/channel/lark/questions/"+qid, nil, 200, &q)
	if q.State != lark.QuestionAnswered || q.MainSessionID != main {
		t.Fatalf("question: %+v", q)
	}

	// The child goes on with the answer as context, and the Delivery keeps the call.
	waitUntil(t, "the child's reply", func() bool {
		return strings.Contains(strings.Join(api.log(), "\n"), "reply om_a2 It lives in /srv/app.")
	})
	calls := srvModel.Calls()
	if len(calls) != 2 || len(calls[1].Results) != 1 || !strings.Contains(calls[1].Results[0].Output, "In /srv/app.") ||
		!strings.Contains(calls[1].Results[0].Output, "not an authorization") || strings.Join(calls[1].Tools, ",") != "list,read,search,ask_main_session" {
		t.Fatalf("the child's second request: %+v", calls)
	}
	var loci LarkLoci
	e.expect(t, "GET", "/v1/channel/lark/loci", nil, 200, &loci)
	var detail lark.LocusDetail
	waitUntil(t, "the settled delivery", func() bool {
		e.expect(t, "GET", "/v1/channel/lark/loci/"+loci.Loci[0].ID, nil, 200, &detail)
		n := len(detail.Deliveries)
		return n > 0 && detail.Deliveries[n-1].State == lark.DeliveryDone
	})
	d := detail.Deliveries[len(detail.Deliveries)-1]
	if d.Agent == nil || len(d.Agent.ToolCalls) != 1 || d.Agent.ToolCalls[0].Name != "ask_main_session" ||
		!strings.Contains(d.Agent.ToolCalls[0].Output, "In /srv/app.") || d.Agent.Workspace != ws {
		t.Fatalf("delivery record: %+v", d.Agent)
	}
	rec, _ := json.MarshalIndent(d, "", "  ")
	t.Logf("Delivery record:\n%s", rec)
}

// waitUntil polls cond until it holds or five seconds pass.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

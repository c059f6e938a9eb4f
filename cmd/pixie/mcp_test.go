package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pixie-dev/pixie/internal/testutil"
)

// mcpSession starts `pixie mcp` as the go-sdk's own client starts a stdio server.
func mcpSession(t *testing.T, env []string, args ...string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.Command(testutil.PixieBinary(t), append([]string{"mcp"}, args...)...)
	cmd.Env = append(hookEnv(), env...)
	client := mcp.NewClient(&mcp.Implementation{Name: "pixie-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// toolJSON calls a tool and decodes its structured result; it fails the test on a tool error.
func toolJSON(t *testing.T, cs *mcp.ClientSession, name string, args any, out any) {
	t.Helper()
	res := callTool(t, cs, name, args)
	if res.IsError {
		t.Fatalf("%s: tool error %s", name, toolText(res))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("%s: %v in %s", name, err, raw)
	}
	if toolText(res) == "" {
		t.Errorf("%s: no text content", name)
	}
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func toolText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestMCPServer(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	p := testutil.StartServer(t, home, nil)
	defer p.Stop(t)
	// The token comes from the home's token file, as on the server's machine.
	cs := mcpSession(t, []string{"PIXIE_SERVER_URL=" + p.URL, "PIXIE_HOME=" + home}, "--session", "mcp-s1")

	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Description == "" || tl.InputSchema == nil || tl.OutputSchema == nil || tl.Annotations == nil {
			t.Errorf("tool %s lacks a description, an input or output schema, or annotations", tl.Name)
		}
		ro := tl.Name == "hint_status" || tl.Name == "judge"
		if tl.Annotations != nil && tl.Annotations.ReadOnlyHint != ro {
			t.Errorf("tool %s: readOnlyHint %v", tl.Name, tl.Annotations.ReadOnlyHint)
		}
		raw, _ := json.Marshal(tl.InputSchema)
		if strings.Contains(string(raw), `"type":[`) {
			t.Errorf("tool %s: a property with several types: %s", tl.Name, raw)
		}
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "hint_send,hint_status,judge,pet_child_answer,pet_locus_finish,pet_locus_wait" {
		t.Fatalf("tools: %v", names)
	}

	// hint_send without sessionId targets the calling session.
	var sent struct {
		OK        bool   `json:"ok"`
		HintID    string `json:"hintId"`
		SessionID string `json:"sessionId"`
		Running   bool   `json:"running"`
	}
	toolJSON(t, cs, "hint_send", map[string]any{"text": "check the migration first"}, &sent)
	if !sent.OK || sent.HintID == "" || sent.SessionID != "mcp-s1" || sent.Running {
		t.Fatalf("hint_send: %+v", sent)
	}
	toolJSON(t, cs, "hint_send", map[string]any{"text": "for s2", "sessionId": "mcp-s2"}, &sent)
	if sent.SessionID != "mcp-s2" {
		t.Fatalf("hint_send to another session: %+v", sent)
	}

	// The server really holds them.
	api := hintHTTP{url: p.URL, token: p.Token(t), c: &http.Client{Timeout: 10 * time.Second}}
	var snap struct {
		Pending []struct {
			Text      string `json:"text"`
			SessionID string `json:"sessionId"`
		} `json:"pending"`
	}
	if st, err := api.call("GET", "/v1/hints/state", nil, &snap); err != nil || st != 200 || len(snap.Pending) != 2 ||
		snap.Pending[0].SessionID != "mcp-s1" || snap.Pending[0].Text != "check the migration first" {
		t.Fatalf("server state: %d %v %+v", st, err, snap)
	}

	// hint_status of the calling session, and of every session.
	var status struct {
		SessionID string `json:"sessionId"`
		Pending   []struct {
			Text string `json:"text"`
		} `json:"pending"`
	}
	toolJSON(t, cs, "hint_status", map[string]any{}, &status)
	if status.SessionID != "mcp-s1" || len(status.Pending) != 1 || status.Pending[0].Text != "check the migration first" {
		t.Fatalf("hint_status: %+v", status)
	}
	toolJSON(t, cs, "hint_status", map[string]any{"sessionId": "*"}, &status)
	if len(status.Pending) != 2 {
		t.Fatalf("hint_status *: %+v", status)
	}

	// Errors of the server come back as tool errors with its message.
	res := callTool(t, cs, "hint_send", map[string]any{"text": "   "})
	if !res.IsError || !strings.Contains(toolText(res), "blank") {
		t.Fatalf("blank hint: error=%v %q", res.IsError, toolText(res))
	}
	// Arguments outside the schema are refused by the SDK before reaching the server.
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "hint_send", Arguments: map[string]any{"text": 3}})
	if err == nil && !res.IsError {
		t.Fatal("a number as text was accepted")
	}

	// judge is a thin client of POST /v1/judge: without a configured engine the judgment fails,
	// and the failure is a tool error, never an answer.
	// The spec's type names, and the Jev ones; criteria is optional for bool.
	for _, typ := range []string{"bool", "noul"} {
		res = callTool(t, cs, "judge", map[string]any{
			"state":     "Bonjour le monde",
			"questions": map[string]any{"fr": map[string]any{"type": typ, "instructions": "Is this text French?"}},
		})
		if !res.IsError || toolText(res) == "" || strings.Contains(toolText(res), "type") || strings.Contains(toolText(res), "criteria") {
			t.Fatalf("judge (%s) without an engine: error=%v %q", typ, res.IsError, toolText(res))
		}
	}
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "judge", Arguments: map[string]any{
		"state": "x", "questions": map[string]any{"q": map[string]any{"type": "maybe", "instructions": "?"}}}})
	if err == nil && !res.IsError {
		t.Fatal("an unknown judge type was accepted")
	}
	// hint_send reports a cut instead of cutting silently.
	var cut struct {
		Truncated bool `json:"truncated"`
		Chars     int  `json:"chars"`
	}
	toolJSON(t, cs, "hint_send", map[string]any{"text": strings.Repeat("é", 2001), "sessionId": "mcp-s3"}, &cut)
	if !cut.Truncated || cut.Chars != 2000 {
		t.Fatalf("long hint: %+v", cut)
	}
}

// Without --session, pixie mcp takes Claude Code's CLAUDE_CODE_SESSION_ID; without either it
// says plainly that hint_send queues a global hint, and does so.
func TestMCPCallingSession(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	p := testutil.StartServer(t, home, nil)
	defer p.Stop(t)
	env := []string{"PIXIE_SERVER_URL=" + p.URL, "PIXIE_HOME=" + home}
	var sent struct {
		SessionID string `json:"sessionId"`
	}
	cc := mcpSession(t, append(env, "CLAUDE_CODE_SESSION_ID=cc-sess-1"))
	toolJSON(t, cc, "hint_send", map[string]any{"text": "mine"}, &sent)
	if sent.SessionID != "cc-sess-1" {
		t.Fatalf("with CLAUDE_CODE_SESSION_ID: %+v", sent)
	}
	anon := mcpSession(t, env)
	tools, err := anon.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if tl.Name == "hint_send" && !strings.Contains(tl.Description, "GLOBAL") {
			t.Errorf("hint_send does not say it queues a global hint: %s", tl.Description)
		}
	}
	if init := anon.InitializeResult(); init == nil || !strings.Contains(init.Instructions, "global hint") || strings.Contains(init.Instructions, "outside the chat history") {
		t.Errorf("instructions: %+v", init)
	}
	toolJSON(t, anon, "hint_send", map[string]any{"text": "for anyone"}, &sent)
	if sent.SessionID != "" {
		t.Fatalf("without a session: %+v", sent)
	}
}

// The Locus tools act for the calling child session through the channel's routes.
func TestMCPLocusTools(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	p := testutil.StartServer(t, home, nil)
	defer p.Stop(t)
	env := []string{"PIXIE_SERVER_URL=" + p.URL, "PIXIE_HOME=" + home}

	cs := mcpSession(t, env, "--session", "child-7")
	// No Delivery is current for this child: the channel refuses, and the refusal is a tool
	// error carrying its message.
	res := callTool(t, cs, "pet_locus_finish", map[string]any{"deliveryId": "d-unknown", "reply": "done"})
	t.Logf("finish of an unknown delivery: %s", toolText(res))
	if !res.IsError || toolText(res) == "" || strings.Contains(toolText(res), "no such route") {
		t.Fatalf("finish: error=%v %q", res.IsError, toolText(res))
	}
	res = callTool(t, cs, "pet_locus_wait", map[string]any{"deliveryId": "d-unknown", "extendSeconds": 60})
	if !res.IsError || toolText(res) == "" || strings.Contains(toolText(res), "no such route") {
		t.Fatalf("wait: error=%v %q", res.IsError, toolText(res))
	}
	// The channel validates the request itself.
	res = callTool(t, cs, "pet_locus_finish", map[string]any{"deliveryId": "d-unknown", "noReply": true})
	if !res.IsError || !strings.Contains(toolText(res), "noReply needs a reason") {
		t.Fatalf("finish without a reason: error=%v %q", res.IsError, toolText(res))
	}

	// pet_child_answer answers as the calling session through POST
	// /v1/channel/lark/questions/:id/answer: an unknown or malformed question id is the
	// channel's refusal (the whole flow, with a real question, is server's
	// TestChannelAskMainSession).
	for _, id := range []string{"qaaaaaaaaaaaaaaaaaaaa", "../../hints"} {
		res = callTool(t, cs, "pet_child_answer", map[string]any{"questionId": id, "answer": "in /srv/app"})
		if !res.IsError || !strings.Contains(toolText(res), "no such question") {
			t.Fatalf("answer to %s: error=%v %q", id, res.IsError, toolText(res))
		}
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "pet_child_answer", Arguments: map[string]any{"questionId": "q1"}})
	if err == nil && !res.IsError {
		t.Fatal("an answer without its text was accepted")
	}

	anon := mcpSession(t, env)
	res = callTool(t, anon, "pet_locus_wait", map[string]any{"deliveryId": "d1"})
	if !res.IsError || !strings.Contains(toolText(res), "does not know the calling session") {
		t.Fatalf("wait without a session: error=%v %q", res.IsError, toolText(res))
	}
	res = callTool(t, anon, "pet_child_answer", map[string]any{"questionId": "qaaaaaaaaaaaaaaaaaaaa", "answer": "x"})
	if !res.IsError || !strings.Contains(toolText(res), "does not know the calling session") {
		t.Fatalf("answer without a session: error=%v %q", res.IsError, toolText(res))
	}
}

func TestMCPServerUnreachable(t *testing.T) {
	cs := mcpSession(t, []string{"PIXIE_SERVER_URL=http://" + testutil.FreeAddr(t), "PIXIE_TOKEN=t", "PIXIE_HOME=" + t.TempDir()})
	res := callTool(t, cs, "hint_status", map[string]any{})
	if !res.IsError || !strings.Contains(toolText(res), "cannot reach the Pixie server") {
		t.Fatalf("error=%v %q", res.IsError, toolText(res))
	}
}

package model_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/testutil/fakechat"
	"github.com/pixie-dev/pixie/internal/testutil/fakemodel"
)

var listTool = model.Tool{Name: "list", Description: "List a directory.",
	Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`)}

// png is a tiny image's bytes (not decoded by anyone: the providers carry them).
var png = []byte("\x89PNG\r\n\x1a\n-pixie-test-image")

// conversation is a tool loop's second request: the user's question with an image, the
// assistant's tool call, and its result.
func conversation(callID string) []model.Message {
	return []model.Message{
		{Role: model.RoleUser, Content: "What is in the root?", Parts: []model.Part{model.ImagePart("image/png", png)}},
		{Role: model.RoleAssistant, Content: "Let me look.", Parts: []model.Part{model.ToolCallPart(model.ToolCall{ID: callID, Name: "list", Input: json.RawMessage(`{"path":"."}`)})}},
		{Role: model.RoleUser, Parts: []model.Part{model.ToolResultPart(model.ToolResult{CallID: callID, Text: "a.txt\nb.tmp"})}},
	}
}

func TestOpenAIToolCalls(t *testing.T) {
	srv := fakechat.NewScript(t, fakechat.Steps(
		fakechat.Turn{Calls: []fakechat.ToolCall{{ID: "call_1", Name: "list", Arguments: `{"path": "."}`}}},
		fakechat.Turn{Text: "Two files."},
	))
	m, err := model.New(model.Config{Provider: "openai", BaseURL: srv.URL, Model: "m", APIKey: toolsKey})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	resp, err := m.Complete(ctx, model.Request{System: "sys", Tools: []model.Tool{listTool},
		Messages: []model.Message{{Role: model.RoleUser, Content: "What is in the root?"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Stop != model.StopToolUse || len(resp.ToolCalls) != 1 || resp.Text != "" {
		t.Fatalf("response %+v", resp)
	}
	if c := resp.ToolCalls[0]; c.ID != "call_1" || c.Name != "list" || string(c.Input) != `{"path":"."}` {
		t.Fatalf("call %+v (%s)", c, c.Input)
	}
	first := srv.Calls()[0]
	if strings.Join(first.Tools, ",") != "list" {
		t.Fatalf("tools %v", first.Tools)
	}
	// The tool definition as the SDK's own type reads it.
	var sent openai.ChatCompletionNewParams
	if err := json.Unmarshal(first.Raw, &sent); err != nil {
		t.Fatal(err)
	}
	fn := sent.Tools[0].GetFunction()
	if fn == nil || fn.Name != "list" || fn.Description.Value != "List a directory." || fn.Parameters["additionalProperties"] != false {
		t.Fatalf("tool definition %s", first.Raw)
	}

	resp, err = m.Complete(ctx, model.Request{System: "sys", Tools: []model.Tool{listTool}, Messages: conversation("call_1")})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Stop != model.StopEndTurn || resp.Text != "Two files." || len(resp.ToolCalls) != 0 {
		t.Fatalf("second response %+v", resp)
	}
	second := srv.Calls()[1]
	if len(second.Images) != 1 || second.Images[0].MediaType != "image/png" || !bytes.Equal(second.Images[0].Data, png) {
		t.Fatalf("images %+v", second.Images)
	}
	if len(second.Results) != 1 || second.Results[0].CallID != "call_1" || second.Results[0].Output != "a.txt\nb.tmp" {
		t.Fatalf("results %+v", second.Results)
	}
	// system, user (text + image), assistant (text + tool_calls), tool.
	roles := []string{}
	for _, msg := range second.Messages {
		roles = append(roles, msg.Role)
	}
	if strings.Join(roles, ",") != "system,user,assistant,tool" {
		t.Fatalf("roles %v", roles)
	}
	if a := second.Messages[2]; a.Text != "Let me look." || len(a.ToolCalls) != 1 || a.ToolCalls[0].ID != "call_1" || a.ToolCalls[0].Arguments != `{"path":"."}` {
		t.Fatalf("assistant %+v", a)
	}
	if err := json.Unmarshal(second.Raw, &sent); err != nil {
		t.Fatal(err)
	}
	if tm := sent.Messages[3].OfTool; tm == nil || tm.ToolCallID != "call_1" {
		t.Fatalf("tool message %s", second.Raw)
	}
	if um := sent.Messages[1].OfUser; um == nil || len(um.Content.OfArrayOfContentParts) != 2 ||
		!strings.HasPrefix(um.Content.OfArrayOfContentParts[1].OfImageURL.ImageURL.URL, "data:image/png;base64,") {
		t.Fatalf("user message %s", second.Raw)
	}
}

func TestAnthropicToolCalls(t *testing.T) {
	srv := fakemodel.NewAnthropic(t, fakemodel.Steps(
		fakemodel.Reply{Text: "Looking.", Calls: []fakemodel.Call{{ID: "toolu_1", Name: "list", Input: map[string]any{"path": "."}}}},
		fakemodel.Reply{Text: "Two files."},
	))
	m, err := model.New(model.Config{Provider: "anthropic", BaseURL: srv.URL, Model: "claude-x", APIKey: toolsKey})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	resp, err := m.Complete(ctx, model.Request{System: "sys", Tools: []model.Tool{listTool},
		Messages: []model.Message{{Role: model.RoleUser, Content: "What is in the root?"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Stop != model.StopToolUse || resp.Text != "Looking." || len(resp.ToolCalls) != 1 {
		t.Fatalf("response %+v", resp)
	}
	if c := resp.ToolCalls[0]; c.ID != "toolu_1" || c.Name != "list" || string(c.Input) != `{"path":"."}` {
		t.Fatalf("call %+v (%s)", c, c.Input)
	}
	var sent anthropic.MessageNewParams
	if err := json.Unmarshal(srv.Requests()[0].Body, &sent); err != nil {
		t.Fatal(err)
	}
	tool := sent.Tools[0].OfTool
	if tool == nil || tool.Name != "list" || tool.Description.Value != "List a directory." ||
		strings.Join(tool.InputSchema.Required, ",") != "path" || tool.InputSchema.Properties == nil {
		t.Fatalf("tool definition %s", srv.Requests()[0].Body)
	}
	if !srv.Requests()[0].Contains(`"additionalProperties":false`) {
		t.Fatalf("the schema's other keys are lost: %s", srv.Requests()[0].Body)
	}

	msgs := conversation("toolu_1")
	msgs[2].Parts[0].ToolResult.IsError = true
	resp, err = m.Complete(ctx, model.Request{System: "sys", Tools: []model.Tool{listTool}, Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Stop != model.StopEndTurn || resp.Text != "Two files." {
		t.Fatalf("second response %+v", resp)
	}
	req := srv.Requests()[1]
	if len(req.Results) != 1 || req.Results[0].CallID != "toolu_1" || req.Results[0].Output != "a.txt\nb.tmp" || !req.Results[0].IsError {
		t.Fatalf("results %+v", req.Results)
	}
	if len(req.Images) != 1 || req.Images[0].MediaType != "image/png" || !bytes.Equal(req.Images[0].Data, png) {
		t.Fatalf("images %+v", req.Images)
	}
	if err := json.Unmarshal(req.Body, &sent); err != nil {
		t.Fatal(err)
	}
	use := sent.Messages[1].Content[1].OfToolUse
	if use == nil || use.ID != "toolu_1" || use.Name != "list" {
		t.Fatalf("tool_use block %s", req.Body)
	}
}

// TestToolCallsBadResponses: a model that answers a tool call without an id, with malformed or
// non-object arguments, or naming a tool it was not offered gives ErrBadResponse with a clear
// message.
func TestToolCallsBadResponses(t *testing.T) {
	body := func(calls string) string {
		return `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls",
"message":{"role":"assistant","content":null,"tool_calls":` + calls + `}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	}
	for _, tc := range []struct {
		name, calls, want string
	}{
		{"malformed arguments", `[{"id":"call_1","type":"function","function":{"name":"list","arguments":"{\"path\": "}}]`, "malformed arguments for the tool list"},
		{"arguments not an object", `[{"id":"call_1","type":"function","function":{"name":"list","arguments":"[1]"}}]`, "malformed arguments"},
		{"empty id", `[{"id":"","type":"function","function":{"name":"list","arguments":"{}"}}]`, "tool call with no id"},
		{"tool not offered", `[{"id":"call_1","type":"function","function":{"name":"rm","arguments":"{}"}}]`, `the tool "rm", which was not offered`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakechat.NewScript(t, func(fakechat.Call) fakechat.Turn { return fakechat.Turn{Raw: body(tc.calls)} })
			m, _ := model.New(model.Config{Provider: "openai", BaseURL: srv.URL, Model: "m", APIKey: toolsKey})
			_, err := m.Complete(context.Background(), model.Request{Tools: []model.Tool{listTool},
				Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
			checkBad(t, err)
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q lacks %q", err, tc.want)
			}
		})
	}
	t.Run("empty arguments are an empty object", func(t *testing.T) {
		srv := fakechat.NewScript(t, func(fakechat.Call) fakechat.Turn {
			return fakechat.Turn{Raw: body(`[{"id":"call_1","type":"function","function":{"name":"list","arguments":""}}]`)}
		})
		m, _ := model.New(model.Config{Provider: "openai", BaseURL: srv.URL, Model: "m", APIKey: toolsKey})
		resp, err := m.Complete(context.Background(), model.Request{Tools: []model.Tool{listTool},
			Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
		if err != nil || string(resp.ToolCalls[0].Input) != "{}" {
			t.Fatalf("resp %+v err %v", resp, err)
		}
	})
	t.Run("anthropic tool not offered", func(t *testing.T) {
		srv := fakemodel.NewAnthropic(t, func(fakemodel.Request) fakemodel.Reply {
			return fakemodel.Reply{Calls: []fakemodel.Call{{ID: "toolu_1", Name: "rm", Input: map[string]any{}}}}
		})
		m, _ := model.New(model.Config{Provider: "anthropic", BaseURL: srv.URL, Model: "m", APIKey: toolsKey})
		_, err := m.Complete(context.Background(), model.Request{Tools: []model.Tool{listTool},
			Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
		checkBad(t, err)
	})
}

// TestToolRequestValidation: requests no provider can take are refused before any call, with
// errs.Invalid or errs.TooLarge; every limit holds at its edge.
func TestToolRequestValidation(t *testing.T) {
	srv := fakechat.NewScript(t, func(fakechat.Call) fakechat.Turn { return fakechat.Turn{Text: "ok"} })
	m, _ := model.New(model.Config{Provider: "openai", BaseURL: srv.URL, Model: "m", APIKey: toolsKey})
	user := func(parts ...model.Part) []model.Message {
		return []model.Message{{Role: model.RoleUser, Content: "hi", Parts: parts}}
	}
	images := func(n, size int) []model.Part {
		var ps []model.Part
		for range n {
			ps = append(ps, model.ImagePart("image/jpeg", bytes.Repeat([]byte{1}, size)))
		}
		return ps
	}
	tools := func(n int) []model.Tool {
		var ts []model.Tool
		for i := range n {
			ts = append(ts, model.Tool{Name: "t" + strings.Repeat("x", i)})
		}
		return ts
	}
	call := model.ToolCall{ID: "c1", Name: "list", Input: json.RawMessage(`{}`)}
	for _, tc := range []struct {
		name string
		req  model.Request
		code errs.Code // "" means accepted
		want string
	}{
		{"tool name with a dot", model.Request{Tools: []model.Tool{{Name: "fs.list"}}, Messages: user()}, errs.Invalid, "both providers refuse it"},
		{"tool name of 65 characters", model.Request{Tools: []model.Tool{{Name: strings.Repeat("a", 65)}}, Messages: user()}, errs.Invalid, "not 1 to 64"},
		{"tool name of 64 characters", model.Request{Tools: []model.Tool{{Name: strings.Repeat("a", 64)}}, Messages: user()}, "", ""},
		{"tool offered twice", model.Request{Tools: []model.Tool{listTool, listTool}, Messages: user()}, errs.Invalid, "offered twice"},
		{"schema not an object", model.Request{Tools: []model.Tool{{Name: "a", Schema: json.RawMessage(`{"type":"string"}`)}}, Messages: user()}, errs.Invalid, "not an object schema"},
		{"schema not JSON", model.Request{Tools: []model.Tool{{Name: "a", Schema: json.RawMessage(`{`)}}, Messages: user()}, errs.Invalid, "not an object schema"},
		{fmt2("%d tools", model.MaxTools), model.Request{Tools: tools(model.MaxTools), Messages: user()}, "", ""},
		{fmt2("%d tools", model.MaxTools+1), model.Request{Tools: tools(model.MaxTools + 1), Messages: user()}, errs.Invalid, "at most"},
		{"image at the size cap", model.Request{Messages: user(images(1, model.MaxImageSize)...)}, "", ""},
		{"image over the size cap", model.Request{Messages: user(images(1, model.MaxImageSize+1)...)}, errs.TooLarge, "the limit is"},
		{fmt2("%d images", model.MaxImages), model.Request{Messages: user(images(model.MaxImages, 10)...)}, "", ""},
		{fmt2("%d images", model.MaxImages+1), model.Request{Messages: user(images(model.MaxImages+1, 10)...)}, errs.TooLarge, "at most"},
		{"image of an unknown type", model.Request{Messages: user(model.ImagePart("image/svg+xml", []byte("<svg/>")))}, errs.Invalid, "media type"},
		{"empty image", model.Request{Messages: user(model.ImagePart("image/png", nil))}, errs.Invalid, "empty"},
		{"image from the assistant", model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hi"},
			{Role: model.RoleAssistant, Parts: []model.Part{model.ImagePart("image/png", png)}}}}, errs.Invalid, "user messages only"},
		{"tool call with an empty id", model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hi"},
			{Role: model.RoleAssistant, Parts: []model.Part{model.ToolCallPart(model.ToolCall{Name: "list", Input: json.RawMessage(`{}`)})}}}}, errs.Invalid, "needs an id"},
		{"tool call input not an object", model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hi"},
			{Role: model.RoleAssistant, Parts: []model.Part{model.ToolCallPart(model.ToolCall{ID: "c", Name: "list", Input: json.RawMessage(`"x"`)})}}}}, errs.Invalid, "not a JSON object"},
		{"tool call from the user", model.Request{Messages: user(model.ToolCallPart(call))}, errs.Invalid, "assistant messages only"},
		{"tool result answering no call", model.Request{Messages: user(model.ToolResultPart(model.ToolResult{CallID: "c9", Text: "x"}))}, errs.Invalid, "no earlier assistant message called"},
		{"tool result without a call id", model.Request{Messages: user(model.ToolResultPart(model.ToolResult{Text: "x"}))}, errs.Invalid, "needs the id"},
		{"unknown part type", model.Request{Messages: user(model.Part{Type: "audio"})}, errs.Invalid, "unknown part type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(srv.Calls())
			_, err := m.Complete(context.Background(), tc.req)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if errs.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v (code %s), want %s with %q", err, errs.CodeOf(err), tc.code, tc.want)
			}
			if errors.Is(err, model.ErrBadResponse) || len(srv.Calls()) != before {
				t.Fatalf("a refused request reached the provider")
			}
		})
	}
}

func fmt2(format string, n int) string { return strings.Replace(format, "%d", itoa(n), 1) }

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

const toolsKey = "sk-tools-SECRET-0123456789"

// checkBad asserts err is ErrBadResponse, coded upstream, without the key.
func checkBad(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, model.ErrBadResponse) || errs.CodeOf(err) != errs.Upstream {
		t.Fatalf("err %v (code %s), want ErrBadResponse/upstream", err, errs.CodeOf(err))
	}
	if strings.Contains(err.Error(), toolsKey) {
		t.Fatalf("key leaked: %v", err)
	}
}

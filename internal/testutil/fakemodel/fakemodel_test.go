package fakemodel_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/pixie-dev/pixie/internal/testutil/fakemodel"
)

// The fakes are checked with the official SDKs, which parse the real wire formats strictly
// (streams included): a fake a real client cannot read fails here.

func TestAnthropicWithTheSDK(t *testing.T) {
	srv := fakemodel.NewAnthropic(t, fakemodel.Steps(
		fakemodel.Reply{Text: "Let me look.", Calls: []fakemodel.Call{{Name: "Bash", Input: map[string]any{"command": "ls -la"}}}},
		fakemodel.Reply{Text: "Done: two files, ünïcödé ✓."},
	))
	c := anthropic.NewClient(aoption.WithBaseURL(srv.URL), aoption.WithAPIKey("k"), aoption.WithMaxRetries(0))
	tools := []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "Bash", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"command": map[string]any{"type": "string"}}}}}}
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("list the files"))}
	for _, stream := range []bool{false, true} {
		var msg anthropic.Message
		params := anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 100, Messages: msgs, Tools: tools}
		if stream {
			s := c.Messages.NewStreaming(context.Background(), params)
			for s.Next() {
				if err := msg.Accumulate(s.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
		} else {
			m, err := c.Messages.New(context.Background(), params)
			if err != nil {
				t.Fatal(err)
			}
			msg = *m
		}
		if msg.StopReason != "tool_use" || len(msg.Content) != 2 || msg.Content[1].Name != "Bash" {
			t.Fatalf("stream=%v: %+v", stream, msg)
		}
		var in struct{ Command string }
		if err := json.Unmarshal(msg.Content[1].Input, &in); err != nil || in.Command != "ls -la" {
			t.Fatalf("stream=%v: input %s (%v)", stream, msg.Content[1].Input, err)
		}
	}
	// Second step: the tool result goes back, the script answers text.
	m := anthropic.Message{}
	s := c.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 100, Tools: tools, Messages: append(msgs,
		anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_x", map[string]any{"command": "ls -la"}, "Bash")),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_x", "a.txt\nb.txt", false)))})
	for s.Next() {
		if err := m.Accumulate(s.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if s.Err() != nil || len(m.Content) != 1 || m.Content[0].Text != "Done: two files, ünïcödé ✓." {
		t.Fatalf("%v %+v", s.Err(), m)
	}
	reqs := srv.ModelRequests()
	if len(reqs) != 3 || !reqs[2].Stream || len(reqs[2].Results) != 1 || reqs[2].Results[0].Output != "a.txt\nb.txt" || reqs[2].LastUser != "list the files" {
		t.Fatalf("recorded: %+v", reqs)
	}
	if !reqs[2].Contains("a.txt\nb.txt") {
		t.Fatal("Contains misses an escaped newline")
	}
}

func TestOpenAIResponsesWithTheSDK(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Steps(
		fakemodel.Reply{Calls: []fakemodel.Call{{Name: "shell", Input: map[string]any{"command": []string{"ls"}}}}},
		fakemodel.Reply{Text: "Two files ✓."},
	))
	c := openai.NewClient(ooption.WithBaseURL(srv.URL+"/v1"), ooption.WithAPIKey("k"), ooption.WithMaxRetries(0))
	tool := responses.ToolParamOfFunction("shell", map[string]any{"type": "object"}, false)
	params := responses.ResponseNewParams{Model: "gpt-test", Tools: []responses.ToolUnionParam{tool},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("list the files")}}
	r, err := c.Responses.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Output) != 1 || r.Output[0].Type != "function_call" || r.Output[0].Name != "shell" || r.Output[0].Arguments.OfString != `{"command":["ls"]}` {
		t.Fatalf("%+v", r.Output)
	}
	s := c.Responses.NewStreaming(context.Background(), params)
	var done *responses.Response
	deltas := ""
	for s.Next() {
		ev := s.Current()
		switch ev.Type {
		case "response.function_call_arguments.delta":
			deltas += ev.Delta
		case "response.completed":
			resp := ev.Response
			done = &resp
		}
	}
	if s.Err() != nil || done == nil || deltas != `{"command":["ls"]}` || done.Output[0].CallID == "" {
		t.Fatalf("stream: %v %q %+v", s.Err(), deltas, done)
	}
	// With the tool's output in the input, the script answers text.
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("list the files", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfFunctionCall(`{"command":["ls"]}`, "call_1", "shell"),
		callOutput("call_1", "a.txt\nb.txt"),
	}}
	s = c.Responses.NewStreaming(context.Background(), params)
	text := ""
	for s.Next() {
		if ev := s.Current(); ev.Type == "response.output_text.delta" {
			text += ev.Delta
		}
	}
	if s.Err() != nil || text != "Two files ✓." {
		t.Fatalf("%v %q", s.Err(), text)
	}
	reqs := srv.ModelRequests()
	if len(reqs) != 3 || len(reqs[2].Results) != 1 || reqs[2].Results[0].Output != "a.txt\nb.txt" || reqs[2].LastUser != "list the files" {
		t.Fatalf("recorded: %+v", reqs)
	}
}

func callOutput(id, out string) responses.ResponseInputItemUnionParam {
	item := responses.ResponseInputItemParamOfFunctionCallOutput(out)
	item.OfFunctionCallOutput.CallID = openai.String(id)
	return item
}

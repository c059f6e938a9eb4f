package proxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

const hintMsg = "📌 Side hint\n1. use <staging> & \"quotes\""

// decode turns JSON into generic values for comparing meaning.
func decode(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return v
}

func TestInject(t *testing.T) {
	hint := hintMsg
	cases := []struct {
		name string
		ep   endpoint
		in   string
		want string // the expected body, compared as JSON values
	}{
		{
			name: "anthropic string content",
			ep:   epMessages,
			in:   `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`,
			want: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"text","text":` + string(jsonString(hint)) + `}]}],"max_tokens":5}`,
		},
		{
			name: "anthropic tool results last",
			ep:   epMessages,
			in: `{"messages":[{"role":"user","content":[{"type":"text","text":"go"}]},` +
				`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok","cache_control":{"type":"ephemeral"}}]}]}`,
			want: `{"messages":[{"role":"user","content":[{"type":"text","text":"go"}]},` +
				`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok","cache_control":{"type":"ephemeral"}},{"type":"text","text":` + string(jsonString(hint)) + `}]}]}`,
		},
		{
			name: "anthropic trailing system message (Claude Code)",
			ep:   epMessages,
			in:   `{"messages":[{"role":"user","content":[{"type":"text","text":"go"}]},{"role":"system","content":"env"}]}`,
			want: `{"messages":[{"role":"user","content":[{"type":"text","text":"go"},{"type":"text","text":` + string(jsonString(hint)) + `}]},{"role":"system","content":"env"}]}`,
		},
		{
			name: "anthropic empty blocks",
			ep:   epMessages,
			in:   `{"messages":[{"role":"user","content":[ ]}]}`,
			want: `{"messages":[{"role":"user","content":[{"type":"text","text":` + string(jsonString(hint)) + `}]}]}`,
		},
		{
			name: "responses string input",
			ep:   epResponses,
			in:   `{"model":"m","input":"hi","stream":true}`,
			want: `{"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_text","text":` + string(jsonString(hint)) + `}]}],"stream":true}`,
		},
		{
			name: "responses last item a user message",
			ep:   epResponses,
			in:   `{"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"rules"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]}`,
			want: `{"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"rules"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_text","text":` + string(jsonString(hint)) + `}]}]}`,
		},
		{
			name: "responses user message with string content, no type",
			ep:   epResponses,
			in:   `{"input":[{"role":"user","content":"hi"}]}`,
			want: `{"input":[{"role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_text","text":` + string(jsonString(hint)) + `}]}]}`,
		},
		{
			name: "responses tool output last",
			ep:   epResponses,
			in:   `{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]},{"type":"function_call","call_id":"c1","name":"shell","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"ok"}]}`,
			want: `{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]},{"type":"function_call","call_id":"c1","name":"shell","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"ok"},` +
				`{"type":"message","role":"user","content":[{"type":"input_text","text":` + string(jsonString(hint)) + `}]}]}`,
		},
		{
			name: "chat string content",
			ep:   epChat,
			in:   `{"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]}`,
			want: `{"messages":[{"role":"system","content":"s"},{"role":"user","content":` + string(jsonString("hi\n\n"+hint)) + `}]}`,
		},
		{
			name: "chat parts",
			ep:   epChat,
			in:   `{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
			want: `{"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"text","text":` + string(jsonString(hint)) + `}]}]}`,
		},
		{
			name: "chat tool result last",
			ep:   epChat,
			in:   `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]}`,
			want: `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"},{"role":"user","content":` + string(jsonString(hint)) + `}]}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := inject(tc.ep, []byte(tc.in), hint)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(decode(t, got), decode(t, []byte(tc.want))) {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			// Splicing: the bytes before the edit are the client's, unchanged.
			prefix := commonPrefix(got, []byte(tc.in))
			if prefix == 0 {
				t.Fatalf("nothing of the original body was kept verbatim")
			}
		})
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// Bytes outside the edited value stay as the client wrote them: spacing, key order, number
// spelling and escapes.
func TestInjectKeepsOtherBytes(t *testing.T) {
	in := "{ \"z\" : 1.50e+3,\n  \"messages\" : [ {\"content\":\"a\\u00e9\", \"role\" : \"user\" } ] ,\"a\":\"\\u003c\"}"
	got, err := inject(epMessages, []byte(in), "h")
	if err != nil {
		t.Fatal(err)
	}
	want := "{ \"z\" : 1.50e+3,\n  \"messages\" : [ {\"content\":[{\"type\":\"text\",\"text\":\"a\\u00e9\"},{\"type\":\"text\",\"text\":\"h\"}], \"role\" : \"user\" } ] ,\"a\":\"\\u003c\"}"
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestInjectRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		ep   endpoint
		in   string
	}{
		{"not json", epMessages, `{"messages":[`},
		{"not an object", epMessages, `[1]`},
		{"no messages", epMessages, `{"model":"m"}`},
		{"no user message", epMessages, `{"messages":[{"role":"assistant","content":"x"}]}`},
		{"null content", epMessages, `{"messages":[{"role":"user","content":null}]}`},
		{"responses no input", epResponses, `{"model":"m"}`},
		{"responses input number", epResponses, `{"input":3}`},
		{"chat no messages", epChat, `{"messages":[]}`},
		{"other endpoint", epOther, `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if out, err := inject(tc.ep, []byte(tc.in), "h"); err == nil {
				t.Fatalf("injected into %s: %s", tc.in, out)
			}
		})
	}
}

// The last of duplicate keys is the one an upstream reads, so it is the one edited.
func TestInjectDuplicateKeys(t *testing.T) {
	in := `{"messages":[{"role":"user","content":"old"}],"messages":[{"role":"user","content":"new"}]}`
	got, err := inject(epMessages, []byte(in), "h")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"messages":[{"role":"user","content":"old"}],"messages":[{"role":"user","content":[{"type":"text","text":"new"},{"type":"text","text":"h"}]}]}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// The injection never produces invalid JSON, and whenever it succeeds the hint is in the result
// and the rest of the request means what it meant.
func FuzzInject(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"system","content":"x"}]}`,
		`{"input":"hi"}`,
		`{"input":[{"role":"user","content":"x"},{"type":"function_call_output","output":"o"}]}`,
		`{"messages":[{"role":"tool","content":"r"}]}`,
		` { "messages" : [ { "role" : "user" , "content" : [ ] } ] } `,
	} {
		f.Add(s, uint8(0))
		f.Add(s, uint8(1))
		f.Add(s, uint8(2))
	}
	f.Fuzz(func(t *testing.T, body string, which uint8) {
		ep := []endpoint{epMessages, epResponses, epChat}[which%3]
		out, err := inject(ep, []byte(body), "HINT-\"x\"")
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON from %q: %s", body, out)
		}
		if !bytes.Contains(out, []byte(`HINT-\"x\"`)) {
			t.Fatalf("the hint is missing from %s", out)
		}
	})
}

func TestSideQuery(t *testing.T) {
	tools := `"tools":[{"name":"Bash","input_schema":{}}]`
	for _, tc := range []struct {
		name string
		ep   endpoint
		h    host
		body string
		step bool
	}{
		{"claude step", epMessages, hostClaudeCode, `{` + tools + `,"messages":[{"role":"user","content":"go"}]}`, true},
		{"claude title: no tools", epMessages, hostClaudeCode, `{"tools":[],"messages":[{"role":"user","content":"name it"}]}`, false},
		{"claude quota: tools absent", epMessages, hostClaudeCode, `{"messages":[{"role":"user","content":"quota"}]}`, false},
		{"claude structured output", epMessages, hostClaudeCode, `{` + tools + `,"output_config":{"format":{"type":"json_schema"}},"messages":[]}`, false},
		{"claude effort only", epMessages, hostClaudeCode, `{` + tools + `,"output_config":{"effort":"medium"},"messages":[{"role":"user","content":"go"}]}`, true},
		{"claude compaction", epMessages, hostClaudeCode, `{` + tools + `,"messages":[{"role":"user","content":"CRITICAL: Respond with TEXT ONLY.\n\nYour task is to create a detailed summary of the conversation so far, paying"}]}`, false},
		{"claude compaction in blocks", epMessages, hostClaudeCode, `{` + tools + `,"messages":[{"role":"user","content":[{"type":"text","text":"Your task is to create a detailed summary of the conversation so far"}]}]}`, false},
		{"other anthropic client without tools", epMessages, hostUnknown, `{"messages":[{"role":"user","content":"hi"}]}`, true},
		{"responses step", epResponses, hostCodex, `{"input":"hi"}`, true},
		{"responses stored conversation", epResponses, hostUnknown, `{"input":"hi","previous_response_id":"resp_1"}`, false},
		{"responses conversation object", epResponses, hostUnknown, `{"input":"hi","conversation":{"id":"conv_1"}}`, false},
		{"responses null previous", epResponses, hostUnknown, `{"input":"hi","previous_response_id":null}`, true},
		{"not json", epChat, hostUnknown, `{`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why := sideQuery(tc.ep, tc.h, []byte(tc.body))
			if (why == "") != tc.step {
				t.Fatalf("sideQuery = %q, want step=%v", why, tc.step)
			}
		})
	}
}

func TestIdentifyHeaders(t *testing.T) {
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	meta := func(threadSource, kind string) string {
		return `{"session_id":"s1","thread_id":"s1","agent_name":"/root","request_kind":"` + kind + `","thread_source":"` + threadSource + `"}`
	}
	for _, tc := range []struct {
		name    string
		ep      endpoint
		h       http.Header
		host    host
		session string
		step    bool
	}{
		{"claude main", epMessages, hdr("X-Claude-Code-Session-Id", "c1", "User-Agent", "claude-cli/2.1.328 (external, cli)"), hostClaudeCode, "c1", true},
		{"claude subagent", epMessages, hdr("X-Claude-Code-Session-Id", "c1", "X-Claude-Code-Agent-Id", "a49e"), hostClaudeCode, "c1", false},
		{"claude count tokens", epCountTokens, hdr("X-Claude-Code-Session-Id", "c1"), hostClaudeCode, "c1", false},
		{"claude without session header", epMessages, hdr("User-Agent", "claude-cli/2.1.328"), hostClaudeCode, "", true},
		{"codex main", epResponses, hdr("Session-Id", "s1", "Thread-Id", "s1", "X-Codex-Turn-Metadata", meta("user", "turn")), hostCodex, "s1", true},
		{"codex legacy header", epResponses, hdr("Session_id", "s1"), hostCodex, "s1", true},
		{"codex subagent", epResponses, hdr("Session-Id", "s1", "Thread-Id", "t2", "X-Codex-Parent-Thread-Id", "s1", "X-Openai-Subagent", "collab_spawn"), hostCodex, "s1", false},
		{"codex review subagent", epResponses, hdr("Session-Id", "s1", "X-Openai-Subagent", "review"), hostCodex, "s1", false},
		{"codex other thread", epResponses, hdr("Session-Id", "s1", "Thread-Id", "t2"), hostCodex, "s1", false},
		{"codex title", epResponses, hdr("Session-Id", "s1", "X-Codex-Turn-Metadata", meta("thread_title", "turn")), hostCodex, "s1", false},
		{"codex compaction kind", epResponses, hdr("Session-Id", "s1", "X-Codex-Turn-Metadata", meta("user", "compaction")), hostCodex, "s1", false},
		{"codex session from metadata", epResponses, hdr("X-Codex-Turn-Metadata", meta("user", "turn")), hostCodex, "s1", true},
		{"explicit session wins", epChat, hdr("X-Pixie-Session-Id", "mine", "Session-Id", "s1"), hostCodex, "mine", true},
		{"unknown host", epChat, hdr("X-Pixie-Session-Id", "mine"), hostUnknown, "mine", true},
		{"nothing", epChat, hdr(), hostUnknown, "", true},
		{"control characters are no session", epChat, hdr("X-Pixie-Session-Id", "a\x01b"), hostUnknown, "", true},
		{"too long is no session", epChat, hdr("X-Pixie-Session-Id", strings.Repeat("x", 257)), hostUnknown, "", true},
		{"star is no session", epChat, hdr("X-Pixie-Session-Id", "*"), hostUnknown, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := identifyHeaders(tc.ep, tc.h)
			if id.host != tc.host || id.session != tc.session || (id.notStep == "") != tc.step {
				t.Fatalf("identity = %+v; want host %q session %q step %v", id, tc.host, tc.session, tc.step)
			}
		})
	}
}

func TestBodySession(t *testing.T) {
	for _, tc := range []struct {
		ep   endpoint
		body string
		want string
	}{
		{epMessages, `{"metadata":{"user_id":"{\"device_id\":\"d\",\"account_uuid\":\"\",\"session_id\":\"b250\"}"}}`, "b250"},
		{epMessages, `{"metadata":{"user_id":"user_abc_account_def_session_0f1e"}}`, "0f1e"},
		{epMessages, `{"metadata":{"user_id":"someone"}}`, ""},
		{epResponses, `{"client_metadata":{"session_id":"s9"}}`, "s9"},
		{epChat, `{"metadata":{"session_id":"s8"}}`, "s8"},
		{epChat, `not json`, ""},
	} {
		if got := bodySession(tc.ep, []byte(tc.body)); got != tc.want {
			t.Errorf("bodySession(%s) = %q, want %q", tc.body, got, tc.want)
		}
	}
}

func TestEndpointOf(t *testing.T) {
	for _, tc := range []struct {
		api    API
		method string
		path   string
		want   endpoint
	}{
		{Anthropic, "POST", "/v1/messages", epMessages},
		{Anthropic, "POST", "/v1/messages/", epMessages},
		{Anthropic, "POST", "/v1/messages/count_tokens", epCountTokens},
		{Anthropic, "GET", "/v1/messages", epOther},
		{Anthropic, "HEAD", "/api/hello", epOther},
		{OpenAI, "POST", "/v1/responses", epResponses},
		{OpenAI, "POST", "/responses", epResponses},
		{OpenAI, "POST", "/v1/responses/compact", epOther},
		{OpenAI, "POST", "/v1/chat/completions", epChat},
		{OpenAI, "GET", "/v1/models", epOther},
		{OpenAI, "POST", "/v1/messages", epOther},
	} {
		if got := endpointOf(tc.api, tc.method, tc.path); got != tc.want {
			t.Errorf("endpointOf(%s %s %s) = %v, want %v", tc.api, tc.method, tc.path, got, tc.want)
		}
	}
}

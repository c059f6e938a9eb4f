package gate

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/helper"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// blockRiskyRecord is the record of a typical decision: the block-risky-commands guest stopping
// `rm -rf /` at tool-before (what make bench and make soak send).
func blockRiskyRecord() Record {
	start := time.Date(2026, 12, 4, 0, 47, 25, 244420456, time.UTC)
	args := `{"command":"rm -rf /","description":"clean up"}`
	reason := "Blocked: recursive forced rm of / or the home directory."
	out := abi.GateOutput{Verdict: VerdictStop, Reason: reason}
	return Record{ID: newRunID(start), Gate: "brc", Point: abi.PointToolBefore, Session: "s1", Preset: "brc", Turn: 1, Agent: "root",
		Tool: &Tool{Name: "Bash", Args: json.RawMessage(args)}, StartedAt: start, DurationMs: 0, Action: ActionBlocked,
		ConcludedBy: ByHookScript, Output: out, Original: args, Final: args, Reason: reason, Notes: []string{},
		HelperCalls: []helper.Call{}, Rule: &RuleRun{Kind: runtime.KindModule, Name: "brc", ExitCode: 11, Stdout: outputJSON(out)},
		OnError: OnErrorContinue, ShowInChat: true}
}

func recordKey(r Record) string {
	return runsCol.Key(r.Session + "/" + store.ReverseSortableTime(r.StartedAt) + "/" + r.ID)
}

// TestRecordRoundTrip: a record written in version 1 and one written as JSON (before it) both
// read back as the record that was written.
func TestRecordRoundTrip(t *testing.T) {
	conf := 0.87
	start := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	cases := []struct {
		name string
		edit func(r *Record)
	}{
		{"block-risky decision", func(*Record) {}},
		{"model gate with everything", func(r *Record) {
			r.Point, r.Agent, r.Turn, r.MessageID = abi.PointUserMessage, "child", 42, "msg-1"
			r.Tool = nil
			r.Original, r.Final, r.Addition, r.Suggestion = "fix the bug", "fix the bug in main.go", "see main.go", "try again"
			r.Action, r.ConcludedBy = ActionReplaced, ByPixie
			r.Output = abi.GateOutput{Verdict: VerdictPass, Reason: "ok", Replace: "fix the bug in main.go", Append: "x", Note: "[Checked] fine"}
			r.Reason = "a reason of its own"
			r.Notes = []string{"first", "", "third ✓"}
			r.Structured = true
			r.Usage = abi.Usage{InputTokens: 1200, OutputTokens: 34}
			r.HelperCalls = []helper.Call{{Type: "judge", JudgeType: "bool", Label: "yes", Engine: "llm", Confidence: &conf, Usage: abi.Usage{InputTokens: 5}, DurationMs: 12}}
			r.Logs = []helper.LogLine{{Level: "info", Message: "hello"}}
			r.Rule = &RuleRun{Kind: runtime.KindScript, Name: "check.sh", ExitCode: 0, Stdout: "some text", DurationMs: 7}
			r.ModelAnswer = `{"verdict":"pass"}`
			r.DurationMs = 1234
			r.ShowInChat = false
		}},
		{"failed run", func(r *Record) {
			r.Rule = &RuleRun{Kind: runtime.KindModule, Name: "m", ExitCode: -1}
			r.Error, r.ErrorDetail, r.OnError, r.Cancelled = "the rule timed out", "after 60 s", OnErrorStop, true
			r.Action, r.Output, r.Reason = ActionNone, abi.GateOutput{}, ""
		}},
		{"words no table knows", func(r *Record) {
			r.Point, r.Agent, r.Action, r.ConcludedBy, r.OnError = "some-point", "grandchild", "exploded", "someone", "retry"
			r.Output.Verdict = "maybe"
			r.Rule.Kind = "lua"
		}},
		{"stdout that is not the output's JSON", func(r *Record) {
			r.Rule.Stdout = "{ \"verdict\": \"stop\" }\n"
		}},
		{"original that is not the arguments", func(r *Record) {
			r.Original = `{"command": "rm -rf /"}`
			r.Final = "something else"
		}},
		{"tool without arguments, empty rule", func(r *Record) {
			r.Tool = &Tool{Name: "Read", CallID: "call-9"}
			r.Original, r.Final = "", ""
			r.Rule = &RuleRun{}
		}},
		{"zero start", func(r *Record) {
			r.StartedAt = time.Time{}
		}},
		{"multi-byte and binary text", func(r *Record) {
			r.Original, r.Final = "héllo \x00 wörld "+strings.Repeat("x", 300), "ünïcode"
			r.Tool.Args = json.RawMessage(`{"a":"\u00e9"}`)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := blockRiskyRecord()
			if !r.StartedAt.IsZero() {
				r.StartedAt = start
				r.ID = newRunID(start)
			}
			c.edit(&r)
			key := recordKey(r)
			raw, err := encodeRecord(&r)
			if err != nil {
				t.Fatal(err)
			}
			if raw[0] != recordV1 {
				t.Fatalf("version byte %d", raw[0])
			}
			got, err := decodeRecord(key, raw)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, r) {
				t.Errorf("version 1 reads back\n%+v\nwant\n%+v", got, r)
			}
			// A record written as JSON by an earlier version reads the same (JSON compacts the
			// tool arguments, as it did then).
			old, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			want := r
			if want.Tool != nil && len(want.Tool.Args) > 0 {
				var buf strings.Builder
				_ = json.NewEncoder(&buf).Encode(want.Tool.Args)
				tool := *want.Tool
				tool.Args = json.RawMessage(strings.TrimSpace(buf.String()))
				want.Tool = &tool
			}
			got, err = decodeRecord(key, old)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("JSON reads back\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

// TestRecordEncodingSize: the bytes a typical decision's record takes, as JSON (before) and in
// version 1, and what it counts for against records.maxBytes with its keys.
func TestRecordEncodingSize(t *testing.T) {
	r := blockRiskyRecord()
	old, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	v1, err := encodeRecord(&r)
	if err != nil {
		t.Fatal(err)
	}
	key := recordKey(r)
	idxKey := runIDCol.Key(r.ID)
	oldIdx, _ := json.Marshal(strings.TrimPrefix(key, runsCol.Name()+"/"))
	before := len(key) + len(old) + len(idxKey) + len(oldIdx)
	after := recordSize(len(key), len(v1), len(idxKey), len(r.Session))
	t.Logf("record value: JSON %d bytes, version 1 %d bytes; with keys and index: %d → %d bytes", len(old), len(v1), before, after)
	if len(v1)*4 > len(old) {
		t.Errorf("version 1 takes %d bytes, more than a quarter of JSON's %d", len(v1), len(old))
	}
	if got := int64(len(key) + len(v1) + len(idxKey) + len(encodeIndex(after, r.Session))); got != after {
		t.Errorf("recordSize = %d, the bytes written are %d", after, got)
	}
}

// TestRecordSizeVarint: recordSize counts its own varint exactly across the varint's lengths.
func TestRecordSizeVarint(t *testing.T) {
	for _, base := range []int{1, 100, 120, 125, 126, 127, 128, 16370, 16380, 16383, 16384, 1 << 20} {
		got := recordSize(base, 0, 0, 0)
		if want := int64(base) + 1 + int64(len(encodeIndex(got, ""))-1); got != want {
			t.Errorf("base %d: recordSize %d, want %d", base, got, want)
		}
	}
}

// TestDecodeRecordRefuses: a record this version cannot read is an error, never a half-read
// record.
func TestDecodeRecordRefuses(t *testing.T) {
	r := blockRiskyRecord()
	good, _ := encodeRecord(&r)
	key := recordKey(r)
	cases := map[string][]byte{
		"empty":                       {},
		"newer version":               append([]byte{2}, good[1:]...),
		"unknown field":               append(append([]byte{}, good...), fieldCount),
		"field zero":                  append(append([]byte{}, good...), 0),
		"truncated string":            good[:len(good)/2],
		"unknown word":                {recordV1, fPoint, 99},
		"tool field, no tool":         {recordV1, fToolName, 1, 'x'},
		"rule field, no rule":         {recordV1, fRuleExit, 2},
		"original from args, no tool": {recordV1, fOriginalIsArgs},
		"bad JSON":                    []byte(`{"id":`),
		"bad helper calls":            {recordV1, fHelperCalls, 1, '['},
		"long varint":                 {recordV1, fTurn, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	}
	for name, raw := range cases {
		if _, err := decodeRecord(key, raw); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// FuzzDecodeRecord: any bytes decode to a record or an error, never a panic; what decodes
// encodes again to a record that decodes the same.
func FuzzDecodeRecord(f *testing.F) {
	r := blockRiskyRecord()
	good, _ := encodeRecord(&r)
	f.Add(good)
	old, _ := json.Marshal(r)
	f.Add(old)
	key := recordKey(r)
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := decodeRecord(key, raw)
		if err != nil || len(raw) == 0 || raw[0] != recordV1 {
			return
		}
		again, err := encodeRecord(&got)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeRecord(key, again)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if !reflect.DeepEqual(back, got) {
			t.Fatalf("re-encoded record reads\n%+v\nnot\n%+v", back, got)
		}
	})
}

// TestRunIDOrder: run ids sort by their start, and carry it.
func TestRunIDOrder(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	prev := ""
	for i := range 100 {
		at := t0.Add(time.Duration(i*i) * time.Millisecond)
		id := newRunID(at)
		if !cursorRE.MatchString("00000000000000000000/" + id) {
			t.Fatalf("%s is not a run id the API accepts", id)
		}
		if got, ok := runIDTime(id); !ok || !got.Equal(at) {
			t.Fatalf("%s carries %v, want %v", id, got, at)
		}
		if id <= prev {
			t.Fatalf("%s sorts before %s", id, prev)
		}
		prev = id
	}
	if _, ok := runIDTime("run_zz0000000000000000000000"); ok {
		t.Error("a malformed id carries a time")
	}
}

// TestDecodeIndex: both index encodings, and refusals.
func TestDecodeIndex(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC)
	id := newRunID(at)
	idx, err := decodeIndex(id, encodeIndex(321, "sess"))
	if err != nil || idx.Legacy || idx.Size != 321 || idx.Session != "sess" || idx.Key != "sess/"+store.ReverseSortableTime(at)+"/"+id {
		t.Fatalf("%+v %v", idx, err)
	}
	old, _ := json.Marshal("sess/00001/run_abc")
	idx, err = decodeIndex("run_abc", old)
	if err != nil || !idx.Legacy || idx.Key != "sess/00001/run_abc" {
		t.Fatalf("%+v %v", idx, err)
	}
	for name, raw := range map[string][]byte{"empty": nil, "version 2": {2, 1, 's'}, "no session": {idxV1, 5}, "slash": append([]byte{idxV1, 5}, "a/b"...)} {
		if _, err := decodeIndex(id, raw); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	if _, err := decodeIndex("run_notatimeid", encodeIndex(1, "s")); err == nil {
		t.Error("a version-1 entry under an id without a time decoded")
	}
}

// TestOutputJSON: outputJSON writes what encoding/json writes, so that a record that stored
// the flag for "the stdout is the output's JSON" reads back the stdout the rule printed.
func TestOutputJSON(t *testing.T) {
	for _, o := range []abi.GateOutput{{}, {Verdict: "stop"}, {Reason: "a <b> & \"c\"\n\u2028 \xff é"},
		{Verdict: "pass", Reason: "r", Replace: "x", Append: "y", Note: "[Label] z"}, {Note: "only"}} {
		want, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if got := outputJSON(o); got != string(want) {
			t.Errorf("outputJSON(%+v) = %s, want %s", o, got, want)
		}
	}
}

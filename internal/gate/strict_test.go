package gate

import (
	"strings"
	"testing"
)

// TestStrictDecodingNamesEveryBadKeyByPath feeds definitions with misspelt, repeated and
// wrongly typed members at every depth and checks that each is refused with its full path.
func TestStrictDecodingNamesEveryBadKeyByPath(t *testing.T) {
	cases := []struct {
		name   string
		decode func([]byte) error
		in     string
		want   map[string]string // path → a piece of the message
	}{
		{name: "misspelt option inside a gate", decode: setDecoder,
			in:   `{"gates":[{"name":"a","point":"turn-end","task":"t","advanced":{"onErrror":"stop"}}],"presets":[]}`,
			want: map[string]string{"gates[0].advanced.onErrror": `did you mean "onError"`}},
		{name: "misspelt task key", decode: setDecoder,
			in:   `{"gates":[{"name":"a","point":"turn-end","taks":"t"}],"presets":[]}`,
			want: map[string]string{"gates[0].taks": `did you mean "task"`}},
		{name: "key in another case", decode: setDecoder,
			in:   `{"gates":[{"name":"a","point":"turn-end","Task":"t"}],"presets":[]}`,
			want: map[string]string{"gates[0].Task": `did you mean "task"`}},
		{name: "unknown key inside a rule", decode: setDecoder,
			in:   `{"gates":[{"name":"a","point":"turn-end","rule":{"kind":"script","name":"x.sh","args":["-v"]}}],"presets":[]}`,
			want: map[string]string{"gates[0].rule.args": "unknown field"}},
		{name: "unknown key in an attachment", decode: setDecoder,
			in:   `{"gates":[],"presets":[{"name":"dev","gates":[{"gate":"a","enabeld":false}]}]}`,
			want: map[string]string{"presets[0].gates[0].enabeld": `did you mean "enabled"`}},
		{name: "unknown top-level key", decode: setDecoder,
			in:   `{"gates":[],"presets":[],"presetz":[]}`,
			want: map[string]string{"presetz": `did you mean "presets"`}},
		{name: "a key given twice", decode: setDecoder,
			in:   `{"gates":[{"name":"a","point":"turn-end","task":"t","task":"u"}],"presets":[],"presets":[]}`,
			want: map[string]string{"gates[0].task": "appears twice", "presets": "appears twice"}},
		{name: "wrong kinds", decode: setDecoder,
			in: `{"gates":[{"name":1,"enabled":"yes","point":"turn-end","task":"t","advanced":{"timeoutSeconds":1.5,"showInChat":"no"}},"x"],"presets":{}}`,
			want: map[string]string{"gates[0].name": "must be a string", "gates[0].enabled": "must be true or false",
				"gates[0].advanced.timeoutSeconds": "whole number", "gates[0].advanced.showInChat": "true or false",
				"gates[1]": "must be an object", "presets": "must be a list"}},
		{name: "a set without its lists", decode: setDecoder, in: `{"revision":3}`,
			want: map[string]string{"gates": "is required", "presets": "is required"}},
		{name: "an empty object set", decode: setDecoder, in: `{}`,
			want: map[string]string{"gates": "is required", "presets": "is required"}},
		{name: "null set", decode: setDecoder, in: `null`, want: map[string]string{"(body)": "not null"}},
		{name: "list set", decode: setDecoder, in: `[]`, want: map[string]string{"(body)": "not a list"}},
		{name: "preset without gates", decode: presetDecoder, in: `{"name":"dev"}`,
			want: map[string]string{"gates": "is required"}},
		{name: "preset with a misspelt attachment key", decode: presetDecoder, in: `{"gates":[{"gaet":"a"}]}`,
			want: map[string]string{"gates[0].gaet": `did you mean "gate"`}},
		{name: "one gate", decode: func(b []byte) error { _, err := DecodeGate(b); return err },
			in:   `{"point":"turn-end","task":"t","advanced":{"redo":2}}`,
			want: map[string]string{"advanced.redo": "unknown field"}},
		{name: "a trial's draft gate", decode: func(b []byte) error { _, err := DecodeTry(b); return err },
			in:   `{"gate":{"point":"turn-end","task":"t","advanced":{"onErrror":"stop"}},"sample":{"target":"x","tol":{}}}`,
			want: map[string]string{"gate.advanced.onErrror": "did you mean", "sample.tol": `did you mean "tool"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.decode([]byte(tc.in))
			if err == nil {
				t.Fatal("accepted")
			}
			got := map[string]string{}
			for _, p := range problemsOf(t, err) {
				got[p.Field] = p.Message
			}
			for path, piece := range tc.want {
				if !strings.Contains(got[path], piece) {
					t.Errorf("%s: got %q, want it to say %q (all: %v)", path, got[path], piece, got)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("got %d problems %v, want %d", len(got), got, len(tc.want))
			}
			if !strings.Contains(err.Error(), "refused") {
				t.Errorf("message %q", err)
			}
		})
	}
}

func setDecoder(b []byte) error    { _, err := DecodeSet(b); return err }
func presetDecoder(b []byte) error { _, err := DecodePreset(b); return err }

// TestStrictDecodingKeepsDefaultsAndNulls checks that a document that fits decodes exactly as
// encoding/json would: absent fields take their defaults, a null (a YAML key with no value)
// leaves the default, and raw tool arguments pass through untouched.
func TestStrictDecodingKeepsDefaultsAndNulls(t *testing.T) {
	s, err := DecodeSet([]byte(`{"gates":[{"name":"a","point":"turn-end","task":"t","advanced":null,"rule":null}],
		"presets":[{"name":"dev","gates":[{"gate":"a"}]},{"name":"empty","gates":[]}],"revision":0}`))
	if err != nil {
		t.Fatal(err)
	}
	g := s.Gates[0]
	if !g.Enabled || !g.Advanced.ShowInChat || g.Advanced.TimeoutSeconds != 60 || g.Rule != nil {
		t.Fatalf("defaults lost: %+v", g)
	}
	if !s.Presets[0].Gates[0].Enabled || len(s.Presets[1].Gates) != 0 {
		t.Fatalf("presets: %+v", s.Presets)
	}
	r, err := DecodeTry([]byte(`{"gate":{"point":"tool-before","task":"t"},"sample":{"target":"x","tool":{"name":"Bash","args":{"anything":[1,{"goes":null}]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Sample.Tool.Args) != `{"anything":[1,{"goes":null}]}` {
		t.Fatalf("args %s", r.Sample.Tool.Args)
	}
	if f, err := DecodeSetFile([]byte(`{"gates":[{"name":"a","point":"turn-end","task":"t"}]}`)); err != nil || len(f.Gates) != 1 || f.Presets != nil {
		t.Fatalf("a file may leave presets out: %+v %v", f, err)
	}
}

// TestStrictDecodingRefusesBrokenJSON checks syntax errors, cut-off bodies and trailing data.
func TestStrictDecodingRefusesBrokenJSON(t *testing.T) {
	for _, in := range []string{``, `{"gates":[`, `{"gates":[],"presets":[]} {}`, `{"gates":[],"presets":[]}x`, `{gates:[]}`} {
		if _, err := DecodeSet([]byte(in)); err == nil || !strings.Contains(err.Error(), "gate set") {
			t.Errorf("%q: %v", in, err)
		}
	}
}

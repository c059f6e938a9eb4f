package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jqCommand is the bash twin's jq program written with encoding/json, the oracle of command.
func jqCommand(args string) string {
	var v any
	if json.Unmarshal([]byte(args), &v) != nil {
		return ""
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	c := obj["command"]
	if c == nil || c == false {
		c = obj["cmd"]
	}
	switch c := c.(type) {
	case string:
		return c
	case []any:
		parts := make([]string, len(c))
		for i, p := range c {
			s, ok := p.(string)
			if !ok {
				return ""
			}
			parts[i] = s
		}
		return strings.Join(parts, " ")
	}
	return ""
}

var argsCases = []string{
	`{"command":"rm -rf /"}`, `{"cmd":"ls"}`, `{"command":null,"cmd":"ls"}`, `{"command":false,"cmd":"ls"}`,
	`{"command":true,"cmd":"ls"}`, `{"command":["rm","-rf","/"]}`, `{"command":["rm",1]}`, `{"command":["rm",null]}`,
	`{"command":[]}`, `{"command":{}}`, `{"command":1}`, `{"Command":"rm -rf /"}`, `{"command":"a","command":"b"}`,
	` { "command" : "x" , "other" : [1, 2.5e-3, -0, {"a":[true,false,null]}] } `, `{"command":"x",}`, `{"command":"x"`,
	`{"command":"x"} {}`, `["rm -rf /"]`, `"rm -rf /"`, `null`, `1`, ``, ` `, `{}`, `{"command":"\u0072m -rf \/"}`,
	`{"command":"a\"b\\c\n\t\b\f\r"}`, `{"command":"\ud83d\ude00 \ud83d x \ude00 \ud83d\u0041"}`, `{"command":"\u00"}`,
	`{"command":"` + "\xff\xfe" + ` rm"}`, `{"command":"` + "\x01" + `"}`, `{"command":"` + "\x7f" + `"}`, `{"command":"x\q"}`,
	`{"command":01}`, `{"command":1.}`, `{"command":.5}`, `{"command":-}`, `{"command":1e}`, `{"command":1E+2,"cmd":"y"}`,
	`{"command":tru}`, `{"command":nul}`, `{"command":"x", "cmd":[}`, `{command:"x"}`, `{"command" "x"}`, `{,}`,
	"{\"command\":\"x\"}\x00", `{"command":"é ü 漢字"}`, `{"cmd":["a","b"],"command":null}`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000), strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	`{"x":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `,"command":"deep"}`,
	`{"x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `,"command":"deep"}`,
}

func TestCommandMatchesTheTwinsJq(t *testing.T) {
	for _, args := range argsCases {
		name := args
		if len(name) > 60 {
			name = name[:60]
		}
		if got, want := command(args), jqCommand(args); got != want {
			t.Errorf("%q: %q, jq says %q", name, got, want)
		}
	}
}

// FuzzCommand checks command against the jq oracle on any input (go test -fuzz FuzzCommand).
func FuzzCommand(f *testing.F) {
	for _, s := range argsCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		if got, want := command(args), jqCommand(args); got != want {
			t.Fatalf("%q: %q, jq says %q", args, got, want)
		}
	})
}

package hookwire

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

func TestCheckPreset(t *testing.T) {
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"", true},
		{"default", true},
		{"a.b_c-9", true},
		{strings.Repeat("p", 64), true},
		{strings.Repeat("p", 65), false},
		{"../x", false},
		{"-lead", false},
		{"sp ace", false},
	} {
		if err := CheckPreset(tt.name); (err == nil) != tt.ok {
			t.Errorf("CheckPreset(%q) = %v", tt.name, err)
		}
	}
}

// The loop is the regexp the rule is written as, on every byte at every place.
func TestCheckPresetIsTheRegexp(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	for c := 0; c < 256; c++ {
		for _, p := range []string{string(rune(c)), "a" + string([]byte{byte(c)}), string([]byte{byte(c)}) + "a", "ab" + string([]byte{byte(c)}) + "c"} {
			if got, want := validPreset(p), re.MatchString(p); got != want {
				t.Errorf("%q: %v, the regexp says %v", p, got, want)
			}
		}
	}
}

func TestSystemMessage(t *testing.T) {
	if got, want := string(SystemMessage(`a <b> & "c"`)), `{"systemMessage":"a <b> & \"c\""}`; got != want {
		t.Errorf("SystemMessage = %s, want %s", got, want)
	}
}

func ExampleIsHandled() {
	fmt.Println(IsHandled(EventPreToolUse), IsHandled("Notification"))
	// Output: true false
}

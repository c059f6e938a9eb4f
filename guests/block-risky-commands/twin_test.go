package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"
)

// twinCommand runs the bash twin's steps 1 and 2 (tool_command in block-risky-commands.sh,
// which reads the arguments JSON itself) on args and returns the command it read, or "" when it
// skips.
func twinCommand(t testing.TB, args string) string {
	t.Helper()
	// $0 is not the script's name, so sourcing it only defines its functions.
	cmd := exec.Command("bash", "-c", `source ./block-risky-commands.sh && tool_command && printf %s "$cmd"`, "twin-test")
	cmd.Env = []string{"PIXIE_TOOL_NAME=Bash", "PATH=" + os.Getenv("PATH")}
	cmd.Stdin = strings.NewReader(args)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	switch {
	case stderr.Len() > 0:
		t.Fatalf("the twin wrote to stderr: %s", stderr.String())
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return ""
	case err != nil:
		t.Fatal(err)
	}
	return string(out)
}

// asGuestBytes writes what the twin read as the guest holds it: bash strings keep invalid UTF-8
// bytes as they are, where the guest has U+FFFD for each; and the twin has U+FFFD for \u0000
// (bash strings hold no NUL), which the guest keeps. No pattern of the rule tells these apart.
func asGuestBytes(twin, guest string) (string, string) {
	var b strings.Builder
	for _, r := range twin { // ranging over invalid UTF-8 yields U+FFFD for each byte
		b.WriteRune(r)
	}
	return b.String(), strings.ReplaceAll(guest, "\x00", string(utf8.RuneError))
}

// TestTwinReadsTheCommandAsTheGuest: on every input of the guest's reader test, the twin reads
// the command the guest reads (command, args.go), or skips where it skips.
func TestTwinReadsTheCommandAsTheGuest(t *testing.T) {
	for _, args := range argsCases {
		name := args
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) {
			got, want := asGuestBytes(twinCommand(t, args), command(args))
			if got != want {
				t.Errorf("the twin reads %q, the guest %q", got, want)
			}
		})
	}
}

// FuzzTwinCommand checks the twin's reader against the guest's on any input (go test -fuzz
// FuzzTwinCommand; slow: a bash process per input).
func FuzzTwinCommand(f *testing.F) {
	for _, s := range argsCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		if got, want := asGuestBytes(twinCommand(t, args), command(args)); got != want {
			t.Fatalf("%q: the twin reads %q, the guest %q", args, got, want)
		}
	})
}

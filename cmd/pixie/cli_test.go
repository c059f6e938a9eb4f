package main

import (
	"bytes"
	"context"
	"flag"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/testutil"
)

// walk calls fn for every command of the table with its full path.
func walk(c *command, path []string, fn func(c *command, path []string)) {
	fn(c, path)
	for _, s := range c.subs {
		walk(s, append(append([]string(nil), path...), s.name), fn)
	}
}

func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := execute(context.Background(), cmdIO{strings.NewReader(""), &out, &errb}, args)
	return code, out.String(), errb.String()
}

// TestHelpExitsZeroEverywhere asks every command of the table for --help and -h: exit 0, the
// help on stdout, nothing on stderr; a leaf's help lists exactly its own flags.
func TestHelpExitsZeroEverywhere(t *testing.T) {
	n := 0
	walk(root, nil, func(c *command, path []string) {
		if c.hidden {
			return
		}
		for _, h := range []string{"--help", "-h"} {
			args := append(append([]string(nil), path...), h)
			code, out, errOut := runCLI(args...)
			name := strings.Join(args, " ")
			if code != 0 || errOut != "" || !strings.Contains(out, "usage") {
				t.Errorf("pixie %s: exit %d\nstdout: %s\nstderr: %s", name, code, out, errOut)
				continue
			}
			n++
			if c.flags == nil {
				continue
			}
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			c.flags(fs)
			own := map[string]bool{}
			fs.VisitAll(func(f *flag.Flag) { own[f.Name] = true })
			for _, line := range strings.Split(out, "\n") {
				trim := strings.TrimSpace(line)
				if strings.HasPrefix(line, "  -") {
					fl, _, _ := strings.Cut(strings.TrimPrefix(trim, "-"), " ")
					if !own[fl] {
						t.Errorf("pixie %s lists -%s, which it does not take", name, fl)
					}
					delete(own, fl)
				}
			}
			for fl := range own {
				t.Errorf("pixie %s does not list its flag -%s", name, fl)
			}
		}
	})
	if n < 60 {
		t.Fatalf("only %d help pages; the walk is broken", n)
	}
	// `pixie help VERB SUB` is the same page.
	code, out, _ := runCLI("help", "gate", "try")
	if code != 0 || !strings.Contains(out, "usage: pixie gate try") || strings.Contains(out, "-session") {
		t.Fatalf("help gate try: %d\n%s", code, out)
	}
	// The one-flag-set-for-all days: gate apply's help must not offer try's flags.
	if _, out, _ := runCLI("gate", "apply", "--help"); strings.Contains(out, "-target") || !strings.Contains(out, "-f ") {
		t.Fatalf("gate apply --help:\n%s", out)
	}
}

// TestServeHelpBinary: the real binary, `serve --help` exits 0 (it used to exit 1 with "flag:
// help requested").
func TestServeHelpBinary(t *testing.T) {
	out, code := testutil.RunPixie(t, context.Background(), nil, "serve", "--help")
	if code != 0 || strings.Contains(out, "help requested") || !strings.Contains(out, "-addr") {
		t.Fatalf("serve --help: %d\n%s", code, out)
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"gate", "--help"}, {"gate", "apply", "-h"}, {"init", "--help"}, {"hook", "--help"}} {
		if out, code := testutil.RunPixie(t, context.Background(), nil, args...); code != 0 {
			t.Errorf("%v: %d\n%s", args, code, out)
		}
	}
}

func TestUsageErrorsArePrintedOnce(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"gate", "apply"}, "needs -f FILE"},
		{[]string{"gate", "apply", "-x"}, "flag provided but not defined: -x"},
		{[]string{"gate", "frob"}, `unknown subcommand "frob"`},
		{[]string{"frob"}, `unknown verb "frob"`},
		{[]string{"hint", "send"}, "want 1 argument, got 0"},
	}
	for _, c := range cases {
		code, out, errOut := runCLI(c.args...)
		if code != 2 || out != "" || strings.Count(errOut, c.want) != 1 {
			t.Errorf("%v: exit %d\nstdout: %s\nstderr: %s", c.args, code, out, errOut)
		}
	}
}

// TestClientErrorsNameURLAndToken: a 401 names the server and where the token came from; a
// --url without a scheme says what to write; a missing token file says who writes it.
func TestClientErrorsNameURLAndToken(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"code":"unauthorized","message":"a valid admin token is required"}}`))
	}))
	defer ts.Close()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "token"), []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PIXIE_ADMIN_TOKEN", "")
	t.Setenv("PIXIE_SERVER_URL", "")
	code, _, errOut := runCLI("gate", "list", "--url", ts.URL, "--home", home)
	if code != 1 || !strings.Contains(errOut, "401") || !strings.Contains(errOut, ts.URL) ||
		!strings.Contains(errOut, filepath.Join(home, "token")) || !strings.Contains(errOut, "URL from --url") {
		t.Errorf("401 from the file's token: %d\n%s", code, errOut)
	}
	t.Setenv("PIXIE_ADMIN_TOKEN", "wrong")
	t.Setenv("PIXIE_SERVER_URL", ts.URL)
	if code, _, errOut = runCLI("hint", "ls", "--home", home); code != 1 || !strings.Contains(errOut, "$PIXIE_ADMIN_TOKEN") || !strings.Contains(errOut, "$PIXIE_SERVER_URL") {
		t.Errorf("401 from the environment's token: %d\n%s", code, errOut)
	}
	if code, _, errOut = runCLI("hint", "ls", "--token", "x", "--home", home); code != 1 || !strings.Contains(errOut, "token came from --token") {
		t.Errorf("401 from the flag's token: %d\n%s", code, errOut)
	}
	if code, _, errOut = runCLI("gate", "list", "--url", "127.0.0.1:7777", "--home", home); code != 1 ||
		!strings.Contains(errOut, "has no scheme: write http://127.0.0.1:7777") || strings.Count(errOut, "pixie") != 1 {
		t.Errorf("--url without a scheme: %d\n%s", code, errOut)
	}
	t.Setenv("PIXIE_ADMIN_TOKEN", "")
	empty := t.TempDir()
	if code, _, errOut = runCLI("gate", "list", "--home", empty); code != 1 || !strings.Contains(errOut, filepath.Join(empty, "token")+" does not exist") {
		t.Errorf("no token file: %d\n%s", code, errOut)
	}
	// Unreachable: the URL and where it came from.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	if code, _, errOut = runCLI("gate", "list", "--url", dead, "--token", "x"); code != 1 || !strings.Contains(errOut, dead) || !strings.Contains(errOut, "URL from --url") {
		t.Errorf("unreachable: %d\n%s", code, errOut)
	}
}

// TestRefusalPrintsEachProblemOnce: a refused save's problems are on their own lines, once each.
func TestRefusalPrintsEachProblemOnce(t *testing.T) {
	ts, _ := gateCLIServer(t, "{}")
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("gates:\n  - name: fmt\n    point: user-message\n    task: \"{{hooks.nope.text}}\"\n  - name: empty\n    point: turn-end\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runGateCLI(t, ts, "", "apply", "-f", bad)
	if code != 1 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	for _, f := range []string{"gates[0].task:", "gates[1].task:"} {
		if strings.Count(errOut, f) != 1 {
			t.Errorf("%s printed %d times:\n%s", f, strings.Count(errOut, f), errOut)
		}
	}
	if !strings.Contains(errOut, "2 problems") {
		t.Errorf("no count:\n%s", errOut)
	}
}

// TestYAMLErrorNamesTheLine: a bad indent on line 7 of a gate file is reported at line 7 (the
// parser says line 1, where the list began).
func TestYAMLErrorNamesTheLine(t *testing.T) {
	ts, _ := gateCLIServer(t, "{}")
	bad := filepath.Join(t.TempDir(), "gates.yaml")
	doc := "gates:\n  - name: a\n    point: user-message\n    task: t\n  - name: b\n    point: turn-end\n     task: oops\n"
	if err := os.WriteFile(bad, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runGateCLI(t, ts, "", "apply", "-f", bad)
	if code != 1 || !strings.Contains(errOut, bad+" is not YAML: line 7:") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
}

// TestSecondServerOnTheSameHome: a second `pixie serve` with the same home says a server already
// uses it (not a raw Badger lock error).
func TestSecondServerOnTheSameHome(t *testing.T) {
	home := t.TempDir()
	p := testutil.StartServer(t, home, nil)
	defer p.Stop(t)
	out, code := testutil.RunPixie(t, context.Background(), nil, "serve", "--home", home, "--addr", testutil.FreeAddr(t))
	if code != 1 || !strings.Contains(out, "is using the home "+home) || strings.Count(out, "pixie:") != 1 {
		t.Fatalf("second server: %d\n%s", code, out)
	}
}

// TestBusyPortSuggestsAddr: a second server on a busy port says to use --addr.
func TestBusyPortSuggestsAddr(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	out, code := testutil.RunPixie(t, context.Background(), nil, "serve", "--home", t.TempDir(), "--addr", ln.Addr().String())
	if code != 1 || !strings.Contains(out, "already in use") || !strings.Contains(out, "--addr 127.0.0.1:") {
		t.Fatalf("busy port: %d\n%s", code, out)
	}
}

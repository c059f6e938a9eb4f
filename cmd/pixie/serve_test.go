package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/testutil"
)

func TestServeCreatesAndReusesHome(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	p := testutil.StartServer(t, home, nil)
	tok := p.Token(t)
	st, err := os.Stat(filepath.Join(home, "token"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("token mode %v, want 0600", st.Mode().Perm())
	}
	for _, d := range []string{"data", "commands", "blobs", "cache"} {
		if fi, err := os.Stat(filepath.Join(home, d)); err != nil || !fi.IsDir() {
			t.Fatalf("home lacks %s/: %v", d, err)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "data", "MANIFEST")); err != nil {
		t.Fatalf("no Badger store in data/: %v", err)
	}
	if !strings.Contains(p.Stdout.String(), tok) || !strings.Contains(p.Stdout.String(), p.URL) {
		t.Fatalf("first start must print the URL and the token once:\n%s", p.Stdout)
	}
	p.Stop(t)
	if strings.Contains(p.Stderr.String(), tok) {
		t.Fatal("token in the logs")
	}

	p2 := testutil.StartServer(t, home, nil)
	if p2.Token(t) != tok {
		t.Fatal("second start replaced the token")
	}
	if strings.Contains(p2.Stdout.String(), tok) {
		t.Fatal("second start printed the token again")
	}
	p2.Stop(t)
}

func TestBadConfigNamesTheKey(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		env  []string
		args []string
		want string
	}{
		{"unknown-top-key", "adrr: 127.0.0.1:1\n", nil, nil, "adrr"},
		{"unknown-nested-key", "model:\n  provder: openai\n", nil, nil, "model.provder"},
		{"bad-duration", "server:\n  readTimeout: soon\n", nil, nil, "server.readTimeout"},
		{"bad-provider", "model:\n  provider: nope\n", nil, nil, "model.provider"},
		{"bad-env", "", []string{"PIXIE_HINTS_MAX_PER_STEP=many"}, nil, "PIXIE_HINTS_MAX_PER_STEP"},
		{"bad-flag-key", "", nil, []string{"--set", "nope.key=1"}, "nope.key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			if c.yaml != "" {
				if err := os.WriteFile(filepath.Join(home, "pixie.yaml"), []byte(c.yaml), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			args := append([]string{"serve", "--home", home, "--addr", testutil.FreeAddr(t)}, c.args...)
			out, code := testutil.RunPixie(t, context.Background(), c.env, args...)
			if code == 0 {
				t.Fatalf("start-up succeeded with a bad configuration:\n%s", out)
			}
			if !strings.Contains(out, c.want) {
				t.Fatalf("message does not name %q:\n%s", c.want, out)
			}
		})
	}
}

func TestConfigMasksSecrets(t *testing.T) {
	home := t.TempDir()
	out, code := testutil.RunPixie(t, context.Background(),
		[]string{"PIXIE_MODEL_PROVIDER=openai", "PIXIE_MODEL_MODEL=m", "PIXIE_MODEL_API_KEY=sk-very-secret"}, "config", "--home", home)
	if code != 0 {
		t.Fatalf("pixie config: %d\n%s", code, out)
	}
	if strings.Contains(out, "sk-very-secret") || !strings.Contains(out, "model.apiKey") || !strings.Contains(out, "********") {
		t.Fatalf("config output does not mask the key:\n%s", out)
	}
}

// A database that cannot be reached stops start-up with an error naming it, password masked,
// and nothing of the password reaches the output.
func TestServeUnreachableDatabase(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, code := testutil.RunPixie(t, ctx, []string{"PIXIE_STORE_DRIVER=postgres",
		"PIXIE_STORE_POSTGRES_URL=postgres://pixie:Sekr1t-pw@127.0.0.1:1/pixie"}, "serve", "--home", home, "--addr", "127.0.0.1:0")
	if code == 0 {
		t.Fatalf("serve started on an unreachable database:\n%s", out)
	}
	if strings.Contains(out, "Sekr1t-pw") {
		t.Fatalf("the password leaked:\n%s", out)
	}
	if !strings.Contains(out, "cannot reach the database at postgres://pixie:xxxxx@127.0.0.1:1/pixie") {
		t.Fatalf("unclear error:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(home, "token")); err == nil {
		t.Fatal("a token was made although the store never opened")
	}
	// `pixie config` shows the URL with the password masked.
	out, code = testutil.RunPixie(t, ctx, []string{"PIXIE_STORE_DRIVER=postgres",
		"PIXIE_STORE_POSTGRES_URL=postgres://pixie:Sekr1t-pw@127.0.0.1:1/pixie"}, "config", "--home", home, "--offline")
	if code != 0 || strings.Contains(out, "Sekr1t-pw") || !strings.Contains(out, "postgres://pixie:xxxxx@127.0.0.1:1/pixie") {
		t.Fatalf("config (%d):\n%s", code, out)
	}
}

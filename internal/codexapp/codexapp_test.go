package codexapp_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/codexapp"
	"github.com/pixie-dev/pixie/internal/testutil"
)

// TestTrustInAPrivateHome records the trust of the hooks in a private CODEX_HOME (what Pet does
// for each Codex Run) with the pinned codex: before, Codex lists them untrusted; after, trusted
// with the hash it computed; a hook the selector leaves out stays untrusted.
func TestTrustInAPrivateHome(t *testing.T) {
	codex := testutil.Tool(t, testutil.ToolCodex)
	home, dir := t.TempDir(), t.TempDir()
	hooks := `{"hooks":{"PreToolUse":[{"matcher":"*","hooks":[{"type":"command","command":"/bin/true ours","timeout":30}]}],` +
		`"Stop":[{"hooks":[{"type":"command","command":"/bin/true theirs","timeout":30}]}]}}`
	file := filepath.Join(home, "hooks.json")
	if err := os.WriteFile(file, []byte(hooks), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	c, err := codexapp.Start(ctx, codexapp.Options{Command: codex, Dir: dir, Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "CODEX_HOME=" + home}, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	status := func() map[string]string {
		hs, _, err := c.Hooks(dir)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, h := range hs {
			out[h.Command] = h.TrustStatus
		}
		return out
	}
	if st := status(); st["/bin/true ours"] == "trusted" || len(st) != 2 {
		t.Fatalf("before: %v", st)
	}
	got, err := codexapp.Trust(c, dir, file, false, func(h codexapp.Hook) bool { return strings.HasSuffix(h.Command, " ours") })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("started and trusted in %s", time.Since(start))
	if len(got) != 1 || got[0].CurrentHash == "" {
		t.Fatalf("trusted %+v", got)
	}
	if st := status(); st["/bin/true ours"] != "trusted" || st["/bin/true theirs"] == "trusted" {
		t.Fatalf("after: %v", st)
	}
	if _, err := codexapp.Trust(c, dir, file, false, func(codexapp.Hook) bool { return false }); err == nil {
		t.Fatal("trusting nothing succeeded")
	}
}

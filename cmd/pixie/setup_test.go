package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/hooks"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/server"
)

// TestGateListShowsSetupProblems: `pixie gate list` prints, after the gates, the presets hook
// calls asked for that do not exist (count, last call, the fix), the missing default preset
// once, and the hook calls without a valid token; each line goes once the problem is fixed.
func TestGateListShowsSetupProblems(t *testing.T) {
	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := gate.New(t.Context(), gate.Config{Store: st, Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	hs, err := hooks.New(t.Context(), hooks.Config{Store: st, Gates: svc})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(testServer(t, server.Config{Token: gateCLIToken}, server.Deps{Store: st, Gates: svc, Hooks: hs}).Handler())
	t.Cleanup(ts.Close)
	list := func() string {
		t.Helper()
		code, out, stderr := runGateCLI(t, ts, "", "list")
		if code != 0 || stderr != "" {
			t.Fatalf("list: %d %q %q", code, out, stderr)
		}
		return out
	}

	noDefault := `warning: no preset is called "default": hooks that name no preset use it`
	if out := list(); !strings.Contains(out, noDefault) || strings.Count(out, "warning: ") != 1 {
		t.Fatalf("a fresh server:\n%s", out)
	}
	for range 2 {
		testutil.PostStopHook(t, ts.URL, "sess-1", "?preset=reveiw&host=codex", "Bearer "+gateCLIToken)
	}
	testutil.PostStopHook(t, ts.URL, "sess-1", "", "Bearer "+gateCLIToken)
	testutil.PostStopHook(t, ts.URL, "sess-1", "?preset=reveiw", "")
	testutil.PostStopHook(t, ts.URL, "sess-1", "?preset=reveiw", "Bearer wrong-token-5e1")
	out := list()
	for _, want := range []string{
		`warning: hooks asked for the preset "reveiw" 2 times (the last at `,
		`session sess-1, turn-end, codex), but it does not exist, so those sessions ran no gates; fix: create it (a preset named reveiw in your gates file, then pixie gate apply -f gates.yaml), or point those hooks at an existing preset (pixie init claude --preset NAME)`,
		`warning: hooks asked for the preset "default" 1 time (`,
		`(it is hooks.defaultPreset, used by hooks that name no preset)`,
		`warning: 2 hook calls carried no valid token since the server started (1 without a token, 1 with a wrong one; the last at `,
		`fix: start the agent with PIXIE_TOKEN set to the admin token`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, noDefault) || strings.Contains(out, "wrong-token-5e1") || strings.Count(out, "warning: ") != 3 {
		t.Errorf("list prints the default preset twice, the token, or more:\n%s", out)
	}

	// Creating both presets clears their lines; the refused calls stay (they happened).
	gates := "gates:\n  - name: g\n    point: turn-end\n    task: Check.\npresets:\n  - name: default\n    gates: [{gate: g}]\n  - name: reveiw\n    gates: [{gate: g}]\n"
	if code, out, stderr := runGateCLI(t, ts, gates, "apply", "-f", "-"); code != 0 {
		t.Fatalf("apply: %d %s %s", code, out, stderr)
	}
	out = list()
	if strings.Contains(out, "reveiw\" ") || strings.Contains(out, `"default"`) || strings.Count(out, "warning: ") != 1 || !strings.Contains(out, "2 hook calls carried no valid token") {
		t.Errorf("after creating the presets:\n%s", out)
	}
}

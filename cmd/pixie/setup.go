package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/server"
)

// The set-up problems the server has seen (GET /v1/gates/setup), as `pixie gate list` and
// `pixie doctor` print them: presets hooks asked for that do not exist, no default preset, and
// hook calls without a valid token.

const timeLayout = "2006-01-02 15:04:05"

// setupWarnings are the report's lines, each a problem with its fix. skip names presets the
// caller reported already.
func setupWarnings(r server.SetupReport, skip map[string]bool) []string {
	var out []string
	def := ""
	if r.DefaultPreset != nil {
		def = r.DefaultPreset.Name
	}
	listedDefault := false
	for _, m := range r.MissingPresets {
		if m.Name == def {
			listedDefault = true
		}
		if skip[m.Name] {
			continue
		}
		out = append(out, missingPresetLine(m, def))
	}
	if d := r.DefaultPreset; d != nil && !d.Exists && !listedDefault && !skip[d.Name] {
		out = append(out, fmt.Sprintf("no preset is called %q: hooks that name no preset use it (hooks.defaultPreset), so their sessions run no gates; "+
			"fix: add it to your gates file (pixie gate apply -f gates.yaml), or set the hooks' preset with pixie init claude --preset NAME", d.Name))
	}
	if h := r.RefusedHookCalls; h != nil && h.NoToken+h.WrongToken > 0 {
		n := h.NoToken + h.WrongToken
		out = append(out, fmt.Sprintf("%d hook call%s carried no valid token since the server started (%d without a token, %d with a wrong one; the last at %s), so Pixie checked nothing in those steps; "+
			"fix: start the agent with PIXIE_TOKEN set to the admin token (the token file in the Pixie home, ~/.pixie/token by default); pixie doctor checks the set-up",
			n, plural(n), h.NoToken, h.WrongToken, h.LastAt.Local().Format(timeLayout)))
	}
	return out
}

func missingPresetLine(m gate.MissingPreset, def string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "hooks asked for the preset %q %d time%s (the last at %s, session %s, %s", m.Name, m.Count, plural(m.Count),
		m.LastSeen.Local().Format(timeLayout), m.LastSession, m.LastPoint)
	if m.LastHost != "" {
		b.WriteString(", " + m.LastHost)
	}
	b.WriteString("), but it does not exist, so those sessions ran no gates")
	if m.Name == def {
		b.WriteString(" (it is hooks.defaultPreset, used by hooks that name no preset)")
	}
	fmt.Fprintf(&b, "; fix: create it (a preset named %s in your gates file, then pixie gate apply -f gates.yaml), or point those hooks at an existing preset (pixie init claude --preset NAME)", m.Name)
	return b.String()
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// getSetup reads GET /v1/gates/setup; ok is false when the server has no such route (an older
// server).
func getSetup(ctx context.Context, c *apiClient) (r server.SetupReport, ok bool, err error) {
	if err := c.do(ctx, http.MethodGet, "/v1/gates/setup", nil, &r); err != nil {
		if errs.Is(err, errs.NotFound) {
			return r, false, nil
		}
		return r, false, err
	}
	return r, true, nil
}

// printSetupWarnings prints the report's lines as "warning: …" (gate list).
func printSetupWarnings(w io.Writer, r server.SetupReport) {
	for _, l := range setupWarnings(r, nil) {
		fmt.Fprintln(w, "warning: "+l)
	}
}

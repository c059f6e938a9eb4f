package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/hookcmd"
	"github.com/pixie-dev/pixie/internal/testutil"
)

// BenchmarkHookPreToolUse measures a PreToolUse round trip for a gate the WASM guest concludes
// (block-risky-commands denying `git push --force`) against the real server process: through
// the http endpoint (keep-alive client, as Claude Code's http hook), through the command adapter
// (a new process per call, process start included: `pixie hook claude`, and pixie-hook beside
// the binary), and "added": an http call and a pixie-hook call back to back per iteration, whose
// differences are what the adapter adds. Each reports p50 and p99 in milliseconds.
func BenchmarkHookPreToolUse(b *testing.B) {
	p, env := exampleServer(b)
	tok := p.Token(b)
	input := []byte(`{"session_id":"bench","cwd":"/tmp","prompt_id":"p1","permission_mode":"default",` +
		`"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"git push --force origin main"},"tool_use_id":"toolu_01"}`)
	const wantReason = "Blocked: force push."
	check := func(b *testing.B, out []byte) {
		var o struct {
			H struct {
				D string `json:"permissionDecision"`
				R string `json:"permissionDecisionReason"`
			} `json:"hookSpecificOutput"`
		}
		if json.Unmarshal(out, &o) != nil || o.H.D != "deny" || !strings.HasPrefix(o.H.R, wantReason) {
			b.Fatalf("answer %s", out)
		}
	}

	// post is one hook call over the kept-alive http client: Claude Code's http hook.
	client := &http.Client{Timeout: 30 * time.Second}
	post := func(b *testing.B) func() []byte {
		return func() []byte {
			req, _ := http.NewRequest(http.MethodPost, p.URL+"/v1/hooks/claude-code?preset=default", bytes.NewReader(input))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			defer resp.Body.Close()
			out, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 {
				b.Fatalf("%d %s", resp.StatusCode, out)
			}
			return out
		}
	}
	// timeCalls checks a warm-up call, then times b.N calls back to back and reports their
	// percentiles (the first timed answer is checked too).
	timeCalls := func(b *testing.B, call func() []byte) {
		check(b, call()) // warm: compile and pool
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			out := call()
			lat = append(lat, time.Since(t0))
			if i == 0 {
				check(b, out)
			}
		}
		b.StopTimer()
		reportPercentiles(b, lat)
	}

	b.Run("http", func(b *testing.B) { timeCalls(b, post(b)) })

	command := func(b *testing.B, argv ...string) func() []byte {
		return func() []byte {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, argv[0], append(append([]string(nil), argv[1:]...), "claude", "--preset", "default")...)
			cmd.Env = append(hookEnv(), env...)
			cmd.Stdin = bytes.NewReader(input)
			out, err := cmd.Output()
			if err != nil {
				b.Fatalf("%v: %s", err, out)
			}
			return out
		}
	}
	for _, ad := range hookAdapters(b) {
		name := "command"
		if ad.name == hookcmd.Name {
			name = ad.name
		}
		b.Run(name, func(b *testing.B) { timeCalls(b, command(b, ad.argv...)) })
	}

	b.Run("added", func(b *testing.B) {
		post := post(b)
		adapter := command(b, filepath.Join(filepath.Dir(testutil.PixieBinary(b)), hookcmd.Name))
		check(b, post())
		check(b, adapter())
		added := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			post()
			t1 := time.Now()
			out := adapter()
			added = append(added, time.Since(t1)-t1.Sub(t0))
			if i == 0 {
				check(b, out)
			}
		}
		b.StopTimer()
		reportPercentiles(b, added)
	})
}

// reportPercentiles reports p50 and p99 of the latencies in milliseconds.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

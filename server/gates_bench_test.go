package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/runtime"
)

// BenchmarkGateEvaluateHTTP measures POST /v1/gates/evaluate end to end over a real HTTP
// connection (keep-alive) for a gate whose bash script concludes (exit 11) and one whose script
// skips (exit 10): admin auth, JSON, the real bash executor (full policy) and a synced Badger
// commit of the run record. It reports p50 and p99 in milliseconds.
func BenchmarkGateEvaluateHTTP(b *testing.B) {
	for _, c := range []struct{ name, script string }{
		{"script-exit11", "#!/bin/bash\nprintf '{\"verdict\":\"stop\",\"reason\":\"no title\"}'; exit 11\n"},
		{"script-exit10", "#!/bin/bash\nexit 10\n"},
	} {
		b.Run(c.name, func(b *testing.B) {
			f := newGateFixture(b, `{}`)
			f.script(b, "rule.sh", c.script)
			set := gate.Set{Gates: []gate.Gate{{Name: "g", Enabled: true, Point: "user-message", Rule: &gate.Rule{Kind: runtime.KindScript, Name: "rule.sh"},
				Advanced: gate.Options{ShowInChat: true, OnError: "continue", TimeoutSeconds: 60, RedoLimit: 1}}},
				Presets: []gate.Preset{{Name: "dev", Gates: []gate.Attachment{{Gate: "g", Enabled: true}}}}}
			if st, eb := f.call(b, http.MethodPut, "/v1/gates", set, nil); st != 200 {
				b.Fatalf("save: %d %+v", st, eb)
			}
			req := f.session("user-message", "please fix the build")
			client := &http.Client{}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req.Turn = i
				raw, _ := json.Marshal(req)
				hr, _ := http.NewRequest(http.MethodPost, f.ts.URL+"/v1/gates/evaluate", bytes.NewReader(raw))
				hr.Header.Set("Authorization", "Bearer "+testToken)
				hr.Header.Set("Content-Type", "application/json")
				start := time.Now()
				resp, err := client.Do(hr)
				if err != nil {
					b.Fatal(err)
				}
				var res gate.Result
				err = json.NewDecoder(resp.Body).Decode(&res)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat = append(lat, time.Since(start))
				if err != nil || resp.StatusCode != 200 || res.RunID == "" || res.Error != "" {
					b.Fatalf("%d %+v %v", resp.StatusCode, res, err)
				}
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
			b.ReportMetric(q(0.50), "p50-ms")
			b.ReportMetric(q(0.99), "p99-ms")
		})
	}
}

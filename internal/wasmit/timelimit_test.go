package wasmit

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/modules"
)

// TestTimeLimitThroughEvaluate uploads the modules that used to freeze the server (recursion
// without a loop, the Extism kernel looping, and the other ways runtime/wasm's TestTimeLimit
// covers) through POST /v1/modules, runs each as a gate's rule through POST
// /v1/gates/evaluate under both error policies, and checks that each evaluation answers with
// the timeout error soon after the gate's limit, that a garbage collection started meanwhile
// finishes, and that GET /healthz answers all the while.
func TestTimeLimitThroughEvaluate(t *testing.T) {
	s := newStack(t, stackOptions{})
	mods := []string{"treerec", "gate_kernel", "mutual", "indirect", "brtable", "fillspin"}
	var set gate.Set
	for _, m := range mods {
		wasm, err := os.ReadFile(filepath.Join(testutil.Root(), "runtime", "wasm", "testdata", "wat", m+".wasm"))
		if err != nil {
			t.Fatal(err)
		}
		name := strings.ReplaceAll(m, "_", "-")
		var mod modules.Module
		if st, eb := s.request(t, http.MethodPost, "/v1/modules?name="+name, "application/wasm", bytes.NewReader(wasm), &mod); st != http.StatusCreated {
			t.Fatalf("upload %s: %d %+v", m, st, eb)
		}
		for _, policy := range []string{gate.OnErrorContinue, gate.OnErrorStop} {
			g := gateWith(name+"-"+policy, "user-message", "unused", moduleRule(name), policy, 1)
			set.Gates = append(set.Gates, g)
			set.Presets = append(set.Presets, gate.Preset{Name: g.Name, Gates: []gate.Attachment{{Gate: g.Name, Enabled: true}}})
		}
	}
	s.save(t, set)
	for _, g := range set.Gates {
		t.Run(g.Name, func(t *testing.T) {
			stop := make(chan struct{})
			var polls, slow atomic.Int64
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { // /healthz, every 10 ms, each answer within a second
				defer wg.Done()
				client := &http.Client{Timeout: 5 * time.Second}
				for {
					select {
					case <-stop:
						return
					case <-time.After(10 * time.Millisecond):
					}
					t0 := time.Now()
					resp, err := client.Get(s.ts.URL + "/healthz")
					if err != nil {
						t.Errorf("healthz: %v", err)
						return
					}
					resp.Body.Close()
					polls.Add(1)
					if time.Since(t0) > time.Second {
						slow.Add(1)
					}
				}
			}()
			gcDone := make(chan struct{})
			go func() {
				defer wg.Done()
				time.Sleep(300 * time.Millisecond)
				goruntime.GC()
				close(gcDone)
			}()
			start := time.Now()
			res := s.evaluate(t, gate.EvalRequest{Point: "user-message", Turn: 1, Target: "hello",
				Session: gate.Session{ID: "s-" + g.Name, Preset: g.Name, Cwd: t.TempDir(), Policy: runtime.PolicyReadOnly}})
			took := time.Since(start)
			select {
			case <-gcDone:
			case <-time.After(5 * time.Second):
				t.Fatal("a garbage collection started during the run did not finish")
			}
			close(stop)
			wg.Wait()
			if !strings.Contains(res.Error, "The gate timed out after 1s") || res.ConcludedBy != gate.ByHookScript {
				t.Fatalf("%+v; want the timeout error", res)
			}
			if g.Advanced.OnError == gate.OnErrorStop && res.Action != gate.ActionRejected {
				t.Fatalf("stop policy: %+v", res)
			}
			if g.Advanced.OnError == gate.OnErrorContinue && (res.Action != gate.ActionNone || res.Text != "hello") {
				t.Fatalf("continue policy: %+v", res)
			}
			if took > 1500*time.Millisecond {
				t.Errorf("the evaluation answered after %s (limit 1s)", took)
			}
			if polls.Load() < 10 || slow.Load() > 0 {
				t.Errorf("healthz answered %d times, %d of them after more than a second", polls.Load(), slow.Load())
			}
			t.Logf("answered after %s; healthz answered %d times", took, polls.Load())
		})
	}
}

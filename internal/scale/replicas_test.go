package scale

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/hint"
	"github.com/pixie-dev/pixie/internal/redact"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime"
)

// askScript is a gate script whose `pixie ask` calls go to PIXIE_URL, the balancer: each lands
// on the next replica, not necessarily the one running the script.
const askScript = `#!/bin/bash
a=$(pixie ask "first") || exit 1
b=$(pixie ask "second") || exit 1
c=$(pixie ask "third") || exit 1
printf '{"verdict":"pass","note":"%s|%s|%s"}' "$a" "$b" "$c"
exit 11
`

// TestThreeReplicas runs three `pixie serve` processes on one PostgreSQL database with clients
// spread over them.
func TestThreeReplicas(t *testing.T) {
	model := fakeModel(t)
	lark := newFakeLark(t)
	workspace := t.TempDir()
	env := append(modelEnv(model),
		"PIXIE_HINTS_LEASE=3s", "PIXIE_HINTS_MAX_PENDING_PER_SESSION=2000", "PIXIE_HINTS_KEEP_CONSUMED=2000",
		"PIXIE_LARK_ENABLED=true", "PIXIE_LARK_BASE_URL="+lark.srv.URL, "PIXIE_LARK_DEFAULT_WORKSPACE="+workspace)
	cache := testutil.WasmCacheDir(t)
	c := startCluster(t, clusterOptions{n: 3, env: env, homeSetup: func(home string) {
		// The compile cache of the test run (a replica's own cache is local to it anyway).
		if err := os.MkdirAll(filepath.Join(home, "cache"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(cache, filepath.Join(home, "cache", "wasm")); err != nil {
			t.Fatal(err)
		}
		// Every replica deploys the same scripts, as a deployment's image would.
		if err := os.WriteFile(filepath.Join(home, "commands", "ask-thrice.sh"), []byte(askScript), 0o755); err != nil {
			t.Fatal(err)
		}
	}})
	const A, B, C = 0, 1, 2

	t.Run("one admin token, every replica's home", func(t *testing.T) {
		for i, p := range c.reps {
			if got := p.Token(t); got != c.token {
				t.Fatalf("replica %d's token file differs from the first replica's", i)
			}
			var info map[string]any
			c.must(i, http.MethodGet, "/v1/info", nil, &info)
			raw, _ := json.Marshal(info)
			if pw := redact.Password(c.url); len(pw) >= 8 && strings.Contains(string(raw), pw) {
				t.Fatalf("/v1/info shows the database password: %s", raw)
			}
			if !strings.Contains(string(raw), `"driver":"postgres"`) {
				t.Fatalf("/v1/info does not name the driver: %s", raw)
			}
			if rs, _ := info["replicas"].([]any); len(rs) != 3 {
				t.Fatalf("replica %d lists %d live replicas: %s", i, len(rs), raw)
			}
		}
		// A UI login on one replica is accepted by another (the cookie key and the session
		// table are shared).
		req, _ := http.NewRequest(http.MethodPost, c.reps[A].URL+"/login", strings.NewReader(`{"token":"`+c.token+`"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("login on A: %v %v", err, resp)
		}
		resp.Body.Close()
		get, _ := http.NewRequest(http.MethodGet, c.reps[C].URL+"/v1/info", nil)
		for _, ck := range resp.Cookies() {
			get.AddCookie(ck)
		}
		resp2, err := http.DefaultClient.Do(get)
		if err != nil || resp2.StatusCode != http.StatusOK {
			t.Fatalf("A's cookie on C: %v %v", err, resp2)
		}
		resp2.Body.Close()
	})

	t.Run("module on A, gate on B, evaluate on C", func(t *testing.T) {
		c.must(A, http.MethodPost, "/v1/modules?name=block-risky-commands", testutil.Guest(t, "block-risky-commands"), nil)
		rule := gate.Rule{Kind: runtime.KindModule, Name: "block-risky-commands"}
		set := gate.Set{
			Gates: []gate.Gate{{Name: "risky", Enabled: true, Point: "tool-before", Task: "unused", Rule: &rule,
				Advanced: gate.Options{OnError: gate.OnErrorContinue, Targets: gate.TargetsAll, TimeoutSeconds: 60, RedoLimit: 1}}},
			Presets: []gate.Preset{{Name: "p", Gates: []gate.Attachment{{Gate: "risky", Enabled: true}}}},
		}
		c.must(B, http.MethodPut, "/v1/gates", set, nil)
		args, _ := json.Marshal(map[string]string{"command": "rm -rf /", "description": "clean up"})
		req := gate.EvalRequest{Point: "tool-before", Tool: &gate.Tool{Name: "Bash", Args: args}, Target: string(args),
			Session: gate.Session{ID: "s-mod", Preset: "p", Cwd: t.TempDir(), Policy: runtime.PolicyFull}}
		var res gate.Result
		c.must(C, http.MethodPost, "/v1/gates/evaluate", req, &res)
		if res.Action != gate.ActionBlocked || res.Gate != "risky" {
			t.Fatalf("C ran %+v", res)
		}
	})

	t.Run("a script's helper calls answered whichever replica they reach", func(t *testing.T) {
		rule := gate.Rule{Kind: runtime.KindScript, Name: "ask-thrice.sh"}
		set := gate.Set{
			Gates: []gate.Gate{{Name: "asker", Enabled: true, Point: "user-message", Task: "unused", Rule: &rule,
				Advanced: gate.Options{OnError: gate.OnErrorContinue, Targets: gate.TargetsAll, TimeoutSeconds: 60, RedoLimit: 1}}},
			Presets: []gate.Preset{{Name: "ask", Gates: []gate.Attachment{{Gate: "asker", Enabled: true}}}},
		}
		var cur gate.Set
		c.must(C, http.MethodGet, "/v1/gates", nil, &cur)
		cur.Gates = append(cur.Gates, set.Gates...)
		cur.Presets = append(cur.Presets, set.Presets...)
		c.must(C, http.MethodPut, "/v1/gates", cur, nil)
		for _, i := range []int{A, B} {
			before := len(c.lb.served("/v1/helper/ask"))
			var res gate.Result
			req := gate.EvalRequest{Point: "user-message", Target: "hello", Session: gate.Session{ID: fmt.Sprintf("s-ask-%d", i), Preset: "ask", Cwd: t.TempDir(), Policy: runtime.PolicyFull}}
			c.must(i, http.MethodPost, "/v1/gates/evaluate", req, &res)
			want := "answer: first|answer: second|answer: third"
			if res.Error != "" || !containsNote(res.Notes, want) {
				t.Fatalf("replica %d: %+v", i, res)
			}
			served := c.lb.served("/v1/helper/ask")[before:]
			other := 0
			for _, r := range served {
				if r != i {
					other++
				}
			}
			if len(served) != 3 || other == 0 {
				t.Fatalf("replica %d's script: helper calls served by %v (want 3, some elsewhere)", i, served)
			}
		}
	})

	t.Run("hints put on all three, taken from all three, each once; a stream on A sees C's", func(t *testing.T) {
		events := c.stream(A)
		var st hint.Snapshot
		c.must(A, http.MethodGet, "/v1/hints/state", nil, &st)
		base := st.Revision
		// SSE on A sees a hint put on C.
		var put struct {
			HintID string `json:"hintId"`
		}
		sent := time.Now()
		c.must(C, http.MethodPost, "/v1/hints", map[string]string{"sessionId": "s-sse", "text": "from C"}, &put)
		seen := waitAction(t, events, func(a hint.Action) bool { return a.Kind == hint.ActionAdded && a.Hint.ID == put.HintID })
		t.Logf("A's stream saw C's hint %s after %s", put.HintID, seen.Sub(sent))
		c.must(B, http.MethodPost, "/v1/hints/take", map[string]any{"sessionId": "s-sse", "confirm": true}, nil)

		const perReplica = 20
		var mu sync.Mutex
		putIDs := map[string]bool{}
		var wg sync.WaitGroup
		for i := range c.reps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < perReplica; j++ {
					var r struct {
						HintID string `json:"hintId"`
					}
					c.must(i, http.MethodPost, "/v1/hints", map[string]string{"sessionId": "s-many", "text": fmt.Sprintf("r%d-%d", i, j)}, &r)
					mu.Lock()
					putIDs[r.HintID] = true
					mu.Unlock()
				}
			}()
		}
		delivered := map[string]int{}
		takers := sync.WaitGroup{}
		stop := make(chan struct{})
		for i := range c.reps {
			takers.Add(1)
			go func() {
				defer takers.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					var tk hint.Take
					c.must(i, http.MethodPost, "/v1/hints/take", map[string]any{"sessionId": "s-many"}, &tk)
					if tk.ID != "" {
						c.must(i, http.MethodPost, "/v1/hints/confirm", map[string]any{"takeId": tk.ID}, nil)
					}
					mu.Lock()
					for _, h := range tk.Hints {
						delivered[h.ID]++
					}
					mu.Unlock()
					if len(tk.Hints) == 0 {
						time.Sleep(5 * time.Millisecond)
					}
				}
			}()
		}
		wg.Wait()
		eventually(t, 60*time.Second, "every hint delivered", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(delivered) >= len(putIDs)
		})
		close(stop)
		takers.Wait()
		for id := range putIDs {
			if delivered[id] != 1 {
				t.Fatalf("hint %s delivered %d times", id, delivered[id])
			}
		}
		if len(delivered) != len(putIDs) {
			t.Fatalf("%d delivered, %d put", len(delivered), len(putIDs))
		}
		// A's stream saw every one of them added and consumed, in revision order.
		added, consumed := map[string]bool{}, map[string]bool{}
		var last uint64
		var streamed []byte // the newest state frame of A's stream
		drain := func() {
			for {
				select {
				case ev := <-events:
					if ev.name == hint.EventState {
						streamed = ev.data
					}
				default:
					return
				}
			}
		}
		eventually(t, 30*time.Second, "A's stream caught up", func() bool {
			for {
				select {
				case ev := <-events:
					if ev.name == hint.EventState {
						streamed = ev.data
					}
					if ev.name != hint.EventHint {
						continue
					}
					var a hint.Action
					if err := json.Unmarshal(ev.data, &a); err != nil {
						t.Fatal(err)
					}
					if a.Revision < last {
						t.Fatalf("action of revision %d after %d", a.Revision, last)
					}
					last = a.Revision
					switch a.Kind {
					case hint.ActionAdded:
						added[a.Hint.ID] = true
					case hint.ActionConsumed:
						consumed[a.Hint.ID] = true
					}
				default:
					n := 0
					for id := range putIDs {
						if added[id] && consumed[id] {
							n++
						}
					}
					return n == len(putIDs)
				}
			}
		})
		if last <= base {
			t.Fatal("no revision moved")
		}
		// The polling fallback (GET /v1/hints/state, what the hint bar reads without
		// EventSource) agrees on every replica with what A's stream last sent.
		eventually(t, 10*time.Second, "every replica's polled state is A's streamed one", func() bool {
			drain()
			var want hint.Snapshot
			if json.Unmarshal(streamed, &want) != nil || want.Revision < last {
				return false
			}
			for i := range c.reps {
				var got hint.Snapshot
				c.must(i, http.MethodGet, "/v1/hints/state", nil, &got)
				if !reflect.DeepEqual(got, want) {
					return false
				}
			}
			return true
		})
	})

	t.Run("kill -9 of a replica during a burst loses nothing acknowledged", func(t *testing.T) {
		var mu sync.Mutex
		acked := map[string]bool{}    // puts answered 2xx
		confirmed := map[string]int{} // hints of takes whose confirm answered 2xx
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for i := range c.reps {
			wg.Add(2)
			go func() { // writer
				defer wg.Done()
				for j := 0; ; j++ {
					select {
					case <-stop:
						return
					default:
					}
					var r struct {
						HintID string `json:"hintId"`
					}
					st, _, err := c.call(i, http.MethodPost, "/v1/hints", map[string]string{"sessionId": "s-kill", "text": fmt.Sprintf("k%d-%d", i, j)}, &r)
					if err != nil || st != http.StatusOK {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					mu.Lock()
					acked[r.HintID] = true
					mu.Unlock()
				}
			}()
			go func() { // reader
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					var tk hint.Take
					st, _, err := c.call(i, http.MethodPost, "/v1/hints/take", map[string]any{"sessionId": "s-kill"}, &tk)
					if err != nil || st != http.StatusOK || tk.ID == "" {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					st, _, err = c.call(i, http.MethodPost, "/v1/hints/confirm", map[string]any{"takeId": tk.ID}, nil)
					if err != nil || st != http.StatusOK {
						continue // not acknowledged: the lease returns the hints, or the confirm landed
					}
					mu.Lock()
					for _, h := range tk.Hints {
						confirmed[h.ID]++
					}
					mu.Unlock()
				}
			}()
		}
		time.Sleep(1500 * time.Millisecond)
		if err := c.reps[B].Cmd.Process.Kill(); err != nil { // SIGKILL
			t.Fatal(err)
		}
		_, _ = c.reps[B].Cmd.Process.Wait()
		c.lb.markDown(B)
		time.Sleep(1500 * time.Millisecond)
		close(stop)
		wg.Wait()
		// Drain what is left through the survivors (hints of B's unconfirmed takes come back
		// when their lease ends).
		eventually(t, 60*time.Second, "the queue drained", func() bool {
			var tk hint.Take
			c.must(A, http.MethodPost, "/v1/hints/take", map[string]any{"sessionId": "s-kill", "confirm": true}, &tk)
			for _, h := range tk.Hints {
				confirmed[h.ID]++
			}
			var st hint.Snapshot
			c.must(C, http.MethodGet, "/v1/hints/state", nil, &st)
			for _, h := range st.Pending {
				if h.SessionID == "s-kill" {
					return false
				}
			}
			for _, h := range st.Consumed {
				if h.SessionID == "s-kill" && h.TakeID != "" {
					return false // a take still open
				}
			}
			return true
		})
		var st hint.Snapshot
		c.must(C, http.MethodGet, "/v1/hints/state", nil, &st)
		consumed := map[string]bool{}
		for _, h := range st.Consumed {
			consumed[h.ID] = true
		}
		lost := []string{}
		for id := range acked {
			if confirmed[id] == 0 && !consumed[id] {
				lost = append(lost, id)
			}
		}
		twice := []string{}
		for id, n := range confirmed {
			if n > 1 {
				twice = append(twice, id)
			}
		}
		sort.Strings(lost)
		sort.Strings(twice)
		if len(acked) == 0 || len(lost) > 0 || len(twice) > 0 {
			t.Fatalf("%d acknowledged puts; lost %v; confirmed twice %v", len(acked), lost, twice)
		}
		t.Logf("%d acknowledged puts, %d confirmed deliveries across the kill", len(acked), len(confirmed))
	})

	t.Run("a Lark event delivered to two replicas at once is processed once", func(t *testing.T) {
		appID := "cli_scale1"
		c.must(A, http.MethodPut, "/v1/channel/lark/binding", map[string]string{"appId": appID, "appSecret": larkSecret, "verificationToken": larkToken}, nil)
		c.must(C, http.MethodPost, "/v1/channel/lark/allowlist", map[string]string{"openId": "ou_alice"}, nil)
		body := larkEvent(appID, "evt-scale-1", "om_scale_1", "ou_alice", "oc_scale", "what is up?")
		var wg sync.WaitGroup
		for _, i := range []int{A, C} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest(http.MethodPost, c.reps[i].URL+"/v1/channel/lark/events", strings.NewReader(string(body)))
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Errorf("replica %d: %v %v", i, err, resp)
					return
				}
				resp.Body.Close()
			}()
		}
		wg.Wait()
		eventually(t, 30*time.Second, "the built-in executor's reply", func() bool { return lark.count("reply om_scale_1") >= 1 })
		time.Sleep(500 * time.Millisecond) // a second processing would show by now
		var ls struct {
			Loci []struct {
				ID string `json:"id"`
			} `json:"loci"`
		}
		c.must(C, http.MethodGet, "/v1/channel/lark/loci", nil, &ls)
		loci := ls.Loci
		if len(loci) != 1 {
			t.Fatalf("%d loci", len(loci))
		}
		var det struct {
			Deliveries []json.RawMessage `json:"deliveries"`
		}
		c.must(A, http.MethodGet, "/v1/channel/lark/loci/"+loci[0].ID, nil, &det)
		if len(det.Deliveries) != 1 || lark.count("reply om_scale_1") != 1 || lark.count("react om_scale_1 OnIt") != 1 {
			t.Fatalf("%d deliveries, %d replies, %d working reactions", len(det.Deliveries), lark.count("reply om_scale_1"), lark.count("react om_scale_1 OnIt"))
		}
	})

	t.Run("no replica wrote the database password to its output or home", func(t *testing.T) {
		pw := redact.Password(c.url)
		if len(pw) < 8 {
			t.Skipf("the test server's password %q is too short to search for", pw)
		}
		for i, p := range c.reps {
			if strings.Contains(p.Stdout.String()+p.Stderr.String(), pw) {
				t.Fatalf("replica %d logged the database password", i)
			}
			err := filepath.WalkDir(p.Home, func(path string, d os.DirEntry, err error) error {
				if err != nil || !d.Type().IsRegular() {
					return err
				}
				raw, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				if strings.Contains(string(raw), pw) {
					t.Errorf("replica %d's %s holds the database password", i, path)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	})
}

func containsNote(notes []string, want string) bool {
	for _, n := range notes {
		if strings.Contains(n, want) {
			return true
		}
	}
	return false
}

// waitAction reads a stream until an action matches, and returns when it arrived.
func waitAction(t *testing.T, events <-chan sseEvent, match func(hint.Action) bool) time.Time {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.name != hint.EventHint {
				continue
			}
			var a hint.Action
			if err := json.Unmarshal(ev.data, &a); err != nil {
				t.Fatal(err)
			}
			if match(a) {
				return ev.at
			}
		case <-deadline:
			t.Fatal("the stream never showed the action")
		}
	}
}

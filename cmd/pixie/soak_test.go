package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/hint"
	"github.com/pixie-dev/pixie/internal/hooks"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/server"
)

// The kill -9 soak of the hint queue (docs/hints.md, "Crashes"). A real `pixie serve` is killed
// with SIGKILL again and again while clients enqueue hints and take them by every path there is:
//
//   - "take": POST /v1/hints/take, then /v1/hints/confirm (two-phase, over HTTP);
//   - "hook": POST /v1/hooks/claude-code as Claude Code's http hook calls it (the route confirms
//     the take itself once the answer is written);
//   - "held": the same route asked to hold the take (X-Pixie-Hint-Hold), confirmed by the client,
//     which is what the command adapter does;
//   - "adapter": the real `pixie hook claude` process.
//
// Every hint is a unique text, so each delivery is known. After each kill the server is
// restarted on the same home and address, the clients wait one lease (so every take the kill
// left open has expired), and the queue is read: every acknowledged hint that was never
// delivered must be pending (nothing acknowledged is lost), no hint whose delivery was
// acknowledged may be pending (nothing acknowledged comes back), and a hint delivered by the
// route whose confirm the kill may have cut is noted if it is pending again. At the end the
// queue is drained and every hint's deliveries are checked: a hint is delivered more than once
// only when each earlier delivery was not acknowledged (its confirm failed, or it was pending
// again after a kill); every acknowledged hint was delivered.
//
// It runs in `make test` for PIXIE_SOAK_SECONDS (default 40) seconds; -short skips it.

const soakLease = 2 * time.Second

// soakDelivery is one hint handed out to a client.
type soakDelivery struct {
	kind  string // take, hook, held, adapter, drain
	epoch int    // which server process handed it out
	// acked: the client knows the take was confirmed (a 200 to its confirm, or the adapter
	// exiting without a warning). open deliveries of kind hook are unknown until a restart.
	acked bool
	// redeliverable: not acked, and known not to be: its confirm failed or was too late, or the
	// hint was pending again after a kill.
	redeliverable bool
}

type soakLedger struct {
	mu         sync.Mutex
	acked      map[string]bool            // texts of acknowledged puts (each hint's text is unique)
	unackedPut int                        // puts without an answer (in flight at a kill)
	deliveries map[string][]*soakDelivery // by text
	calls      map[string]int             // completed delivering calls by kind
	failed     map[string]int             // calls that got no answer by kind
	expired    int                        // confirms answered 409 (the lease ran out first)
	evicted    int                        // acknowledged puts whose hint the session's cap evicted later (reported by a put)
}

func (l *soakLedger) deliver(kind string, epoch int, texts []string, acked, redeliverable bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range texts {
		l.deliveries[x] = append(l.deliveries[x], &soakDelivery{kind: kind, epoch: epoch, acked: acked, redeliverable: redeliverable})
	}
	l.calls[kind]++
}

func textsOfHints(hs []hint.Hint) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.Text
	}
	return out
}

var soakHintLine = regexp.MustCompile(`(?m)^\d+\. (p\d+-\d+)$`)

func TestHintQueueSurvivesRepeatedSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a real server again and again")
	}
	duration := 40 * time.Second
	if v := os.Getenv("PIXIE_SOAK_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 5 {
			t.Fatalf("PIXIE_SOAK_SECONDS=%q: want a number of seconds ≥ 5", v)
		}
		duration = time.Duration(n) * time.Second
	}
	bin := testutil.PixieBinary(t)
	home := filepath.Join(t.TempDir(), "home")
	addr := testutil.FreeAddr(t)
	base := "http://" + addr
	env := hookEnv()

	logs, err := os.Create(filepath.Join(t.TempDir(), "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	logTail := func() string {
		raw, _ := os.ReadFile(logs.Name())
		return tail(string(raw), 6000)
	}
	var srv *exec.Cmd
	epoch := 0
	start := func() {
		t.Helper()
		epoch++
		srv = exec.Command(bin, "serve", "--home", home, "--addr", addr, "--set", "hints.lease="+soakLease.String())
		srv.Env = env
		fmt.Fprintf(logs, "--- epoch %d\n", epoch)
		srv.Stdout, srv.Stderr = logs, logs
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			resp, err := http.Get(base + "/healthz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the server did not come up in epoch %d:\n%s", epoch, logTail())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	start()
	t.Cleanup(func() {
		if srv.ProcessState == nil {
			_ = srv.Process.Kill()
			_, _ = srv.Process.Wait()
		}
	})
	raw, err := os.ReadFile(filepath.Join(home, "token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(raw))
	api := hintHTTP{url: base, token: token, c: &http.Client{Timeout: 15 * time.Second}}

	led := &soakLedger{acked: map[string]bool{}, deliveries: map[string][]*soakDelivery{},
		calls: map[string]int{}, failed: map[string]int{}}
	// The clients hold gate for reading around each operation; the controller holds it for
	// writing from just after a kill until the restarted server has been checked.
	var gate sync.RWMutex
	curEpoch := func() int { return epoch } // read under gate
	stop := make(chan struct{})
	var wg sync.WaitGroup
	loop := func(op func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				gate.RLock()
				op(i)
				gate.RUnlock()
			}
		}()
	}
	sessions := []string{"s0", "s1", "s2", "s3", ""}

	// Putters: unique texts over the four sessions and the global queue.
	for g := range 3 {
		loop(func(i int) {
			text := fmt.Sprintf("p%d-%d", g, i)
			var put struct {
				Dropped []hint.Hint `json:"dropped"`
			}
			st, err := api.call("POST", "/v1/hints", map[string]any{"text": text, "sessionId": sessions[(g+i)%len(sessions)]}, &put)
			led.mu.Lock()
			if err == nil && st == 200 {
				led.acked[text] = true
				// A session past its pending cap evicts its oldest hint, and says so: such a
				// hint is not lost (a slow consumer, such as the adapter's session on a loaded
				// machine, falls behind the putters).
				for _, d := range put.Dropped {
					delete(led.acked, d.Text)
					led.evicted++
				}
			} else {
				led.unackedPut++
			}
			led.mu.Unlock()
			if err != nil {
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	// confirm closes a take and says whether it was acknowledged and whether its hints may come
	// back (a 409: the lease ran out first).
	confirm := func(take string) (acked, redeliverable bool) {
		st, err := api.call("POST", "/v1/hints/confirm", map[string]any{"takeId": take}, nil)
		if err == nil && st == http.StatusConflict {
			led.mu.Lock()
			led.expired++
			led.mu.Unlock()
		}
		ok := err == nil && st == 200
		return ok, !ok
	}
	// take: two-phase over HTTP.
	loop(func(int) {
		ep := curEpoch()
		var tk hint.Take
		st, err := api.call("POST", "/v1/hints/take", map[string]any{"sessionId": "s0"}, &tk)
		if err != nil || st != 200 {
			led.mu.Lock()
			led.failed["take"]++
			led.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			return
		}
		if tk.ID == "" {
			time.Sleep(3 * time.Millisecond)
			return
		}
		acked, again := confirm(tk.ID)
		led.deliver("take", ep, textsOfHints(tk.Hints), acked, again)
	})
	// hook and held: the hook route, server-confirmed and held.
	hookInput := func(session string) []byte {
		return hookFixture(t, "post_tool_use", map[string]any{"session_id": session})
	}
	textsOf := func(answer []byte) []string {
		var o hooks.Output
		if json.Unmarshal(answer, &o) != nil || o.HookSpecificOutput == nil {
			return nil
		}
		var out []string
		for _, m := range soakHintLine.FindAllStringSubmatch(o.HookSpecificOutput.AdditionalContext, -1) {
			out = append(out, m[1])
		}
		return out
	}
	postHook := func(session string, hold bool) (body []byte, take string, err error) {
		req, _ := http.NewRequest("POST", base+"/v1/hooks/claude-code", bytes.NewReader(hookInput(session)))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		if hold {
			req.Header.Set(server.HintHoldHeader, "1")
		}
		resp, err := api.c.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		body, err = io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("status %d: %s", resp.StatusCode, body)
		}
		return body, resp.Header.Get(server.HintTakeHeader), err
	}
	for _, c := range []struct {
		kind, session string
		hold          bool
	}{{"hook", "s1", false}, {"held", "s2", true}} {
		loop(func(int) {
			ep := curEpoch()
			body, take, err := postHook(c.session, c.hold)
			if err != nil {
				led.mu.Lock()
				led.failed[c.kind]++
				led.mu.Unlock()
				time.Sleep(5 * time.Millisecond)
				return
			}
			texts := textsOf(body)
			if c.hold != (take != "") && len(texts) > 0 {
				t.Errorf("%s call: take header %q with %d hints", c.kind, take, len(texts))
			}
			acked, again := false, false
			if take != "" {
				acked, again = confirm(take)
			}
			led.deliver(c.kind, ep, texts, acked, again)
			if len(texts) == 0 {
				time.Sleep(3 * time.Millisecond)
			}
		})
	}
	// adapter: the real command adapter.
	adapterEnv := append(append([]string{}, env...), "PIXIE_SERVER_URL="+base, "PIXIE_TOKEN="+token, "PIXIE_HOME="+t.TempDir())
	loop(func(int) {
		ep := curEpoch()
		cmd := exec.Command(bin, "hook", "claude", "--fail-open", "--timeout", "10s")
		cmd.Env, cmd.Stdin = adapterEnv, bytes.NewReader(hookInput("s3"))
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		texts := textsOf(out.Bytes())
		if err != nil || strings.Contains(errb.String(), "failing open") {
			led.mu.Lock()
			led.failed["adapter"]++
			led.mu.Unlock()
			if len(texts) > 0 {
				t.Errorf("the adapter printed hints and failed: %v %s", err, errb.String())
			}
			return
		}
		confirmFailed := strings.Contains(errb.String(), "confirming its hints failed")
		led.deliver("adapter", ep, texts, !confirmFailed, confirmFailed)
	})

	// check reads the queue of a server that has been up for a lease (so every take the last
	// kill left open has expired) and checks it against the ledger.
	kills, seenPendingAgain := 0, 0
	check := func(when string) {
		t.Helper()
		var snap hint.Snapshot
		if st, err := api.call("GET", "/v1/hints/state", nil, &snap); err != nil || st != 200 {
			t.Fatalf("%s: state: %d %v", when, st, err)
		}
		pending := map[string]bool{}
		for _, h := range snap.Pending {
			pending[h.Text] = true
		}
		led.mu.Lock()
		defer led.mu.Unlock()
		for id := range led.acked {
			ds := led.deliveries[id]
			if len(ds) == 0 && !pending[id] {
				t.Errorf("%s: acknowledged hint %s was never delivered and is not pending: lost", when, id)
			}
			for _, d := range ds {
				switch {
				case d.acked && pending[id]:
					t.Errorf("%s: hint %s is pending again after an acknowledged delivery (%s, epoch %d)", when, id, d.kind, d.epoch)
				case !d.acked && !d.redeliverable && pending[id]:
					d.redeliverable = true // the route's confirm was cut by the kill
					seenPendingAgain++
				}
			}
		}
	}

	deadline := time.Now().Add(duration)
	for time.Now().Before(deadline) {
		time.Sleep(time.Duration(1500+rand.IntN(2000)) * time.Millisecond)
		if err := srv.Process.Kill(); err != nil { // SIGKILL
			t.Fatal(err)
		}
		_, _ = srv.Process.Wait()
		kills++
		gate.Lock()
		start()
		time.Sleep(soakLease + 500*time.Millisecond)
		check(fmt.Sprintf("after kill %d", kills))
		gate.Unlock()
		if t.Failed() {
			break
		}
	}
	close(stop)
	wg.Wait()
	gate.Lock()
	time.Sleep(soakLease + 500*time.Millisecond)
	check("at the end")

	// Drain what is left, two-phase, then read every hint's deliveries.
	for _, s := range sessions {
		for {
			var tk hint.Take
			if st, err := api.call("POST", "/v1/hints/take", map[string]any{"sessionId": s}, &tk); err != nil || st != 200 {
				t.Fatalf("drain %q: %d %v", s, st, err)
			}
			if tk.ID == "" {
				break
			}
			if st, err := api.call("POST", "/v1/hints/confirm", map[string]any{"takeId": tk.ID}, nil); err != nil || st != 200 {
				t.Fatalf("drain confirm: %d %v", st, err)
			}
			led.deliver("drain", epoch, textsOfHints(tk.Hints), true, false)
		}
	}
	gate.Unlock()

	led.mu.Lock()
	defer led.mu.Unlock()
	delivered, redelivered, drained, twice, lost := 0, 0, 0, 0, 0
	byKind := map[string]int{}
	for id, ds := range led.deliveries {
		for i, d := range ds {
			byKind[d.kind]++
			if i == 0 {
				continue
			}
			prev := ds[i-1]
			if prev.acked || !prev.redeliverable {
				twice++
				t.Errorf("hint %s delivered %d times: delivery %d (%s, epoch %d) after %s in epoch %d (acked %v)",
					id, len(ds), i+1, d.kind, d.epoch, prev.kind, prev.epoch, prev.acked)
				continue
			}
			redelivered++
		}
		if ds[len(ds)-1].kind == "drain" {
			drained++
		}
	}
	for id := range led.acked {
		if len(led.deliveries[id]) == 0 {
			lost++
			t.Errorf("acknowledged hint %s was never delivered", id)
		} else {
			delivered++
		}
	}
	var kinds []string
	for k := range byKind {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, byKind[k]))
	}
	sort.Strings(kinds)
	t.Logf("soak: %s, %d SIGKILLs; %d hints acknowledged, all %d delivered (%d of them only by the final drain); "+
		"%d puts unanswered (in flight at a kill), %d evicted by a session's pending cap (reported); deliveries by path: %s; delivering calls %v, calls without an answer %v; "+
		"%d re-deliveries after a delivery that was not acknowledged (%d hints pending again after a kill, %d confirms too late for the lease); %d lost, %d delivered again after an acknowledged or confirmed delivery",
		duration, kills, len(led.acked), delivered, drained, led.unackedPut, led.evicted, strings.Join(kinds, ", "), led.calls, led.failed,
		redelivered, seenPendingAgain, led.expired, lost, twice)
	if kills < 3 || led.calls["take"] == 0 || led.calls["hook"] == 0 || led.calls["held"] == 0 || led.calls["adapter"] == 0 || byKind["hook"] == 0 || byKind["adapter"] == 0 {
		t.Errorf("the soak did not exercise every path: %d kills, calls %v, deliveries %v", kills, led.calls, byKind)
	}
	if t.Failed() {
		t.Logf("server logs (tail):\n%s", logTail())
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/hint"
	"github.com/pixie-dev/pixie/internal/testutil"
)

// hintHTTP is a minimal JSON client for the real server process.
type hintHTTP struct {
	url, token string
	c          *http.Client
}

func (h hintHTTP) call(method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, h.url+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+h.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode == 200 && out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return 0, err
		}
	}
	return resp.StatusCode, nil
}

func TestHintCLI(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	p := testutil.StartServer(t, home, nil)
	defer p.Stop(t)
	env := []string{"PIXIE_SERVER_URL=" + p.URL, "PIXIE_HOME=" + home}
	ctx := context.Background()

	out, code := testutil.RunPixie(t, ctx, env, "hint", "send", "run the tests first", "--session", "s1")
	m := regexp.MustCompile(`queued (h[0-9a-f]+) for session s1: the next task step`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("send: %d %q", code, out)
	}
	id := m[1]
	if out, code := testutil.RunPixie(t, ctx, env, "hint", "send", "for everyone"); code != 0 || !strings.Contains(out, "global hint: the first session that takes a step sees it") {
		t.Fatalf("global send: %d %q", code, out)
	}
	out, code = testutil.RunPixie(t, ctx, env, "hint", "ls")
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "run the tests first") ||
		!strings.Contains(out, "(all)") || !strings.Contains(out, "2 pending") {
		t.Fatalf("ls: %d\n%s", code, out)
	}
	out, code = testutil.RunPixie(t, ctx, env, "hint", "ls", "--json")
	var snap hint.Snapshot
	if code != 0 || json.Unmarshal([]byte(out), &snap) != nil || len(snap.Pending) != 2 {
		t.Fatalf("ls --json: %d\n%s", code, out)
	}
	if out, code := testutil.RunPixie(t, ctx, env, "hint", "rm", id); code != 0 || !strings.Contains(out, "cancelled "+id) {
		t.Fatalf("rm: %d %q", code, out)
	}
	if out, code := testutil.RunPixie(t, ctx, env, "hint", "rm", id); code != 1 || !strings.Contains(out, "409") {
		t.Fatalf("rm twice: %d %q, want exit 1 with the 409", code, out)
	}
	if out, code := testutil.RunPixie(t, ctx, env, "hint", "rm", "h00000000000000000001ffffffff"); code != 1 || !strings.Contains(out, "404") {
		t.Fatalf("rm unknown: %d %q", code, out)
	}
	if out, code := testutil.RunPixie(t, ctx, env, "hint", "send", "   "); code != 1 || !strings.Contains(out, "blank") {
		t.Fatalf("blank send: %d %q", code, out)
	}
	if _, code := testutil.RunPixie(t, ctx, env, "hint", "send"); code != 2 {
		t.Fatalf("send without text: exit %d, want 2", code)
	}
	if _, code := testutil.RunPixie(t, ctx, env, "hint", "frobnicate"); code != 2 {
		t.Fatalf("unknown subcommand: exit %d, want 2", code)
	}
	bad := []string{"PIXIE_SERVER_URL=" + p.URL, "PIXIE_HOME=" + home, "PIXIE_ADMIN_TOKEN=wrong"}
	if out, code := testutil.RunPixie(t, ctx, bad, "hint", "ls"); code != 1 || !strings.Contains(out, "401") {
		t.Fatalf("wrong token: %d %q", code, out)
	}
	if out, code := testutil.RunPixie(t, ctx, bad, "hint", "watch"); code != 1 || !strings.Contains(out, "401") {
		t.Fatalf("watch with a wrong token: %d %q", code, out)
	}
}

func TestHintWatchFollowsTheStream(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	p := testutil.StartServer(t, home, nil)
	defer p.Stop(t)
	api := hintHTTP{url: p.URL, token: p.Token(t), c: &http.Client{Timeout: 10 * time.Second}}

	cmd := exec.Command(testutil.PixieBinary(t), "hint", "watch")
	cmd.Env = append(os.Environ(), "PIXIE_SERVER_URL="+p.URL, "PIXIE_HOME="+home, "PIXIE_ADMIN_TOKEN=")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	expect := func(prefix string) string {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("watch ended; stderr: %s", stderr.String())
				}
				if strings.HasPrefix(l, prefix) {
					return l
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("no %q line within 10s", prefix)
			}
		}
	}
	expect("state     revision 0")
	var r struct{ HintID string }
	if st, err := api.call("POST", "/v1/hints", map[string]any{"text": "watch me", "sessionId": "s"}, &r); st != 200 || err != nil {
		t.Fatalf("put: %d %v", st, err)
	}
	expect("state     revision 1: 1 pending")
	if l := expect("added"); !strings.Contains(l, r.HintID) || !strings.Contains(l, "watch me") {
		t.Fatalf("added line = %q", l)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("watch did not exit cleanly on SIGINT: %v; stderr: %s", err, stderr.String())
	}
}

// TestHintExactlyOnceAcrossSIGKILL bursts puts and takes at a real `pixie serve`, kills it with
// SIGKILL mid-burst, restarts it on the same home, and checks that every acknowledged put is
// pending or consumed, that no delivered hint is pending or delivered again, and that hints
// only unacknowledged requests can explain are bounded by how many requests were in flight.
func TestHintExactlyOnceAcrossSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	home := filepath.Join(t.TempDir(), "home")
	// Keep every consumed hint in the snapshot and lift the backlog cap, so the check below can
	// see every hint's final state; a short lease so open takes come back quickly.
	args := []string{"--set", "hints.keepConsumed=100000", "--set", "hints.maxPendingPerSession=100000",
		"--set", "hints.lease=1s"}
	p := testutil.StartServer(t, home, nil, args...)
	api := hintHTTP{url: p.URL, token: p.Token(t), c: &http.Client{Timeout: 10 * time.Second}}
	const maxPerStep = 20
	sessions := []string{"s0", "s1", "s2", ""}

	var mu sync.Mutex
	acked := map[string]bool{}     // puts answered 200
	delivered := map[string]int{}  // hints handed out by a take that is confirmed
	uncertain := map[string]bool{} // hints handed out by a take whose confirm got no answer
	lostPuts, lostTakes := 0, 0    // requests without an answer (in flight at the kill)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var r struct{ HintID string }
				st, err := api.call("POST", "/v1/hints", map[string]any{"text": fmt.Sprintf("g%d-%d", g, i), "sessionId": sessions[i%len(sessions)]}, &r)
				mu.Lock()
				if err == nil && st == 200 {
					acked[r.HintID] = true
				} else {
					lostPuts++
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}(g)
	}
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				twoPhase := i%2 == 1
				var tk hint.Take
				st, err := api.call("POST", "/v1/hints/take", map[string]any{"sessionId": sessions[g], "confirm": !twoPhase}, &tk)
				if err != nil || st != 200 {
					mu.Lock()
					lostTakes++
					mu.Unlock()
					return
				}
				confirmed := !twoPhase
				if twoPhase && tk.ID != "" {
					cst, cerr := api.call("POST", "/v1/hints/confirm", map[string]any{"takeId": tk.ID}, nil)
					confirmed = cerr == nil && cst == 200
				}
				mu.Lock()
				for _, h := range tk.Hints {
					if confirmed {
						delivered[h.ID]++
					} else {
						uncertain[h.ID] = true
					}
				}
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		}(g)
	}
	// Kill once the burst is well under way.
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n, d := len(acked), len(delivered)
		mu.Unlock()
		if n >= 150 && d >= 30 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the burst did not get going: %d puts, %d delivered", n, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := p.Cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = p.Cmd.Wait()
	close(stop)
	wg.Wait()
	t.Logf("at the kill: %d puts acknowledged, %d hints delivered, %d uncertain, in flight: %d puts, %d takes",
		len(acked), len(delivered), len(uncertain), lostPuts, lostTakes)

	p2 := testutil.StartServer(t, home, nil, args...)
	defer p2.Stop(t)
	api.url = p2.URL
	// Open takes whose confirm never came return after the 1s lease.
	time.Sleep(1500 * time.Millisecond)
	var snap hint.Snapshot
	if st, err := api.call("GET", "/v1/hints/state", nil, &snap); st != 200 || err != nil {
		t.Fatalf("state after restart: %d %v", st, err)
	}
	state := map[string]hint.State{}
	for _, h := range snap.Pending {
		state[h.ID] = hint.Pending
	}
	for _, h := range snap.Consumed {
		if _, dup := state[h.ID]; dup {
			t.Fatalf("hint %s both pending and consumed", h.ID)
		}
		state[h.ID] = hint.Consumed
		if h.TakeID != "" {
			t.Fatalf("hint %s still held by take %s after its lease", h.ID, h.TakeID)
		}
	}
	for id, n := range delivered {
		if n != 1 {
			t.Errorf("hint %s delivered %d times before the kill", id, n)
		}
		if state[id] != hint.Consumed {
			t.Errorf("delivered hint %s is %q after the restart, want consumed", id, state[id])
		}
	}
	for id := range acked {
		if _, ok := state[id]; !ok {
			t.Errorf("acknowledged hint %s was lost", id)
		}
	}
	unexplainedConsumed, unackedStored := 0, 0
	for id, s := range state {
		if !acked[id] {
			unackedStored++
		}
		if s == hint.Consumed && delivered[id] == 0 && !uncertain[id] {
			unexplainedConsumed++
		}
	}
	if unackedStored > lostPuts {
		t.Errorf("%d stored hints were never acknowledged, but only %d puts were in flight", unackedStored, lostPuts)
	}
	if unexplainedConsumed > lostTakes*maxPerStep {
		t.Errorf("%d hints consumed by no answered take, but only %d takes were in flight", unexplainedConsumed, lostTakes)
	}
	// Drain: every pending hint comes out exactly once, and nothing delivered comes back.
	drained := map[string]int{}
	for round := 0; round < 1000; round++ {
		got := 0
		for _, s := range sessions {
			var tk hint.Take
			if st, err := api.call("POST", "/v1/hints/take", map[string]any{"sessionId": s, "confirm": true}, &tk); st != 200 || err != nil {
				t.Fatalf("drain: %d %v", st, err)
			}
			for _, h := range tk.Hints {
				drained[h.ID]++
			}
			got += len(tk.Hints)
		}
		if got == 0 {
			break
		}
	}
	for id, n := range drained {
		if n != 1 || state[id] != hint.Pending || delivered[id] != 0 {
			t.Errorf("drained %s %d times (state %q, delivered before %d)", id, n, state[id], delivered[id])
		}
	}
	if len(drained) != len(snap.Pending) {
		t.Errorf("drained %d hints, %d were pending", len(drained), len(snap.Pending))
	}
}

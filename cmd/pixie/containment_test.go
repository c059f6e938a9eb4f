package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime/sandbox"
)

// markedProcs lists the live processes whose argv[0] is m, anywhere on the machine.
func markedProcs(m string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
			continue
		}
		if arg0, _, _ := strings.Cut(string(raw), "\x00"); arg0 == m {
			out = append(out, pid)
		}
	}
	return out
}

// TestServerSIGKILLEndsEveryProcessOfItsRuns starts a real `pixie serve`, runs a script Skill
// that starts processes in every way that escapes a process group (setsid, a double fork,
// nohup, a daemon that closes its descriptors) and then waits, kills the server with SIGKILL
// mid-run, and requires every one of those processes gone. The killed server's private folder
// ($TMPDIR/pixie-bin-…) is left behind, and the next server start removes it.
func TestServerSIGKILLEndsEveryProcessOfItsRuns(t *testing.T) {
	if err := sandbox.Probe(); err != nil {
		t.Skipf("script Skills need Landlock here: %v", err)
	}
	tmp := t.TempDir()
	home := filepath.Join(t.TempDir(), "home")
	env := []string{"TMPDIR=" + tmp}
	p := testutil.StartServer(t, home, env)
	token := p.Token(t)
	call := func(method, path string, body, out any) int {
		t.Helper()
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, p.URL+path, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		if out != nil {
			_ = json.NewDecoder(resp.Body).Decode(out)
		}
		return resp.StatusCode
	}

	mark := fmt.Sprintf("pixie-sigkill-%d", time.Now().UnixNano())
	skill := filepath.Join(t.TempDir(), "escaper")
	if err := os.MkdirAll(skill, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"SKILL.md": "---\nname: escaper\ndescription: Starts processes that try to outlive it.\n---\n",
		"run.sh": `m() { exec bash -c 'exec -a "$0" sleep 1000' "` + mark + `"; }
m &
setsid bash -c "$(declare -f m); m" &
( ( m & ) & )
nohup bash -c "$(declare -f m); m" >/dev/null 2>&1 &
setsid bash -c "exec </dev/null >/dev/null 2>&1; $(declare -f m); ( m & )" &
exec -a "` + mark + `" sleep 1000
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(skill, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var in struct {
		Fingerprint string `json:"fingerprint"`
	}
	if st := call("POST", "/v1/pet/skills/inspect", map[string]any{"path": skill}, &in); st != 200 || in.Fingerprint == "" {
		t.Fatalf("inspect: %d %+v", st, in)
	}
	if st := call("POST", "/v1/pet/skills", map[string]any{"path": skill, "confirm": true, "fingerprint": in.Fingerprint, "enabled": true}, nil); st != 201 {
		t.Fatalf("register: %d", st)
	}
	go call("POST", "/v1/pet/invocations", map[string]any{"skill": "escaper",
		"snapshot": map[string]any{"scope": "independent", "capturedAt": time.Now().UTC().Format(time.RFC3339)}}, nil)

	const want = 6 // five escapes and run.sh itself
	deadline := time.Now().Add(30 * time.Second)
	for len(markedProcs(mark)) < want {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d processes started\nstderr:\n%s", len(markedProcs(mark)), want, p.Stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	leftover, _ := filepath.Glob(filepath.Join(tmp, "pixie-bin-*"))
	if len(leftover) != 1 {
		t.Fatalf("private folders before the kill: %v", leftover)
	}

	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.Cmd.Wait()
	deadline = time.Now().Add(5 * time.Second)
	for {
		left := markedProcs(mark)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Fatalf("%d processes of the run outlived the server's SIGKILL: %v", len(left), left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(leftover[0]); err != nil {
		t.Fatalf("the killed server's folder is already gone (%v); the cleanup below would prove nothing", err)
	}

	// The next start cleans what the killed server left.
	q := testutil.StartServer(t, home, env)
	defer q.Stop(t)
	if _, err := os.Stat(leftover[0]); !os.IsNotExist(err) {
		t.Fatalf("the restarted server left %s (%v)", leftover[0], err)
	}
	if now, _ := filepath.Glob(filepath.Join(tmp, "pixie-bin-*")); len(now) != 1 {
		t.Fatalf("private folders after the restart: %v", now)
	}
}

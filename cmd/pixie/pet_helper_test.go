package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/pet"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime/sandbox"
)

// helperModel is an OpenAI-compatible server for asks and judgments: a request for
// log-probabilities (the decision engine's) is answered " Yes" with P(yes) = 0.8, any other
// "the model answered". It records the bodies it got.
type helperModel struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newHelperModel(t *testing.T) *helperModel {
	m := &helperModel{}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var req struct {
			Logprobs bool `json:"logprobs"`
		}
		_ = json.Unmarshal(raw, &req)
		m.mu.Lock()
		m.bodies = append(m.bodies, string(raw))
		m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if req.Logprobs {
			_, _ = fmt.Fprintf(w, `{"id":"c2","object":"chat.completion","created":%d,"model":"m",
"choices":[{"index":0,"finish_reason":"length","message":{"role":"assistant","content":" Yes"},
"logprobs":{"content":[{"token":" Yes","logprob":-0.5108256,"bytes":[32,89,101,115],"top_logprobs":[
{"token":" Yes","logprob":-0.5108256,"bytes":[32,89,101,115]},{"token":"yes","logprob":-1.6094379,"bytes":[121,101,115]},
{"token":" No","logprob":-1.6094379,"bytes":[32,78,111]}]}]}}],
"usage":{"prompt_tokens":90,"completion_tokens":1,"total_tokens":91}}`, time.Now().Unix())
			return
		}
		_, _ = fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":%d,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"the model answered"}}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`, time.Now().Unix())
	}))
	t.Cleanup(m.Close)
	return m
}

// The script Skill of TestPetSkillHelper: `pixie ask` and `pixie judge` through the real
// binary, 18 more asks to use the budget, the 21st refused, then its token handed to the test
// (PIXIE_URL pointed at the test's capture server) so the test can try it after the run.
const helperProbeScript = `set -u
a=$(pixie ask "Summarise for $DSH_PET_TEAM" --input <<<"the change for $DSH_PET_TEAM") || { echo "ask failed: $a"; exit 3; }
echo "ask: $a"
j=$(pixie judge --question "Is the work of $DSH_PET_TEAM finished?" --json) || { echo "judge failed: $j"; exit 4; }
echo "judge: $j"
i=3
while [ $i -le 20 ]; do
  pixie ask "again" --input </dev/null >/dev/null || { echo "call $i failed"; exit 5; }
  i=$((i+1))
done
last=$(pixie ask "one too many" --input </dev/null 2>&1); code=$?
echo "call 21: exit $code: $last"
PIXIE_URL=$DSH_PET_CAPTURE pixie ask "hand over the token" --input </dev/null >/dev/null 2>&1
echo "token: $PIXIE_TOKEN"
`

// TestPetSkillHelper drives Skills' helper through the real binary and server: a script Skill
// calls `pixie ask` / `pixie judge` (the bash executor puts the binary first on PATH), the
// 21st call is refused with 429, and its run token is refused (401) after the Run; a WASM
// Skill (guests/pet-judge-skill) asks and judges through host functions. Every call is in the
// Run record; neither the environment value nor the token is in a prompt, a record or an
// output.
func TestPetSkillHelper(t *testing.T) {
	if sandbox.Probe() != nil {
		t.Skip("no Landlock: script Skills fail closed")
	}
	const team = "team-value-s3cr3t-31"
	m := newHelperModel(t)
	var capMu sync.Mutex
	var captured []string
	capture := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		capMu.Lock()
		captured = append(captured, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		capMu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"text":"captured"}`)
	}))
	defer capture.Close()

	home := t.TempDir() + "/home"
	p := testutil.StartServer(t, home, []string{"PIXIE_MODEL_PROVIDER=openai", "PIXIE_MODEL_BASE_URL=" + m.URL + "/v1",
		"PIXIE_MODEL_MODEL=m", "PIXIE_MODEL_API_KEY=k"})
	defer p.Stop(t)
	env := []string{"PIXIE_SERVER_URL=" + p.URL, "PIXIE_HOME=" + home}
	var all strings.Builder
	ok := func(stdin string, args ...string) string {
		t.Helper()
		out, code := runPixieIn(t, env, stdin, args...)
		all.WriteString(out)
		if code != 0 {
			t.Fatalf("pixie %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
		return out
	}
	invoke := func(args ...string) pet.Run {
		t.Helper()
		out := ok("", append([]string{"pet", "invoke"}, append(args, "--json")...)...)
		var v pet.InvocationView
		if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &v); err != nil {
			t.Fatalf("invoke: %v\n%s", err, out)
		}
		return v.Latest()
	}
	ok(team+"\n", "pet", "env", "set", "TEAM", "-")
	ok(capture.URL+"\n", "pet", "env", "set", "CAPTURE", "-")

	skills := t.TempDir()
	ok("", "pet", "skills", "register", petSkill(t, skills, "probe", "Runs run.sh.", map[string][]byte{"run.sh": []byte(helperProbeScript)}), "--yes", "--enable")
	guest, err := os.ReadFile(testutil.GuestPath(t, "pet-judge-skill"))
	if err != nil {
		t.Fatal(err)
	}
	ok("", "pet", "skills", "register", petSkill(t, skills, "review", "A guest.", map[string][]byte{"skill.wasm": guest}), "--yes", "--enable")

	t.Run("script", func(t *testing.T) {
		r := invoke("probe", "--scope", "independent")
		if r.Status != pet.StatusSucceeded {
			t.Fatalf("run %+v %+v", r, r.Error)
		}
		for _, want := range []string{
			"ask: the model answered\n",
			`judge: {"type":"bool","label":"yes","answer":{"probabilities":{"no":0.2,"yes":0.8}`,
			`"engine":"llm"}`,
			"call 21: exit 2: pixie: HTTP 429: the run has used its 20 helper calls\n",
			"token: [$PIXIE_TOKEN]",
		} {
			if !strings.Contains(r.Output, want) {
				t.Errorf("output lacks %q:\n%s", want, r.Output)
			}
		}
		calls := r.HelperCalls
		if len(calls) != 20 || calls[0].Type != "ask" || calls[1].Type != "judge" || calls[1].Label != "yes" ||
			calls[1].Engine != "llm" || calls[1].Confidence == nil || calls[1].Usage.InputTokens != 90 || calls[19].Type != "ask" {
			t.Fatalf("%d helper calls: %+v", len(calls), calls)
		}
		if r.Usage == nil || r.Usage.InputTokens != 19*3+90 {
			t.Fatalf("usage %+v", r.Usage)
		}

		// The run's token is dead now: the helper route refuses it.
		capMu.Lock()
		if len(captured) != 1 || !strings.HasPrefix(captured[0], "pxr_") {
			t.Fatalf("captured %d tokens", len(captured))
		}
		token := captured[0]
		capMu.Unlock()
		req, _ := http.NewRequest(http.MethodPost, p.URL+"/v1/helper/ask", strings.NewReader(`{"instruction":"after the run"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), `"code":"unauthorized"`) {
			t.Fatalf("after the run: %d %s", resp.StatusCode, body)
		}
		all.WriteString(ok("", "pet", "tasks", "--json"))
		if strings.Contains(all.String(), token) || strings.Contains(p.Stdout.String()+p.Stderr.String(), token) {
			t.Fatal("the run token leaked into CLI output, a record or the server log")
		}
	})

	t.Run("wasm", func(t *testing.T) {
		r := invoke("review", "--scope", "independent", "--selection", "wrote the parser\n---\nall tests pass")
		if r.Status != pet.StatusSucceeded || !strings.HasSuffix(r.Output, "\nfinished=yes yes=0.8000 engine=llm") ||
			strings.Count(r.Output, "the model answered") != 2 {
			t.Fatalf("run %+v %+v", r, r.Error)
		}
		if len(r.HelperCalls) != 3 || r.HelperCalls[2].Type != "judge" || r.HelperCalls[2].Label != "yes" {
			t.Fatalf("helper calls %+v", r.HelperCalls)
		}
	})

	m.mu.Lock()
	prompts := strings.Join(m.bodies, "\n")
	m.mu.Unlock()
	if !strings.Contains(prompts, "Summarise for [$DSH_PET_TEAM]") || !strings.Contains(prompts, "[$DSH_PET_TEAM] finished?") {
		t.Fatal("the redacted prompts are missing")
	}
	if strings.Contains(prompts, team) || strings.Contains(all.String(), team) || strings.Contains(p.Stdout.String()+p.Stderr.String(), team) {
		t.Fatal("the environment value leaked into a prompt, CLI output or the server log")
	}
}

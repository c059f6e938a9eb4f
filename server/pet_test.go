package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/pet"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
)

// petEnv is a server with a real Pet service over Badger and an OpenAI-compatible model test
// server that answers every chat completion (or fails while fail > 0).
type petEnv struct {
	ts     *httptest.Server
	ws     string
	fail   atomic.Int32
	prompt atomic.Value // the last request body the model received
}

func newPetEnv(t *testing.T) *petEnv {
	t.Helper()
	e := &petEnv{}
	ms := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		e.prompt.Store(string(raw))
		w.Header().Set("Content-Type", "application/json")
		if e.fail.Add(-1) >= 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"message":"overloaded"}}`)
			return
		}
		_, _ = fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":%d,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"done"}}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`, time.Now().Unix())
	}))
	t.Cleanup(ms.Close)
	m, err := model.New(model.Config{Provider: "openai", BaseURL: ms.URL + "/v1", Model: "m", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.ws = filepath.Join(t.TempDir(), "workspace")
	svc, err := pet.New(context.Background(), pet.Config{Store: st, Model: m, Workspace: e.ws})
	if err != nil {
		t.Fatal(err)
	}
	srv := serverFor(t, Config{Token: testToken}, Deps{Store: st, Pet: svc})
	e.ts = httptest.NewServer(srv.Handler())
	t.Cleanup(e.ts.Close)
	return e
}

// call sends a request with the admin token and decodes a JSON answer into out (if non-nil).
func (e *petEnv) call(t *testing.T, method, path string, body any, out any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := body.(string); ok {
			raw = []byte(s)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, string(raw)
}

func (e *petEnv) expect(t *testing.T, method, path string, body any, status int, out any) string {
	t.Helper()
	st, raw := e.call(t, method, path, body, out)
	if st != status {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, st, status, raw)
	}
	return raw
}

func petSkillDir(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := "---\nname: " + name + "\ndescription: Does " + name + ".\n---\nYou do " + name + ".\n"
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestPetRoutes(t *testing.T) {
	e := newPetEnv(t)
	const secret = "route-secret-value-42"
	var all strings.Builder // every answer, checked for the environment value at the end
	rec := func(s string) { all.WriteString(s) }

	// Auth: the Pet routes are behind the admin token.
	resp, err := http.Get(e.ts.URL + "/v1/pet/skills")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unauthenticated: %d", resp.StatusCode)
	}

	// Import: inspect (refusal with details, then success), then a confirmed register.
	bad := petSkillDir(t, "bad")
	if err := os.Symlink("/etc", filepath.Join(bad, "etc")); err != nil {
		t.Fatal(err)
	}
	raw := e.expect(t, "POST", "/v1/pet/skills/inspect", map[string]string{"path": bad}, http.StatusUnprocessableEntity, nil)
	if !strings.Contains(raw, `"code":"unprocessable"`) || !strings.Contains(raw, `"path":"etc","reason":"symlinks are not allowed"`) {
		t.Fatalf("refusal %s", raw)
	}
	e.expect(t, "POST", "/v1/pet/skills/inspect", map[string]string{"path": "relative"}, http.StatusBadRequest, nil)
	e.expect(t, "POST", "/v1/pet/skills/inspect", `{"path":"/x","extra":1}`, http.StatusBadRequest, nil)
	dir := petSkillDir(t, "tidy")
	var in pet.Inspection
	e.expect(t, "POST", "/v1/pet/skills/inspect", map[string]string{"path": dir}, http.StatusOK, &in)
	if in.Name != "tidy" || in.Kind != pet.KindInstructions || in.Fingerprint == "" {
		t.Fatalf("inspection %+v", in)
	}
	e.expect(t, "POST", "/v1/pet/skills", map[string]any{"path": dir}, http.StatusBadRequest, nil)
	var sv pet.SkillView
	e.expect(t, "POST", "/v1/pet/skills", map[string]any{"path": dir, "confirm": true, "fingerprint": in.Fingerprint}, http.StatusCreated, &sv)
	if sv.Enabled || sv.Shortcut {
		t.Fatalf("registered %+v", sv)
	}
	e.expect(t, "POST", "/v1/pet/skills", map[string]any{"path": dir, "confirm": true, "fingerprint": in.Fingerprint}, http.StatusConflict, nil)
	e.expect(t, "PATCH", "/v1/pet/skills/tidy", map[string]any{"enabled": true, "shortcut": true}, http.StatusOK, &sv)
	if !sv.Enabled || !sv.Shortcut || !sv.Available {
		t.Fatalf("enabled %+v", sv)
	}
	var list PetSkillList
	e.expect(t, "GET", "/v1/pet/skills", nil, http.StatusOK, &list)
	if len(list.Skills) != 1 || list.Skills[0].Projection != pet.ProjectionOK {
		t.Fatalf("list %+v", list)
	}
	e.expect(t, "GET", "/v1/pet/skills/none", nil, http.StatusNotFound, nil)
	var w pet.Wheel
	e.expect(t, "GET", "/v1/pet/wheel", nil, http.StatusOK, &w)
	if len(w.Entries) != 1 || !w.Entries[0].Available || w.Entries[0].Ring != 1 {
		t.Fatalf("wheel %+v", w)
	}

	// Environment values: set, listed masked, deleted.
	var en pet.EnvEntry
	rec(e.expect(t, "PUT", "/v1/pet/env/CR_GROUP", map[string]string{"value": secret}, http.StatusOK, &en))
	rec(e.expect(t, "PUT", "/v1/pet/env/CR_GROUP", map[string]string{"value": secret, "workspace": "w1"}, http.StatusOK, nil))
	e.expect(t, "PUT", "/v1/pet/env/cr-group", map[string]string{"value": "x"}, http.StatusBadRequest, nil)
	var envs PetEnvList
	rec(e.expect(t, "GET", "/v1/pet/env", nil, http.StatusOK, &envs))
	if len(envs.Env) != 2 || envs.Env[0].Value != "********" || envs.Env[1].Scope != "workspace:w1" {
		t.Fatalf("env %+v", envs)
	}
	rec(e.expect(t, "GET", "/v1/pet/env?scope=workspace:w1", nil, http.StatusOK, &envs))
	if len(envs.Env) != 1 {
		t.Fatalf("w1 env %+v", envs)
	}
	e.expect(t, "GET", "/v1/pet/env?scope=team", nil, http.StatusBadRequest, nil)
	e.expect(t, "DELETE", "/v1/pet/env/CR_GROUP?workspace=w1", nil, http.StatusNoContent, nil)
	e.expect(t, "DELETE", "/v1/pet/env/CR_GROUP?workspace=w1", nil, http.StatusNotFound, nil)

	// Invocations, tasks, archive and the next epoch.
	snap := map[string]any{"scope": "session:s1", "workspaceId": "w1", "title": "T", "selection": "x", "capturedAt": time.Now().UTC().Format(time.RFC3339)}
	var v1, v2 pet.InvocationView
	rec(e.expect(t, "POST", "/v1/pet/invocations", map[string]any{"skill": "tidy", "snapshot": snap}, http.StatusCreated, &v1))
	if v1.Status != pet.StatusSucceeded || v1.Latest().Output != "done" || v1.Epoch != 1 {
		t.Fatalf("invocation %+v", v1)
	}
	e.fail.Store(1)
	rec(e.expect(t, "POST", "/v1/pet/invocations", map[string]any{"skill": "tidy", "snapshot": snap}, http.StatusCreated, &v2))
	if v2.TaskID != v1.TaskID || v2.Status != pet.StatusFailed || !v2.Latest().Transient {
		t.Fatalf("failed invocation %+v", v2)
	}
	rec(e.expect(t, "POST", "/v1/pet/invocations/"+v2.ID+"/retry", nil, http.StatusOK, &v2))
	if len(v2.Runs) != 2 || v2.Status != pet.StatusSucceeded {
		t.Fatalf("retried %+v", v2)
	}
	e.expect(t, "POST", "/v1/pet/invocations/"+v2.ID+"/retry", nil, http.StatusConflict, nil)
	e.expect(t, "GET", "/v1/pet/invocations/nope", nil, http.StatusNotFound, nil)
	e.expect(t, "POST", "/v1/pet/invocations", map[string]any{"skill": "tidy", "snapshot": map[string]any{"scope": "session"}}, http.StatusBadRequest, nil)
	e.expect(t, "POST", "/v1/pet/invocations", map[string]any{"skill": "nope", "snapshot": snap}, http.StatusNotFound, nil)
	var tasks PetTaskList
	rec(e.expect(t, "GET", "/v1/pet/tasks", nil, http.StatusOK, &tasks))
	if len(tasks.Tasks) != 1 || tasks.Tasks[0].Invocations != 2 {
		t.Fatalf("tasks %+v", tasks)
	}
	e.expect(t, "GET", "/v1/pet/tasks?limit=0", nil, http.StatusBadRequest, nil)
	var tv pet.TaskView
	rec(e.expect(t, "GET", "/v1/pet/tasks/"+v1.TaskID, nil, http.StatusOK, &tv))
	if len(tv.InvocationList) != 2 || len(tv.InvocationList[1].Runs) != 2 {
		t.Fatalf("task %+v", tv)
	}
	e.expect(t, "POST", "/v1/pet/tasks/"+v1.TaskID+"/archive", nil, http.StatusOK, nil)
	e.expect(t, "POST", "/v1/pet/tasks/"+v1.TaskID+"/archive", nil, http.StatusConflict, nil)
	rec(e.expect(t, "POST", "/v1/pet/invocations", map[string]any{"skill": "tidy", "snapshot": snap}, http.StatusCreated, &v1))
	if v1.Epoch != 2 {
		t.Fatalf("new epoch %+v", v1)
	}
	rec(e.expect(t, "GET", "/v1/pet/tasks?archived=true&scope=session:s1", nil, http.StatusOK, &tasks))
	if len(tasks.Tasks) != 2 {
		t.Fatalf("all tasks %+v", tasks)
	}

	// Drift fails closed until the rebuild route runs.
	if err := os.Remove(filepath.Join(e.ws, pet.ProjectionDir, "tidy")); err != nil {
		t.Fatal(err)
	}
	raw = e.expect(t, "POST", "/v1/pet/invocations", map[string]any{"skill": "tidy", "snapshot": snap}, http.StatusConflict, nil)
	if !strings.Contains(raw, "projection drift (missing") {
		t.Fatalf("drift answer %s", raw)
	}
	var diag pet.Diagnostics
	rec(e.expect(t, "GET", "/v1/pet/diagnostics", nil, http.StatusOK, &diag))
	if len(diag.Drift) != 1 || diag.Paths.Workspace != e.ws || !diag.Executors[pet.KindInstructions].Available || diag.Executors[pet.KindScript].Available {
		t.Fatalf("diagnostics %+v", diag)
	}
	var rep pet.RebuildReport
	e.expect(t, "POST", "/v1/pet/projection/rebuild", nil, http.StatusOK, &rep)
	if len(rep.Created) != 1 || len(rep.Cleared) != 1 {
		t.Fatalf("rebuild %+v", rep)
	}
	rec(e.expect(t, "POST", "/v1/pet/invocations", map[string]any{"skill": "tidy", "snapshot": snap}, http.StatusCreated, nil))

	// Built-in actions: none registered here.
	e.expect(t, "POST", "/v1/pet/actions/qa-group/invoke", map[string]any{"snapshot": snap}, http.StatusNotFound, nil)

	// Removal.
	e.expect(t, "DELETE", "/v1/pet/skills/tidy", nil, http.StatusNoContent, nil)
	e.expect(t, "DELETE", "/v1/pet/skills/tidy", nil, http.StatusNotFound, nil)

	if strings.Contains(all.String(), secret) {
		t.Fatal("an environment value appeared in an answer")
	}
	if p, _ := e.prompt.Load().(string); p == "" || strings.Contains(p, secret) {
		t.Fatalf("model prompt %q", p)
	}
}

package server

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/pet"
)

// TestExternalSkillSettings: the executor is set at registration and changed by PATCH, shown
// in the views and on the wheel; an unknown executor, and an external one for a script Skill,
// are refused with 400 and change nothing; a CLI that is not installed makes the Skill
// unavailable with the reason.
func TestExternalSkillSettings(t *testing.T) {
	e := newPetEnv(t)
	dir := petSkillDir(t, "notes")
	var in pet.Inspection
	e.expect(t, "POST", "/v1/pet/skills/inspect", map[string]any{"path": dir}, http.StatusOK, &in)
	body := func(ex string) map[string]any {
		return map[string]any{"path": dir, "confirm": true, "fingerprint": in.Fingerprint, "enabled": true, "shortcut": true, "executor": ex}
	}
	if raw := e.expect(t, "POST", "/v1/pet/skills", body("gemini"), http.StatusBadRequest, nil); !strings.Contains(raw, `unknown executor \"gemini\"`) {
		t.Fatal(raw)
	}
	e.expect(t, "GET", "/v1/pet/skills/notes", nil, http.StatusNotFound, nil)
	var v pet.SkillView
	e.expect(t, "POST", "/v1/pet/skills", body(""), http.StatusCreated, &v)
	if v.Executor != pet.ExecutorBuiltin || !v.Available {
		t.Fatalf("default: %+v", v)
	}
	e.expect(t, "PATCH", "/v1/pet/skills/notes", map[string]any{"executor": "claude"}, http.StatusOK, &v)
	// This Pet has no server URL for hooks (and maybe no claude): the Skill fails closed.
	if v.Executor != pet.ExecutorClaude || v.Available || v.Reason == "" {
		t.Fatalf("claude: %+v", v)
	}
	var w pet.Wheel
	e.expect(t, "GET", "/v1/pet/wheel", nil, http.StatusOK, &w)
	if len(w.Entries) != 1 || w.Entries[0].Available || !strings.Contains(w.Entries[0].Reason, "cannot run") {
		t.Fatalf("wheel: %+v", w.Entries)
	}
	e.expect(t, "PATCH", "/v1/pet/skills/notes", map[string]any{"executor": "nope"}, http.StatusBadRequest, nil)
	e.expect(t, "GET", "/v1/pet/skills/notes", nil, http.StatusOK, &v)
	if v.Executor != pet.ExecutorClaude {
		t.Fatalf("a refused patch changed the executor: %+v", v)
	}
	e.expect(t, "PATCH", "/v1/pet/skills/notes", map[string]any{"executor": "builtin"}, http.StatusOK, &v)
	if v.Executor != pet.ExecutorBuiltin || !v.Available {
		t.Fatalf("back to builtin: %+v", v)
	}
	// A script Skill runs on no CLI.
	sdir := petSkillDir(t, "script-one")
	if err := os.WriteFile(filepath.Join(sdir, "run.sh"), []byte("echo hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var sin pet.Inspection
	e.expect(t, "POST", "/v1/pet/skills/inspect", map[string]any{"path": sdir}, http.StatusOK, &sin)
	raw := e.expect(t, "POST", "/v1/pet/skills", map[string]any{"path": sdir, "confirm": true, "fingerprint": sin.Fingerprint, "executor": "codex"}, http.StatusBadRequest, nil)
	if !strings.Contains(raw, "runs instruction Skills") {
		t.Fatal(raw)
	}
}

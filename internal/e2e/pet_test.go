package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/internal/testutil/fakechat"
	"github.com/pixie-dev/pixie/runtime/sandbox"
)

// writeSkill writes a Skill directory holding only a SKILL.md (an instruction Skill).
func writeSkill(t *testing.T, root, name, description, body string) string {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	md := "---\nname: " + name + "\n"
	if description != "" {
		md += "description: " + description + "\n"
	}
	md += "---\n" + body + "\n"
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPetSkillImportAndInvoke imports a Skill in two steps (inspect, then register), sees a
// refused directory's problems next to the path, invokes the Skill from the mascot's wheel
// (where a disabled Skill is shown unavailable with its reason) and finds the Task, the
// Invocation and its Run in the task panel. It also writes a screenshot of each Pet settings tab.
func TestPetSkillImportAndInvoke(t *testing.T) {
	const answer = "Review notes: the parser change lacks a test for empty input."
	m := newModelServer(t, `{"verdict":"pass"}`, answer)
	skills := t.TempDir()
	good := writeSkill(t, skills, "review-notes", "Writes review notes for the change in the snapshot.", "Read the snapshot and write three short review notes.")
	off := writeSkill(t, skills, "release-check", "Checks a release branch.", "Check the release.")
	bad := writeSkill(t, skills, "no-description", "", "Nothing.")

	p := testutil.StartServer(t, t.TempDir(), nil, m.modelArgs()...)
	b := NewBrowser(t, 1280, 800)
	viewport(t, b, 1280, 800)
	login(t, b, p)
	watchErrors(t, b)

	open(t, b, "#/pet-settings?tab=skills", "[name=skill-path]")
	shot(t, b, "settings-skills-empty")

	// A directory that fails validation: the problems show next to the path field.
	b.Run(t, "inspect a bad Skill", chromedp.SetValue(chromedp.CSS("[name=skill-path]"), bad), click(chromedp.CSS("[data-action=inspect]")))
	waitFor(t, b, "the refusal next to the path", `[...document.querySelectorAll('[data-errors-for] .field-error')].some((e) => e.textContent.includes('description'))`)
	shot(t, b, "skill-refused")

	// Inspect, then register (enabled, on the wheel).
	b.Run(t, "inspect", chromedp.SetValue(chromedp.CSS("[name=skill-path]"), good), click(chromedp.CSS("[data-action=inspect]")),
		chromedp.WaitVisible(chromedp.CSS(".inspection")))
	mustContain(t, "inspection", textOf(t, b, ".inspection"), "review-notes", "Writes review notes", "instructions", "1 (")
	shot(t, b, "skill-inspected")
	b.Run(t, "register", click(chromedp.CSS("[data-action=register]")), chromedp.WaitVisible(chromedp.CSS(`[data-skill="review-notes"]`)))
	waitFor(t, b, "the Skill is ready", `document.querySelector('[data-skill="review-notes"]').innerText.includes('ready')`)

	// A second Skill on the wheel but disabled: the wheel shows it unavailable with the reason.
	b.Run(t, "inspect the second", chromedp.SetValue(chromedp.CSS("[name=skill-path]"), off), click(chromedp.CSS("[data-action=inspect]")),
		chromedp.WaitVisible(chromedp.CSS("#reg-enabled")), click(chromedp.CSS("#reg-enabled")), click(chromedp.CSS("[data-action=register]")),
		chromedp.WaitVisible(chromedp.CSS(`[data-skill="release-check"]`)))
	shot(t, b, "settings-skills")

	// The wheel.
	b.Run(t, "open the Pet", click(chromedp.CSS("button.mascot")), chromedp.WaitVisible(chromedp.CSS(`.wheel-entry[data-entry="review-notes"]`)))
	if v := Eval[string](t, b, `document.querySelector('.wheel-entry[data-entry="release-check"]').getAttribute('aria-disabled')`); v != "true" {
		t.Fatalf("the disabled Skill's wheel entry has aria-disabled=%q", v)
	}
	b.Run(t, "focus the unavailable entry", chromedp.Focus(chromedp.CSS(`.wheel-entry[data-entry="release-check"]`)))
	waitFor(t, b, "the reason", `document.querySelector('.wheel-detail').innerText.includes('Unavailable: Skill release-check is disabled')`)
	shot(t, b, "wheel")
	b.Run(t, "an unavailable entry does not run", click(chromedp.CSS(`.wheel-entry[data-entry="release-check"]`)))
	if Eval[bool](t, b, `!!document.querySelector('[data-action=run]')`) {
		t.Fatal("clicking an unavailable entry opened the confirmation")
	}

	b.Run(t, "pick the Skill", click(chromedp.CSS(`.wheel-entry[data-entry="review-notes"]`)), chromedp.WaitVisible(chromedp.CSS("[data-action=run]")),
		chromedp.SetValue(chromedp.CSS(".pet-confirm [name=title]"), "Parser refactor"))
	shot(t, b, "wheel-confirm")
	b.Run(t, "run it", click(chromedp.CSS("[data-action=run]")), chromedp.WaitVisible(chromedp.CSS(".pet-result")))
	mustContain(t, "result", textOf(t, b, ".pet-result"), "succeeded", answer)
	shot(t, b, "wheel-result")

	// The task panel shows the Task, its Invocation and the Run.
	b.Run(t, "open the task panel", click(chromedp.CSS(".pet-result a.button")), chromedp.WaitVisible(chromedp.CSS(".invocation")))
	waitFor(t, b, "the run output", `document.querySelector('.invocation .run-output') && document.querySelector('.invocation .run-output').innerText.includes(`+jsq(answer)+`)`)
	mustContain(t, "task list", textOf(t, b, ".task-list"), "Independent", "1 invocation")
	mustContain(t, "invocation", textOf(t, b, ".invocation"), "#1 review-notes", "succeeded", "Run 1", "instructions")
	b.Run(t, "open the snapshot", click(chromedp.CSS(".invocation details summary")))
	mustContain(t, "snapshot", textOf(t, b, ".invocation details"), "Parser refactor", "Independent")
	shot(t, b, "task-panel")
	viewport(t, b, 420, 800)
	shot(t, b, "task-panel-narrow")
	viewport(t, b, 1280, 800)

	// An environment value: a bad key is refused where it was typed; a saved value is masked.
	open(t, b, "#/pet-settings?tab=environment", "[name=env-key]")
	b.Run(t, "a bad key", chromedp.SetValue(chromedp.CSS("[name=env-key]"), "cr-group"), chromedp.SetValue(chromedp.CSS("[name=env-value]"), "oc_secret_group"),
		click(chromedp.CSS("[data-action=save-env]")))
	waitFor(t, b, "the refusal", `document.querySelector('.tabpanel .error[role=alert]')`)
	b.Run(t, "a good key", chromedp.SetValue(chromedp.CSS("[name=env-key]"), "CR_GROUP"), chromedp.SetValue(chromedp.CSS("[name=env-value]"), "oc_secret_group"),
		click(chromedp.CSS("[data-action=save-env]")))
	waitFor(t, b, "the value listed", `document.querySelector('.tabpanel').innerText.includes('DSH_PET_CR_GROUP')`)
	if Eval[bool](t, b, `document.body.innerText.includes('oc_secret_group') || [...document.querySelectorAll('input')].some((i) => i.value === 'oc_secret_group')`) {
		t.Fatal("an environment value is shown after saving")
	}

	// The executor of an instruction Skill: Claude Code is not set up for this server, so the
	// Skill shows unavailable with the reason until it runs on the Pixie model again.
	open(t, b, "#/pet-settings?tab=skills", `[data-skill="review-notes"] select[name=executor]`)
	setExecutor := func(v string) {
		t.Helper()
		b.Run(t, "executor "+v, chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('[data-skill="review-notes"] select[name=executor]'); s.value = `+jsq(v)+`; s.dispatchEvent(new Event('change')); })()`))
	}
	setExecutor("claude")
	waitFor(t, b, "unavailable on claude", `(() => { const r = document.querySelector('[data-skill="review-notes"]'); return r && r.innerText.includes('unavailable') && r.querySelector('select[name=executor]').value === 'claude'; })()`)
	shot(t, b, "skill-executor-claude")
	setExecutor("builtin")
	waitFor(t, b, "ready on builtin", `(() => { const r = document.querySelector('[data-skill="review-notes"]'); return r && r.innerText.includes('ready') && r.querySelector('select[name=executor]').value === 'builtin'; })()`)

	// Every settings tab, for review.
	for _, tab := range []string{"general", "skills", "locus", "environment", "channel", "diagnostics"} {
		open(t, b, "#/pet-settings?tab="+tab, `[role=tab][data-tab="`+tab+`"][aria-selected=true]`)
		waitFor(t, b, tab+" loaded", `!document.querySelector('.tabpanel').innerText.includes('Loading…')`)
		shot(t, b, "settings-"+tab)
	}
	noConsoleErrors(t, b)
}

// TestPetToolCallsInTheTaskPanel registers a Skill that asks for workspace-write (the Register
// button waits for the grant to be ticked), runs it from the wheel on the built-in agent, whose
// scripted model lists the working directory and removes a file with the shell tool, and finds
// each tool call with its input, output and policy in the task panel.
func TestPetToolCallsInTheTaskPanel(t *testing.T) {
	if err := sandbox.Probe(); err != nil {
		t.Skipf("no Landlock here (%v): the shell tool fails closed", err)
	}
	srv := fakechat.NewScript(t, fakechat.Steps(
		fakechat.Turn{Calls: []fakechat.ToolCall{{Name: "list", Arguments: `{}`}}},
		fakechat.Turn{Calls: []fakechat.ToolCall{{Name: "shell", Arguments: `{"command":"rm -v scratch.tmp"}`}}},
		fakechat.Turn{Text: "Removed scratch.tmp."},
	))
	cwd := t.TempDir()
	if err := os.WriteFile(filepath.Join(cwd, "scratch.tmp"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := writeSkill(t, t.TempDir(), "tidy", "Removes *.tmp files.", "Remove the *.tmp files of the working directory.")
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("---\nname: tidy\ndescription: Removes *.tmp files.\nsandbox: workspace-write\n---\nRemove the *.tmp files.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := testutil.StartServer(t, t.TempDir(), nil, "--set", "model.provider=openai", "--set", "model.baseUrl="+srv.URL,
		"--set", "model.model=m", "--set", "model.apiKey=k")
	b := NewBrowser(t, 1280, 800)
	viewport(t, b, 1280, 800)
	login(t, b, p)
	watchErrors(t, b)

	open(t, b, "#/pet-settings?tab=skills", "[name=skill-path]")
	b.Run(t, "inspect", chromedp.SetValue(chromedp.CSS("[name=skill-path]"), dir), click(chromedp.CSS("[data-action=inspect]")),
		chromedp.WaitVisible(chromedp.CSS(".inspection")))
	mustContain(t, "inspection", textOf(t, b, ".inspection"), "workspace-write", "Grant workspace-write")
	if !Eval[bool](t, b, `document.querySelector('[data-action=register]').disabled`) {
		t.Fatal("Register is enabled before the grant is ticked")
	}
	b.Run(t, "grant and register", click(chromedp.CSS("#reg-sandbox")), click(chromedp.CSS("[data-action=register]")),
		chromedp.WaitVisible(chromedp.CSS(`[data-skill="tidy"]`)))
	mustContain(t, "the Skill", textOf(t, b, `[data-skill="tidy"]`), "workspace-write")

	var snap struct {
		ID     string `json:"id"`
		TaskID string `json:"taskId"`
	}
	adminAPI(t, p, http.MethodPost, "/v1/pet/invocations", map[string]any{"skill": "tidy",
		"snapshot": map[string]any{"scope": "independent", "cwd": cwd, "capturedAt": time.Now().Add(-time.Second)}}, &snap)
	if _, err := os.Stat(filepath.Join(cwd, "scratch.tmp")); !os.IsNotExist(err) {
		t.Fatal("scratch.tmp is still there")
	}
	open(t, b, "#/pet?task="+snap.TaskID, ".invocation")
	waitFor(t, b, "the tool calls", `document.querySelectorAll('.invocation .tool-call').length === 2`)
	mustContain(t, "tool calls", textOf(t, b, ".invocation .tool-calls"), "Tool calls (2)", "#1 list", "#2 shell", `"command":"rm -v scratch.tmp"`,
		"removed 'scratch.tmp'", "exit status 0")
	mustContain(t, "run", textOf(t, b, ".invocation .run"), "workspace-write", "Removed scratch.tmp.")
	shot(t, b, "task-panel-tool-calls")
	noConsoleErrors(t, b)
}

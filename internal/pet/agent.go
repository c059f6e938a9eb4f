package pet

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/pixie-dev/pixie/internal/agent"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/runtime"
)

// agentPreamble opens the system prompt of an instruction Skill's agent; SKILL.md's body follows
// it. %s are: the tools, the root and what it is, the policy and what it allows, the Skill's
// staged folder, the environment variables.
const agentPreamble = `You are Pixie's Pet executor: you do one chore for a person, with tools, against a frozen snapshot of what they were working on. Work only through the tools; nothing you write is run unless you run it with a tool.

Tools: %s.
The root (the working directory of every tool) is %s%s.
Sandbox policy: %s.
This Skill's own files are in %s (a private copy made for this run): when its instructions name one of its files (scripts/x.sh, a template), that is where it is; run its scripts with bash from the shell tool.
%s
When the chore is done, answer with a short summary of what you did and what you found. The user message holds the snapshot of the source as JSON; earlier turns are the task's earlier invocations.

The Skill's instructions follow.`

// policyText says what a sandbox policy lets the shell tool do.
func policyText(p runtime.Policy, shell bool) string {
	if !shell {
		return string(p) + " (no shell tool here: list, read and search only read)"
	}
	switch p {
	case runtime.PolicyWorkspaceWrite:
		return "workspace-write: shell commands may read everywhere they are allowed and change files beneath the root; nothing outside it"
	}
	return "read-only: shell commands may read but not change any file (a write fails with \"Permission denied\")"
}

// runAgent runs an instruction Skill on the built-in agent: SKILL.md's body as the system prompt
// (after a short preamble naming the tools, the root, the policy and the Skill's staged files),
// the Task's history as earlier turns, the Snapshot as the user message, and the tools list,
// read, search (read-only, beneath the root) and shell (through the bash executor, at policy,
// with the environment values in its environment only) over the snapshot's cwd (or the Run's
// empty directory when it has none). Environment values are redacted from everything recorded
// and sent to the model.
func (s *Service) runAgent(ctx context.Context, sc *scan, pc PetContext, vars map[string]string, red redactor, policy runtime.Policy) outcome {
	if s.model == nil {
		return outcome{err: errs.Wrap(errs.Unavailable, model.ErrNoModel, "no Pixie model is configured")}
	}
	root, err := runCwd(sc, pc.Snapshot)
	if err != nil {
		return outcome{err: err}
	}
	tools, err := agent.FileTools(agent.FileOptions{Root: root, Hidden: s.cfg.Agent.Hidden})
	if err != nil {
		return outcome{err: err}
	}
	out := outcome{noEnv: true}
	if bash := s.bashExecutor(); bash != nil {
		sh, err := agent.NewShell(agent.ShellOptions{Exec: bash, Root: root, Policy: policy, Env: vars, Timeout: s.cfg.Agent.ShellTimeout})
		if err != nil {
			return outcome{err: err}
		}
		defer sh.Close()
		tools = append(tools, sh.Tool())
		out.noEnv = false
	}
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	where := " (the snapshot's cwd)"
	if pc.Snapshot.Cwd == "" {
		where = " (the snapshot has no cwd: this is an empty folder of this run)"
	}
	envLine := "No environment values are configured for this task."
	if !out.noEnv && len(vars) > 0 {
		keys := make([]string, 0, len(vars))
		for k := range vars {
			keys = append(keys, "$"+k)
		}
		sort.Strings(keys)
		envLine = "Environment values the person configured reach shell commands as variables (" + strings.Join(keys, ", ") + "); their values are never shown to you, so use the variables."
	}
	system := fmt.Sprintf(agentPreamble, strings.Join(names, ", "), root, where, policyText(policy, !out.noEnv), sc.staged, envLine) + "\n\n" + sc.body

	var history []model.Message
	for _, h := range pc.History {
		history = append(history, model.Message{Role: model.RoleUser, Content: historyPrompt(h)})
		answer := h.Output
		if h.Status != StatusSucceeded {
			answer = fmt.Sprintf("(this invocation %s: %s)", h.Status, h.Error)
		}
		if strings.TrimSpace(answer) == "" {
			answer = "(no output)"
		}
		history = append(history, model.Message{Role: model.RoleAssistant, Content: answer})
	}
	snap, _ := json.MarshalIndent(pc.Snapshot, "", "  ")
	user := fmt.Sprintf("Pet invocation #%d of the Skill %q (task %s, epoch %d, run %d).\nSnapshot of the source, frozen at capture time (JSON):\n%s",
		pc.Seq, pc.Skill, pc.TaskID, pc.Epoch, pc.Run, snap)

	res, err := agent.Run(ctx, agent.Config{
		Model: s.model, System: system, History: history, User: user, Tools: tools,
		MaxSteps: s.cfg.Agent.MaxSteps, MaxTokens: s.cfg.Agent.MaxTokens,
		Gates:   s.cfg.Agent.Gates,
		Session: agent.GateSession{ID: pc.ExecutorSession, Preset: s.cfg.Agent.Preset, Cwd: root, Policy: policy},
		Turn:    pc.Seq,
		Redact:  red.clean,
		Now:     s.cfg.Now,
	})
	u := res.Usage
	out.output, out.usage, out.steps, out.err = res.Text, &u, res.Steps, err
	for _, c := range res.Calls {
		gate := c.Gate
		if len(c.Notes) > 0 {
			notes := "notes: " + strings.Join(c.Notes, "; ")
			if gate == "" {
				gate = notes
			} else {
				gate += " (" + notes + ")"
			}
		}
		out.toolCalls = append(out.toolCalls, ToolCall{N: c.N, Step: c.Step, Name: c.Name, Input: c.Input,
			Output: c.Output, IsError: c.IsError, Gate: red.clean(gate), DurationMS: c.DurationMS})
	}
	return out
}

// bashExecutor is the executor of shell commands (the script executor), or nil.
func (s *Service) bashExecutor() runtime.Executor {
	if d, ok := s.exec.(runtime.Dispatcher); ok {
		if ex := d[runtime.KindScript]; ex != nil {
			return ex
		}
		return nil
	}
	return s.exec
}

package pet

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/runtime"
)

// Diagnostics is what Settings → Diagnostics shows.
type Diagnostics struct {
	Paths Paths `json:"paths"`
	// Allowlist are the Skills that may run: registered and enabled.
	Allowlist []string `json:"allowlist"`
	// Skills is every registered Skill with its live state.
	Skills []SkillView `json:"skills"`
	// Drift lists the Skills that fail closed until the projection is rebuilt.
	Drift []DriftEntry `json:"drift"`
	// Stray are entries in the skills folder that belong to no enabled Skill.
	Stray []string `json:"stray"`
	// Executors says which Skill kinds can run here.
	Executors map[SkillKind]Availability `json:"executors"`
	// ExternalExecutors says whether instruction Skills can run on Claude Code and Codex here
	// (under the read-only policy).
	ExternalExecutors map[string]Availability `json:"externalExecutors"`
	// Model describes the Pixie model (no secrets).
	Model model.Info `json:"model"`
	// ScriptPolicy is the sandbox policy a Skill runs under unless it asks for more and the
	// person granted it at registration (Skill.Sandbox): read-only.
	ScriptPolicy string `json:"scriptPolicy"`
	// Agent describes the built-in agent of instruction Skills.
	Agent AgentInfo `json:"agent"`
	// Builtins are the built-in actions with their availability.
	Builtins []WheelEntry `json:"builtins"`
}

// AgentInfo describes the built-in agent: its limits, and the preset whose gates check its tool
// calls (Gates false: none do).
type AgentInfo struct {
	MaxSteps  int    `json:"maxSteps"`
	MaxTokens int    `json:"maxTokens"`
	Preset    string `json:"preset,omitempty"`
	Gates     bool   `json:"gates"`
}

// DriftEntry is one drifted Skill.
type DriftEntry struct {
	Skill   string `json:"skill"`
	Problem string `json:"problem"`
}

// Diagnostics reports paths, the allowlist, drift, stray projection entries and executor
// availability.
func (s *Service) Diagnostics(ctx context.Context) (Diagnostics, error) {
	d := Diagnostics{Paths: s.Paths(), Allowlist: []string{}, Skills: []SkillView{}, Drift: []DriftEntry{},
		Stray: []string{}, Executors: map[SkillKind]Availability{}, ScriptPolicy: string(runtime.PolicyReadOnly),
		Agent:    AgentInfo{MaxSteps: s.cfg.Agent.MaxSteps, MaxTokens: s.cfg.Agent.MaxTokens, Preset: s.cfg.Agent.Preset, Gates: s.cfg.Agent.Gates != nil},
		Builtins: []WheelEntry{}}
	for _, k := range []SkillKind{KindWASM, KindScript, KindInstructions} {
		ok, reason := s.executorAvailable(ctx, k)
		d.Executors[k] = Availability{Available: ok, Reason: reason}
	}
	d.ExternalExecutors = s.externalAvailability(ctx)
	if s.model != nil {
		d.Model = s.model.Info()
	}
	views, err := s.Skills(ctx)
	if err != nil {
		return d, err
	}
	d.Skills = views
	enabled := map[string]bool{}
	for _, v := range views {
		if v.Enabled {
			d.Allowlist = append(d.Allowlist, v.Name)
			enabled[v.Name] = true
		}
		if v.Drift {
			problem := v.Projection
			if problem == ProjectionOK {
				problem = "repaired by hand; still needs a rebuild"
			}
			d.Drift = append(d.Drift, DriftEntry{Skill: v.Name, Problem: problem})
		}
	}
	if info, err := os.Lstat(s.projectionDir()); err == nil && (info.Mode()&fs.ModeSymlink != 0 || !info.IsDir()) {
		d.Stray = append(d.Stray, s.projectionDir())
	} else if entries, err := os.ReadDir(s.projectionDir()); err == nil {
		for _, e := range entries {
			if !enabled[e.Name()] {
				d.Stray = append(d.Stray, filepath.Join(s.projectionDir(), e.Name()))
			}
		}
	}
	sort.Strings(d.Stray)
	for _, b := range s.builtinList() {
		ok, reason := b.Availability(ctx)
		if ok {
			reason = ""
		}
		d.Builtins = append(d.Builtins, WheelEntry{Kind: EntryBuiltin, Name: b.ID(), Label: b.Label(), Available: ok, Reason: reason})
	}
	return d, nil
}

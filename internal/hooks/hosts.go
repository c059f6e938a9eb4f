package hooks

import (
	"fmt"
	"strings"
)

// Accepts reports whether the host of ev applies out as it is, by the rules its hook parser
// enforces (nil), or why it would drop or refuse it. Codex 0.171.0 parses strictly: an unknown
// field, a field its event does not take, or a combination it calls unsupported makes it drop
// the whole answer ("hook: PostToolUse Failed"), hints included. The Codex rules below are
// those of its embedded output schemas and its output parser; Claude Code's are the fields its
// hook schema declares for each event. Render's results always pass; the service checks every
// answer anyway, so a hint is confirmed only when it rides in an answer the host applies.
func Accepts(ev Event, out Output) error {
	if !ev.Handled {
		if !out.Empty() {
			return fmt.Errorf("an answer to the unhandled event %s must be {}", ev.Name)
		}
		return nil
	}
	spec := out.HookSpecificOutput
	if spec != nil && spec.HookEventName != ev.Name {
		return fmt.Errorf("hookSpecificOutput.hookEventName is %q at %s", spec.HookEventName, ev.Name)
	}
	if out.Decision != "" && out.Decision != "block" {
		return fmt.Errorf("decision %q is not \"block\"", out.Decision)
	}
	if out.Decision == "block" && strings.TrimSpace(out.Reason) == "" {
		return fmt.Errorf("%s: decision block without a non-empty reason", ev.Name)
	}
	if out.Reason != "" && out.Decision == "" {
		return fmt.Errorf("%s: reason without decision", ev.Name)
	}
	codex := ev.Host == HostCodex
	if spec != nil {
		var bad []string
		if spec.PermissionDecision != "" && ev.Name != EventPreToolUse {
			bad = append(bad, "permissionDecision")
		}
		if spec.PermissionDecisionReason != "" && ev.Name != EventPreToolUse {
			bad = append(bad, "permissionDecisionReason")
		}
		if len(spec.UpdatedInput) > 0 && ev.Name != EventPreToolUse {
			bad = append(bad, "updatedInput")
		}
		if len(spec.UpdatedToolOutput) > 0 && (codex || ev.Name != EventPostToolUse) {
			bad = append(bad, "updatedToolOutput")
		}
		if spec.AdditionalContext != "" && (ev.Name == EventStop || ev.Name == EventSubagentStop) {
			bad = append(bad, "additionalContext")
		}
		if ev.Name == EventStop || ev.Name == EventSubagentStop {
			bad = append(bad, "hookSpecificOutput")
		}
		if len(bad) > 0 {
			return fmt.Errorf("%s does not take %s at %s", hostName(ev.Host), strings.Join(bad, ", "), ev.Name)
		}
		if ev.Name == EventPreToolUse {
			switch spec.PermissionDecision {
			case "":
				if spec.PermissionDecisionReason != "" {
					return fmt.Errorf("PreToolUse: permissionDecisionReason without permissionDecision")
				}
				if len(spec.UpdatedInput) > 0 {
					return fmt.Errorf("PreToolUse: updatedInput without permissionDecision allow")
				}
			case "deny":
				if strings.TrimSpace(spec.PermissionDecisionReason) == "" {
					return fmt.Errorf("PreToolUse: deny without a non-empty permissionDecisionReason")
				}
				if len(spec.UpdatedInput) > 0 {
					return fmt.Errorf("PreToolUse: updatedInput with deny")
				}
			case "allow":
				if codex && len(spec.UpdatedInput) == 0 {
					return fmt.Errorf("PreToolUse: Codex does not take permissionDecision allow without updatedInput")
				}
			case "ask":
				if codex {
					return fmt.Errorf("PreToolUse: Codex does not take permissionDecision ask")
				}
			default:
				return fmt.Errorf("PreToolUse: permissionDecision %q", spec.PermissionDecision)
			}
		}
	}
	if codex && ev.Name == EventPreToolUse && out.Decision != "" {
		// Codex takes the legacy decision:block, but Pixie speaks hookSpecificOutput there.
		return fmt.Errorf("PreToolUse answers use permissionDecision, not decision")
	}
	return nil
}

func hostName(h string) string {
	if h == HostCodex {
		return "Codex"
	}
	return "Claude Code"
}

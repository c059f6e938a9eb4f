package hooks_test

import (
	"fmt"

	"github.com/pixie-dev/pixie/internal/hooks"
)

// A PreToolUse from Claude Code maps to the tool-before point; a gate that blocks it becomes a
// deny with the reason, which Claude Code shows to the model.
func Example() {
	ev, err := hooks.Map([]byte(`{"session_id":"s1","cwd":"/home/user/repo","permission_mode":"plan",
		"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"git push --force"}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ev.Point, ev.Agent, ev.Policy, ev.Target)

	out := hooks.Render(ev, hooks.Outcome{Action: hooks.ActionBlocked, Gate: "block-risky-commands",
		Reason: "Blocked: force push."}, "")
	fmt.Println(string(out.Marshal()))

	// Events Pixie does not gate answer {}.
	ev, _ = hooks.Map([]byte(`{"session_id":"s1","hook_event_name":"Notification","message":"hi"}`))
	fmt.Println(ev.Handled, string(hooks.Render(ev, hooks.Outcome{}, "").Marshal()))
	// Output:
	// tool-before root read-only {"command":"git push --force"}
	// {"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"Blocked: force push."}}
	// false {}
}

package gate

import (
	"regexp"

	"github.com/pixie-dev/pixie/sdk/abi"
)

// Task variables, written {{name}} (spaces inside the braces are allowed):
//
//	{{target}}              the text the gate checks
//	{{point}}               the point
//	{{agent}}               root or child
//	{{turn}}                the turn number
//	{{session.id}}          the session id
//	{{gate.name}}           the gate's name
//	{{tool.name}}           the tool name (tool points; empty elsewhere)
//	{{tool.args}}           the tool arguments JSON (tool points; empty elsewhere)
//	{{hooks.<name>.text}}   the rule's stdout (exit 0), <name> being the rule's hook name
//	{{hooks.<name>.data}}   the same stdout when it is a JSON object, else empty
//
// When the task does not use {{target}}, the target is given to Pixie after the task.
var baseVars = []string{"target", "point", "agent", "turn", "session.id", "gate.name", "tool.name", "tool.args"}

var varRE = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)

// undefinedVars lists the variables a task uses that are not defined for its rule.
func undefinedVars(task string, rule *Rule) []string {
	var bad []string
	seen := map[string]bool{}
	for _, m := range varRE.FindAllStringSubmatch(task, -1) {
		name := m[1]
		if seen[name] || isDefined(name, rule) {
			continue
		}
		seen[name] = true
		bad = append(bad, name)
	}
	return bad
}

func isDefined(name string, rule *Rule) bool {
	for _, v := range baseVars {
		if name == v {
			return true
		}
	}
	if rule == nil {
		return false
	}
	h := "hooks." + rule.HookName() + "."
	return name == h+"text" || name == h+"data"
}

// usesTarget reports whether the task places the target itself.
func usesTarget(task string) bool {
	for _, m := range varRE.FindAllStringSubmatch(task, -1) {
		if m[1] == "target" {
			return true
		}
	}
	return false
}

// render substitutes the variables in one pass (values are not rescanned).
func render(task string, vars map[string]string) string {
	return varRE.ReplaceAllStringFunc(task, func(m string) string {
		name := varRE.FindStringSubmatch(m)[1]
		if v, ok := vars[name]; ok {
			return v
		}
		return ""
	})
}

// Template is a starting point for a new gate.
type Template struct {
	// ID identifies the template.
	ID string `json:"id"`
	// Title and Description are shown on the template card.
	Title       string `json:"title"`
	Description string `json:"description"`
	// Gate is the draft gate the template creates.
	Gate Gate `json:"gate"`
}

func tmpl(id, title, desc, point, task string, mod func(*Gate)) Template {
	g := defaultGate()
	g.Name, g.Point, g.Task, g.Description = id, point, task, desc
	if mod != nil {
		mod(&g)
	}
	g.normalize()
	return Template{ID: id, Title: title, Description: desc, Gate: g}
}

// Templates returns the representative template of each point, in point order, then the
// blank gate.
func Templates() []Template {
	return []Template{
		tmpl("instruction-format-check", "Instruction format check",
			"Checks that an instruction you send states its goal, context and expected result before the agent starts.",
			abi.PointUserMessage,
			`Check whether this instruction to a coding agent can be acted on without guessing. A good instruction states the goal in its first sentence, gives the context the agent needs (files, constraints, what was already tried) and says what result is expected (a change, an answer, a report).

- If the goal is missing or the instruction could mean two different things, stop. In the reason, say in one or two sentences exactly what to add, addressed to the person who wrote it.
- If the goal is clear but context or the expected result is missing, pass and write a note with the one question the agent is most likely to get wrong.
- Otherwise pass with no note.
Never write a replacement: the person's wording stays as it is.`, nil),
		tmpl("agent-message-protocol", "Agent message protocol",
			"Keeps messages between agents in the team's protocol: a kind, the files referred to, and a short body.",
			abi.PointAgentMessage,
			`This is a message one agent sends another. The protocol is:
1. The first line starts with TASK:, RESULT: or QUESTION: and says in one sentence what the message is for.
2. Every file the message refers to is named by its path.
3. The whole message is at most 40 lines; logs and long output are summarised, not pasted.

- If the message follows the protocol, pass.
- If it breaks the protocol but its intent and facts are clear, write a replacement that follows the protocol and keeps every fact, path, number and instruction of the original. Do not add anything that is not in the original.
- If its intent is unclear, stop and say in the reason what the sending agent must make clear.`, nil),
		tmpl("block-risky-commands", "Block risky commands",
			"Denies tool calls that would destroy work, rewrite history or reach outside the project, and tells the agent what to do instead.",
			abi.PointToolBefore,
			`The agent is about to run the tool {{tool.name}} with these arguments:
{{tool.args}}

Stop if the call would do any of the following:
- delete or overwrite files outside the working directory, or delete a whole directory tree without a clear reason in the arguments;
- rewrite shared git history (push --force, reset --hard on a shared branch, deleting remote branches);
- change system configuration, install software system-wide, or use sudo;
- send project files, credentials or environment variables to a network host;
- run code downloaded in the same command (curl … | sh).
In the reason, name the risk in one sentence and tell the agent a safer way to reach its goal.
Otherwise pass. Do not write a replacement or an addition.`, nil),
		tmpl("digest-long-tool-results", "Digest long tool results",
			"Replaces a long tool result with a digest that keeps what the agent needs.",
			abi.PointToolAfter,
			`The tool {{tool.name}} returned the result below. If it is shorter than about 60 lines, or every line matters for the agent's next step, pass without a replacement.

Otherwise write a replacement that is a digest of the result:
- keep every file path, line number, error message, identifier and number the agent may need;
- group repeated lines and say how many there were;
- drop boilerplate, progress output and blank lines;
- keep it under a third of the original length;
- start it with "Digest of a long {{tool.name}} result:".
Never invent content that is not in the result.`, nil),
		tmpl("verify-final-answer", "Verify the final answer",
			"Asks the agent to redo its answer when it claims what it did not show, leaves the question open or contradicts itself.",
			abi.PointTurnEnd,
			`Read the agent's final answer for this turn.

Stop if any of these is true:
- it claims something was done or verified (tests pass, a file was changed, a bug is fixed) without showing how it knows;
- it does not answer what was asked, or leaves a part of it silently undone;
- it contradicts itself.
The reason becomes the agent's next instruction: say exactly what to check, show or correct, in at most three sentences.

Otherwise pass. If something deserves the person's attention (a risk, a follow-up, an assumption), write it as a one-line note.`, nil),
		tmpl("blank", "Blank gate", "Start from an empty task.", abi.PointUserMessage, "", nil),
	}
}

// Points lists the points in pipeline order.
func Points() []string { return append([]string(nil), abi.Points...) }

// Command block-risky-commands is a tool-before guest that stops clearly destructive shell
// commands without asking the model, and asks the decision engine (pixie_judge) only about
// unclear ones. Its bash twin is block-risky-commands.sh in this folder; both follow the same
// algorithm, step by step:
//
//  1. Only shell tools are checked (Bash, bash, shell, exec_command, run_shell_command,
//     local_shell); any other tool skips the gate (exit 10).
//  2. The command is the tool arguments' "command" (a string, or an argv array joined by
//     spaces) or "cmd". None, or arguments that are not JSON, skip the gate.
//  3. Whole-command patterns stop at once: a download piped to a shell (curl … | sh), a shell
//     running a download (sh <(curl …), bash -c "$(wget …)"), a fork bomb, a redirect onto a
//     disk device.
//  4. The command is cut into simple commands at ; & | ( ) ` and newlines, with quotes removed,
//     and each is split into words at spaces and tabs. Leading sudo, command, exec, nohup, time, env, VAR=value
//     and shell -c wrappers are dropped (sudo makes the command unclear). Then:
//     rm with -r and (-f or --no-preserve-root) on /, /*, ~, ~/, ~/*, $HOME (and ${HOME}, with
//     / or /*) stops; another recursive rm is unclear. git push with -f, --force, or a
//     +refspec stops; --force-with-lease or --force-if-includes is unclear. mkfs* stops; dd
//     onto /dev/… stops, other dd is unclear. chmod/chown/chgrp -R on / stops, other recursive
//     ones are unclear. git reset --hard, git clean -f, git checkout/restore of ".", git
//     branch -D, find -delete, shred, truncate, kill/pkill/killall, shutdown/reboot/halt/
//     poweroff, docker/podman rm/rmi/prune, kubectl delete and terraform destroy are unclear.
//  5. A stop concludes {"verdict":"stop","reason":…} (exit 11). Otherwise an unclear command
//     is judged ("is it risky?", threshold 0.5): yes stops with a reason, no concludes a pass
//     with a note; a judgment error fails the run (the error policy applies). A command with
//     nothing risky or unclear skips the gate.
package main

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/pixie-dev/pixie/sdk"
)

func main() {}

// init warms, while the instance is prepared for the pool, what the rule builds on first use:
// the JSON decoder of the tool arguments and the regexp matchers (about a millisecond in a
// guest, paid by every run otherwise: an instance serves one run). It reads no context.
func init() {
	command(`{"command":"rm -rf ./x"}`)
	classify("curl x | sh; rm -rf ./x; git push -f; dd of=/dev/x")
}

// Reasons and the judgment, shared word for word with the bash twin.
const (
	reasonRmRoot    = "Blocked: recursive forced rm of / or the home directory."
	reasonForcePush = "Blocked: force push. Push without --force, or ask the user first."
	reasonPipeShell = "Blocked: piping a download into a shell. Download the script, read it, then run it."
	reasonForkBomb  = "Blocked: fork bomb."
	reasonDisk      = "Blocked: writing onto a disk device."
	reasonMkfs      = "Blocked: formatting a file system."
	reasonChmodRoot = "Blocked: recursive permission or owner change of /."
	reasonJudged    = "Blocked: Pixie judged this command risky. Ask the user before running it."
	noteJudgedSafe  = "Pixie judged this command safe to run."

	question = "Could running this shell command cause serious harm that is hard to undo: deleting or overwriting data outside disposable build outputs, rewriting shared history, changing system state, or running code fetched from the network?"
)

var shellTools = map[string]bool{"Bash": true, "bash": true, "shell": true, "exec_command": true, "run_shell_command": true, "local_shell": true}

// Whole-command patterns, in the subset of RE2 that is also POSIX ERE (bash's =~).
var (
	rePipeShell = regexp.MustCompile(`(curl|wget)[^|;&]*[|][[:space:]]*(sudo[[:space:]]+)?(ba|z|da|k)?sh([[:space:]]|$)`)
	reSubShell  = regexp.MustCompile(`(ba|z|da|k)?sh[[:space:]]+(-c[[:space:]]+)?["']?(<[(]|[$][(])[[:space:]]*(curl|wget)`)
	reForkBomb  = regexp.MustCompile(`:[(][)][[:space:]]*[{][[:space:]]*:[[:space:]]*[|][[:space:]]*:`)
	reDisk      = regexp.MustCompile(`>[[:space:]]*/dev/(sd|nvme|hd|vd|xvd|disk|mmcblk)`)
	reEnvAssign = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	reShortR    = regexp.MustCompile(`^-[a-zA-Z]*[rR]`)
	reShortF    = regexp.MustCompile(`^-[a-zA-Z]*f`)
	reShellC    = regexp.MustCompile(`^-[a-zA-Z]*c$`)
)

var dangerTargets = map[string]bool{
	"/": true, "/*": true, "~": true, "~/": true, "~/*": true,
	"$HOME": true, "$HOME/": true, "$HOME/*": true, "${HOME}": true, "${HOME}/": true, "${HOME}/*": true,
}

func rule() int32 {
	if !shellTools[sdk.ToolName()] {
		return sdk.Skip()
	}
	cmd := command(sdk.Target())
	if strings.TrimSpace(cmd) == "" {
		return sdk.Skip()
	}
	verdict, reason := classify(cmd)
	switch verdict {
	case stop:
		return sdk.Conclude(sdk.Output{Verdict: sdk.Stop, Reason: reason})
	case unclear:
		res, err := sdk.JudgeBool(question, cmd, sdk.Threshold(0.5))
		if err != nil {
			return sdk.Fail(err)
		}
		if res.Pass {
			return sdk.Conclude(sdk.Output{Verdict: sdk.Stop, Reason: reasonJudged})
		}
		return sdk.Conclude(sdk.Output{Verdict: sdk.Pass, Note: noteJudgedSafe})
	}
	return sdk.Skip()
}

// command extracts the shell command from the tool arguments JSON.
func command(args string) string {
	var v struct {
		Command json.RawMessage `json:"command"`
		Cmd     json.RawMessage `json:"cmd"`
	}
	if json.Unmarshal([]byte(args), &v) != nil {
		return ""
	}
	raw := v.Command
	if len(raw) == 0 || string(raw) == "null" {
		raw = v.Cmd
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var argv []string
	if json.Unmarshal(raw, &argv) == nil {
		return strings.Join(argv, " ")
	}
	return ""
}

type verdict int

const (
	safe verdict = iota
	unclear
	stop
)

// classify applies steps 3 and 4.
func classify(cmd string) (verdict, string) {
	switch {
	case rePipeShell.MatchString(cmd), reSubShell.MatchString(cmd):
		return stop, reasonPipeShell
	case reForkBomb.MatchString(cmd):
		return stop, reasonForkBomb
	case reDisk.MatchString(cmd):
		return stop, reasonDisk
	}
	flat := strings.NewReplacer(`'`, "", `"`, "").Replace(cmd)
	segs := strings.FieldsFunc(flat, func(r rune) bool { return strings.ContainsRune(";&|()`\n", r) })
	worst, why := safe, ""
	for _, seg := range segs {
		v, r := simple(strings.FieldsFunc(seg, func(r rune) bool { return r == ' ' || r == '\t' }))
		if v == stop {
			return stop, r
		}
		if v > worst {
			worst, why = v, r
		}
	}
	return worst, why
}

// simple classifies one simple command.
func simple(words []string) (verdict, string) {
	sudo := false
	for len(words) > 0 {
		w := words[0]
		switch {
		case w == "sudo":
			sudo = true
		case w == "command" || w == "exec" || w == "nohup" || w == "time" || w == "env" || reEnvAssign.MatchString(w):
		case (w == "bash" || w == "sh" || w == "zsh" || w == "dash") && len(words) > 1 && reShellC.MatchString(words[1]):
			words = words[1:]
		default:
			goto done
		}
		words = words[1:]
	}
done:
	if len(words) == 0 {
		return safe, ""
	}
	name := words[0]
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	args := words[1:]
	has := func(ws ...string) bool {
		for _, a := range args {
			for _, w := range ws {
				if a == w {
					return true
				}
			}
		}
		return false
	}
	matches := func(re *regexp.Regexp) bool {
		for _, a := range args {
			if !strings.HasPrefix(a, "--") && re.MatchString(a) {
				return true
			}
		}
		return false
	}
	targetsRoot := func(home bool) bool {
		for _, a := range args {
			if a == "/" || a == "/*" || (home && dangerTargets[a]) {
				return true
			}
		}
		return false
	}
	recursive := matches(reShortR) || has("--recursive")
	v := safe
	switch name {
	case "rm":
		force := matches(reShortF) || has("--force", "--no-preserve-root")
		if recursive && force && targetsRoot(true) || has("--no-preserve-root") {
			return stop, reasonRmRoot
		}
		if recursive {
			v = unclear
		}
	case "git":
		switch {
		case has("push"):
			for _, a := range args {
				if a == "-f" || a == "--force" || strings.HasPrefix(a, "+") || (!strings.HasPrefix(a, "--") && reShortF.MatchString(a)) {
					return stop, reasonForcePush
				}
			}
			if has("--force-with-lease", "--force-if-includes") {
				v = unclear
			}
		case has("reset") && has("--hard"),
			has("clean") && (matches(reShortF) || has("--force")),
			(has("checkout") || has("restore")) && has("."),
			has("branch") && has("-D"):
			v = unclear
		}
	case "dd":
		for _, a := range args {
			if strings.HasPrefix(a, "of=/dev/") {
				return stop, reasonDisk
			}
		}
		v = unclear
	case "chmod", "chown", "chgrp":
		if recursive && targetsRoot(false) {
			return stop, reasonChmodRoot
		}
		if recursive {
			v = unclear
		}
	case "find":
		if has("-delete") {
			v = unclear
		}
	case "shred", "truncate", "kill", "pkill", "killall", "shutdown", "reboot", "halt", "poweroff":
		v = unclear
	case "docker", "podman":
		if has("rm", "rmi", "prune") {
			v = unclear
		}
	case "kubectl":
		if has("delete") {
			v = unclear
		}
	case "terraform":
		if has("destroy") {
			v = unclear
		}
	default:
		if strings.HasPrefix(name, "mkfs") {
			return stop, reasonMkfs
		}
	}
	if sudo && v == safe {
		v = unclear
	}
	return v, "unclear"
}

// Command block-risky-commands is a tool-before guest that stops clearly destructive shell
// commands without asking the model, and asks the decision engine (pixie_judge) only about
// unclear ones. Its bash twin is block-risky-commands.sh in this folder; both follow the same
// algorithm, step by step (the twin's regexps are plain code here: see patterns.go):
//
//  1. Only shell tools are checked (Bash, bash, shell, exec_command, run_shell_command,
//     local_shell); any other tool skips the gate (exit 10).
//  2. The command is the tool arguments' "command" (a string, or an argv array joined by
//     spaces) or, when "command" is missing, null or false, "cmd" (as jq's //). None, or
//     arguments that are not JSON, skip the gate.
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
	"strings"

	"github.com/pixie-dev/pixie/sdk"
)

func main() {}

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

// shellTool reports whether tool is a shell tool (step 1). Switches rather than maps, here and
// in targetsHome: see patterns.go.
func shellTool(tool string) bool {
	switch tool {
	case "Bash", "bash", "shell", "exec_command", "run_shell_command", "local_shell":
		return true
	}
	return false
}

// targetsHome reports whether a is the home directory or everything in it.
func targetsHome(a string) bool {
	switch a {
	case "~", "~/", "~/*", "$HOME", "$HOME/", "$HOME/*", "${HOME}", "${HOME}/", "${HOME}/*":
		return true
	}
	return false
}

func rule() int32 {
	if !shellTool(sdk.ToolName()) {
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

type verdict int

const (
	safe verdict = iota
	unclear
	stop
)

// classify applies steps 3 and 4.
func classify(cmd string) (verdict, string) {
	switch {
	case pipeShell(cmd), subShell(cmd):
		return stop, reasonPipeShell
	case forkBomb(cmd):
		return stop, reasonForkBomb
	case diskRedirect(cmd):
		return stop, reasonDisk
	}
	flat := withoutQuotes(cmd)
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

// withoutQuotes removes every ' and ".
func withoutQuotes(s string) string {
	if !strings.ContainsAny(s, `'"`) {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '\'' && s[i] != '"' {
			b = append(b, s[i])
		}
	}
	return string(b)
}

// simple classifies one simple command.
func simple(words []string) (verdict, string) {
	sudo := false
	for len(words) > 0 {
		w := words[0]
		switch {
		case w == "sudo":
			sudo = true
		case w == "command" || w == "exec" || w == "nohup" || w == "time" || w == "env" || envAssign(w):
		case (w == "bash" || w == "sh" || w == "zsh" || w == "dash") && len(words) > 1 && shellC(words[1]):
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
	matches := func(flag func(string) bool) bool {
		for _, a := range args {
			if !strings.HasPrefix(a, "--") && flag(a) {
				return true
			}
		}
		return false
	}
	targetsRoot := func(home bool) bool {
		for _, a := range args {
			if a == "/" || a == "/*" || (home && targetsHome(a)) {
				return true
			}
		}
		return false
	}
	recursive := matches(shortR) || has("--recursive")
	v := safe
	switch name {
	case "rm":
		force := matches(shortF) || has("--force", "--no-preserve-root")
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
				if a == "-f" || a == "--force" || strings.HasPrefix(a, "+") || (!strings.HasPrefix(a, "--") && shortF(a)) {
					return stop, reasonForcePush
				}
			}
			if has("--force-with-lease", "--force-if-includes") {
				v = unclear
			}
		case has("reset") && has("--hard"),
			has("clean") && (matches(shortF) || has("--force")),
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

# The Rego twin of the block-risky-commands guest (guests/block-risky-commands), for make bench's
# OPA rows: the guest's steps 1 to 4 (rule.go), with the bash twin's regular expressions
# (block-risky-commands.sh), deciding what the guest decides without the model. Input:
# {"tool": "<tool name>", "args": <the tool arguments>}; data.pixie.block_risky.decision is
#   {"verdict": "stop", "reason": "<the guest's reason, word for word>"}  the guest concludes a stop,
#   {"verdict": "unclear"}                                                  the guest would ask the model,
#   {"verdict": "skip"}                                                     the guest skips the gate.
# internal/loadbench's twin check compares it with the guest and the bash twin on a table of
# inputs (TestRegoTwin, and make bench before it measures): change it with the guest.
package pixie.block_risky

reason_rm_root := "Blocked: recursive forced rm of / or the home directory."

reason_force_push := "Blocked: force push. Push without --force, or ask the user first."

reason_pipe_shell := "Blocked: piping a download into a shell. Download the script, read it, then run it."

reason_fork_bomb := "Blocked: fork bomb."

reason_disk := "Blocked: writing onto a disk device."

reason_mkfs := "Blocked: formatting a file system."

reason_chmod_root := "Blocked: recursive permission or owner change of /."

re_pipe_shell := `(curl|wget)[^|;&]*[|][[:space:]]*(sudo[[:space:]]+)?([^[:space:];&|()<>]*/)?(ba|z|da|k)?sh([[:space:];&|()<>]|$)`

re_sub_shell := `(ba|z|da|k)?sh[[:space:]]+(-c[[:space:]]+)?["']?(<[(]|[$][(])[[:space:]]*(curl|wget)`

re_fork_bomb := `:[(][)][[:space:]]*[{][[:space:]]*:[[:space:]]*[|][[:space:]]*:`

re_disk := `>[[:space:]]*/dev/(sd|nvme|hd|vd|xvd|disk|mmcblk)`

re_env_assign := `^[A-Za-z_][A-Za-z0-9_]*=`

re_short_r := `^-[a-zA-Z]*[rR]`

re_short_f := `^-[a-zA-Z]*f`

re_shell_c := `^-[a-zA-Z]*c$`

default decision := {"verdict": "skip"}

decision := {"verdict": "stop", "reason": stop_reason} if checked

decision := {"verdict": "unclear"} if {
	checked
	not stop_reason
	some words in segments
	unclear(words)
}

# Step 1: only shell tools; step 2: a command that is not blank.
checked if {
	input.tool in {"Bash", "bash", "shell", "exec_command", "run_shell_command", "local_shell"}
	trim_space(command) != ""
}

# Step 2: "command", or "cmd" when "command" is missing, null or false (jq's //); a string, or
# an array of strings joined with spaces.
command_value := v if {
	v := input.args.command
	v != null
	v != false
} else := input.args.cmd

command := c if {
	c := command_value
	is_string(c)
}

command := concat(" ", c) if {
	c := command_value
	is_array(c)
	every x in c {
		is_string(x)
	}
}

# Step 3: whole-command patterns, then step 4: the first simple command that stops.
stop_reason := reason_pipe_shell if {
	regex.match(re_pipe_shell, command)
} else := reason_pipe_shell if {
	regex.match(re_sub_shell, command)
} else := reason_fork_bomb if {
	regex.match(re_fork_bomb, command)
} else := reason_disk if {
	regex.match(re_disk, command)
} else := segment_stops[min(object.keys(segment_stops))] if {
	count(segment_stops) > 0
}

segment_stops := {i: r |
	some i, words in segments
	r := simple_stop(words)
}

# Step 4: the command without quotes, cut at ; & | ( ) ` and newlines, each part split into
# words at spaces and tabs.
segments := [words |
	some seg in regex.split("[;&|()`\n]", replace(replace(command, "'", ""), "\"", ""))
	words := [w | some w in regex.split("[ \t]", seg); w != ""]
]

# parts is a simple command without its wrappers (sudo, command, exec, nohup, time, env,
# VAR=value, shell -c): its name (after the last /), its arguments and whether sudo led it.
# Undefined when nothing but wrappers is left.
parts(words) := {"name": name, "args": array.slice(words, s + 1, count(words)), "sudo": sudo} if {
	s := start(words)
	s < count(words)
	path := split(words[s], "/")
	name := path[count(path) - 1]
	sudo := "sudo" in array.slice(words, 0, s)
}

# start is the index of the first word that is not a wrapper. A "-c" word is a wrapper only
# right after a shell word, and a shell word only right before one; no other word can be both.
start(words) := min({i | some i, _ in words; not wrapper(words, i)} | {count(words)})

wrapper(words, i) if single_wrapper(words[i])

wrapper(words, i) if {
	words[i] in {"bash", "sh", "zsh", "dash"}
	regex.match(re_shell_c, words[i + 1])
}

wrapper(words, i) if {
	i > 0
	regex.match(re_shell_c, words[i])
	words[i - 1] in {"bash", "sh", "zsh", "dash"}
}

single_wrapper(w) if w in {"sudo", "command", "exec", "nohup", "time", "env"}

single_wrapper(w) if regex.match(re_env_assign, w)

has(args, ws) if {
	some a in args
	a in ws
}

# matches: an argument that is not a --long option matches re.
matches(args, re) if {
	some a in args
	not startswith(a, "--")
	regex.match(re, a)
}

recursive(args) if matches(args, re_short_r)

recursive(args) if has(args, {"--recursive"})

forced(args) if matches(args, re_short_f)

forced(args) if has(args, {"--force", "--no-preserve-root"})

targets_root(args, _) if has(args, {"/", "/*"})

targets_root(args, true) if has(args, {"~", "~/", "~/*", "$HOME", "$HOME/", "$HOME/*", "${HOME}", "${HOME}/", "${HOME}/*"})

force_push_arg(a) if a in {"-f", "--force"}

force_push_arg(a) if startswith(a, "+")

force_push_arg(a) if {
	not startswith(a, "--")
	regex.match(re_short_f, a)
}

simple_stop(words) := reason_rm_root if {
	p := parts(words)
	p.name == "rm"
	recursive(p.args)
	forced(p.args)
	targets_root(p.args, true)
}

simple_stop(words) := reason_rm_root if {
	p := parts(words)
	p.name == "rm"
	has(p.args, {"--no-preserve-root"})
}

simple_stop(words) := reason_force_push if {
	p := parts(words)
	p.name == "git"
	has(p.args, {"push"})
	some a in p.args
	force_push_arg(a)
}

simple_stop(words) := reason_disk if {
	p := parts(words)
	p.name == "dd"
	some a in p.args
	startswith(a, "of=/dev/")
}

simple_stop(words) := reason_chmod_root if {
	p := parts(words)
	p.name in {"chmod", "chown", "chgrp"}
	recursive(p.args)
	targets_root(p.args, false)
}

simple_stop(words) := reason_mkfs if {
	p := parts(words)
	startswith(p.name, "mkfs")
}

# unclear: what the guest asks the model about (only read when no simple command stops).
unclear(words) if {
	p := parts(words)
	p.sudo
}

unclear(words) if {
	p := parts(words)
	unclear_command(p.name, p.args)
}

unclear_command("rm", args) if recursive(args)

unclear_command("git", args) if {
	has(args, {"push"})
	has(args, {"--force-with-lease", "--force-if-includes"})
}

unclear_command("git", args) if {
	not has(args, {"push"})
	git_unclear(args)
}

unclear_command("dd", _) := true

unclear_command(name, args) if {
	name in {"chmod", "chown", "chgrp"}
	recursive(args)
}

unclear_command("find", args) if has(args, {"-delete"})

unclear_command(name, _) if name in {"shred", "truncate", "kill", "pkill", "killall", "shutdown", "reboot", "halt", "poweroff"}

unclear_command(name, args) if {
	name in {"docker", "podman"}
	has(args, {"rm", "rmi", "prune"})
}

unclear_command("kubectl", args) if has(args, {"delete"})

unclear_command("terraform", args) if has(args, {"destroy"})

git_unclear(args) if {
	has(args, {"reset"})
	has(args, {"--hard"})
}

git_unclear(args) if {
	has(args, {"clean"})
	forced_short_or_long(args)
}

git_unclear(args) if {
	has(args, {"checkout", "restore"})
	has(args, {"."})
}

git_unclear(args) if {
	has(args, {"branch"})
	has(args, {"-D"})
}

forced_short_or_long(args) if matches(args, re_short_f)

forced_short_or_long(args) if has(args, {"--force"})

#!/bin/bash
# block-risky-commands.sh: the bash twin of the block-risky-commands guest (tool-before). It
# follows the algorithm documented in rule.go beside it, step by step, with the same patterns,
# reasons and judgment, so both make the same decisions. Requires jq.
export LC_ALL=C

reason_rm_root="Blocked: recursive forced rm of / or the home directory."
reason_force_push="Blocked: force push. Push without --force, or ask the user first."
reason_pipe_shell="Blocked: piping a download into a shell. Download the script, read it, then run it."
reason_fork_bomb="Blocked: fork bomb."
reason_disk="Blocked: writing onto a disk device."
reason_mkfs="Blocked: formatting a file system."
reason_chmod_root="Blocked: recursive permission or owner change of /."
reason_judged="Blocked: Pixie judged this command risky. Ask the user before running it."
note_judged_safe="Pixie judged this command safe to run."
question="Could running this shell command cause serious harm that is hard to undo: deleting or overwriting data outside disposable build outputs, rewriting shared history, changing system state, or running code fetched from the network?"

re_pipe_shell='(curl|wget)[^|;&]*[|][[:space:]]*(sudo[[:space:]]+)?([^[:space:];&|()<>]*/)?(ba|z|da|k)?sh([[:space:];&|()<>]|$)'
re_sub_shell='(ba|z|da|k)?sh[[:space:]]+(-c[[:space:]]+)?["'"'"']?(<[(]|[$][(])[[:space:]]*(curl|wget)'
re_fork_bomb=':[(][)][[:space:]]*[{][[:space:]]*:[[:space:]]*[|][[:space:]]*:'
re_disk='>[[:space:]]*/dev/(sd|nvme|hd|vd|xvd|disk|mmcblk)'
re_env_assign='^[A-Za-z_][A-Za-z0-9_]*='
re_short_r='^-[a-zA-Z]*[rR]'
re_short_f='^-[a-zA-Z]*f'
re_shell_c='^-[a-zA-Z]*c$'

conclude_stop() { printf '{"verdict":"stop","reason":"%s"}' "$1"; exit 11; }

case "$PIXIE_TOOL_NAME" in Bash|bash|shell|exec_command|run_shell_command|local_shell) ;; *) exit 10 ;; esac
args=$(cat)
cmd=$(printf '%s' "$args" | jq -r '
  (if (.command // null) != null then .command else .cmd end) as $c
  | if ($c|type) == "string" then $c
    elif ($c|type) == "array" and ($c|all(type == "string")) then $c|join(" ")
    else "" end' 2>/dev/null) || exit 10
[[ -z "${cmd//[[:space:]]/}" ]] && exit 10

# Step 3: whole-command patterns.
if [[ $cmd =~ $re_pipe_shell || $cmd =~ $re_sub_shell ]]; then conclude_stop "$reason_pipe_shell"; fi
if [[ $cmd =~ $re_fork_bomb ]]; then conclude_stop "$reason_fork_bomb"; fi
if [[ $cmd =~ $re_disk ]]; then conclude_stop "$reason_disk"; fi

# Step 4: simple commands. simple WORD... sets v (0 safe, 1 unclear, 2 stop) and why.
has() { local a w; for a in "${args_[@]}"; do for w in "$@"; do [[ $a == "$w" ]] && return 0; done; done; return 1; }
matches() { local a; for a in "${args_[@]}"; do [[ $a != --* && $a =~ $1 ]] && return 0; done; return 1; }
targets_root() {
  local a
  for a in "${args_[@]}"; do
    case "$a" in
      / | '/*') return 0 ;;
      '~' | '~/' | '~/*' | '$HOME' | '$HOME/' | '$HOME/*' | '${HOME}' | '${HOME}/' | '${HOME}/*') [[ $1 == home ]] && return 0 ;;
    esac
  done
  return 1
}
simple() {
  local -a w=("$@")
  local sudo=0 x name recursive=0 force a
  v=0 why=""
  while ((${#w[@]})); do
    x=${w[0]}
    if [[ $x == sudo ]]; then sudo=1
    elif [[ $x == command || $x == exec || $x == nohup || $x == time || $x == env || $x =~ $re_env_assign ]]; then :
    elif [[ ($x == bash || $x == sh || $x == zsh || $x == dash) && ${#w[@]} -gt 1 && ${w[1]} =~ $re_shell_c ]]; then w=("${w[@]:1}")
    else break
    fi
    w=("${w[@]:1}")
  done
  ((${#w[@]})) || return 0
  name=${w[0]##*/}
  args_=("${w[@]:1}")
  { matches "$re_short_r" || has --recursive; } && recursive=1
  case "$name" in
    rm)
      force=0
      { matches "$re_short_f" || has --force --no-preserve-root; } && force=1
      if { ((recursive && force)) && targets_root home; } || has --no-preserve-root; then v=2 why=$reason_rm_root; return 0; fi
      ((recursive)) && v=1 ;;
    git)
      if has push; then
        for a in "${args_[@]}"; do
          if [[ $a == -f || $a == --force || $a == +* ]] || [[ $a != --* && $a =~ $re_short_f ]]; then v=2 why=$reason_force_push; return 0; fi
        done
        has --force-with-lease --force-if-includes && v=1
      elif { has reset && has --hard; } || { has clean && { matches "$re_short_f" || has --force; }; } \
        || { { has checkout || has restore; } && has .; } || { has branch && has -D; }; then
        v=1
      fi ;;
    dd)
      for a in "${args_[@]}"; do [[ $a == of=/dev/* ]] && { v=2 why=$reason_disk; return 0; }; done
      v=1 ;;
    chmod | chown | chgrp)
      if ((recursive)) && targets_root; then v=2 why=$reason_chmod_root; return 0; fi
      ((recursive)) && v=1 ;;
    find) has -delete && v=1 ;;
    shred | truncate | kill | pkill | killall | shutdown | reboot | halt | poweroff) v=1 ;;
    docker | podman) has rm rmi prune && v=1 ;;
    kubectl) has delete && v=1 ;;
    terraform) has destroy && v=1 ;;
    *) [[ $name == mkfs* ]] && { v=2 why=$reason_mkfs; return 0; } ;;
  esac
  ((sudo && v == 0)) && v=1
  return 0
}

flat=${cmd//\'/}
flat=${flat//\"/}
worst=0
while IFS= read -r seg || [[ -n $seg ]]; do
  IFS=$' \t' read -ra words <<<"$seg"
  simple "${words[@]}"
  ((v == 2)) && conclude_stop "$why"
  ((v > worst)) && worst=$v
done < <(printf '%s' "$flat" | tr ';&|()`' '\n\n\n\n\n\n')

((worst == 0)) && exit 10

# Step 5: an unclear command is judged.
printf '%s' "$cmd" | pixie judge --question "$question" --threshold 0.5 --input >/dev/null
status=$?
[ "$status" -eq 0 ] && conclude_stop "$reason_judged"
[ "$status" -eq 1 ] || exit 1 # 2: a judgment error; anything else: no helper
printf '{"verdict":"pass","note":"%s"}' "$note_judged_safe"
exit 11

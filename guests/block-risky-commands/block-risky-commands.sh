#!/bin/bash
# block-risky-commands.sh: the bash twin of the block-risky-commands guest (tool-before). It
# follows the algorithm documented in rule.go beside it, step by step, with the same patterns,
# reasons and judgment, so both make the same decisions. It starts no other program (unless it
# asks for a judgment): it reads the arguments JSON itself, as the guest does (args.go), since
# starting jq would cost more than the whole rest of the run (jq 1.6 compiles its builtins at
# every start: about 18 ms of CPU).
export LC_ALL=C
set -f # words are split below, never globbed

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

# Step 2: the command, from the tool arguments JSON (args.go): the top-level object's
# "command", or its "cmd" when "command" is missing, null or false; a string, or an array of
# strings joined by spaces; the last of repeated keys wins. Anything else, and arguments that are
# not JSON, is no command. json_string RAW sets s to the value of the JSON string token RAW
# (quotes included), failing on an invalid escape; \u0000 and unpaired surrogates become U+FFFD
# (bash strings hold no NUL byte, and no pattern below matches either).
json_string() {
  local raw=${1:1:${#1}-2} out="" c cp lo u
  while [[ $raw == *\\* ]]; do
    out+=${raw%%\\*}
    raw=${raw#*\\}
    c=${raw:0:1} raw=${raw:1}
    case $c in
      '"' | '\' | /) out+=$c ;;
      b) out+=$'\b' ;;
      f) out+=$'\f' ;;
      n) out+=$'\n' ;;
      r) out+=$'\r' ;;
      t) out+=$'\t' ;;
      u)
        [[ $raw =~ ^[0-9A-Fa-f]{4} ]] || return 1
        cp=$((16#${raw:0:4})) raw=${raw:4}
        if ((cp >= 0xD800 && cp <= 0xDBFF)) && [[ $raw =~ ^\\u[Dd][C-Fc-f][0-9A-Fa-f]{2} ]]; then
          lo=$((16#${raw:2:4})) raw=${raw:6}
          cp=$((0x10000 + ((cp - 0xD800) << 10) + lo - 0xDC00))
        elif ((cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF))); then
          cp=0xFFFD
        fi
        if ((cp < 0x80)); then
          printf -v u '\\x%02x' "$cp"
        elif ((cp < 0x800)); then
          printf -v u '\\x%02x\\x%02x' $((0xC0 | cp >> 6)) $((0x80 | (cp & 0x3F)))
        elif ((cp < 0x10000)); then
          printf -v u '\\x%02x\\x%02x\\x%02x' $((0xE0 | cp >> 12)) $((0x80 | (cp >> 6 & 0x3F))) $((0x80 | (cp & 0x3F)))
        else
          printf -v u '\\x%02x\\x%02x\\x%02x\\x%02x' $((0xF0 | cp >> 18)) $((0x80 | (cp >> 12 & 0x3F))) $((0x80 | (cp >> 6 & 0x3F))) $((0x80 | (cp & 0x3F)))
        fi
        printf -v u %b "$u"
        out+=$u ;;
      *) return 1 ;;
    esac
  done
  s=$out$raw
}
# json_command JSON sets cmd as above, failing when JSON is not a JSON object. It reads one token
# at a time: a bracket, a brace, a colon or a comma by its first byte, a string with
# json_plain (no escape) or json_string, a number with json_number, each matched on the next 256
# bytes (bash compiles a regexp at every match, at a cost that grows with the regexp, and
# matches it at a cost that grows with the text), or on the rest when a string is longer. It
# keeps the open objects and arrays in stack (o for {, a for [); want is what may come next:
# value, item0 (a value or ] after [), key, key0 (a key or } after {), colon, next (, or the end
# of the innermost container) or end.
json_ws=$' \t\n\r'
json_plain='^"[^"\\]*"'
json_string='^"([^"\\]|\\.)*"'
json_number='^-?(0|[1-9][0-9]*)([.][0-9]+)?([eE][+-]?[0-9]+)?'
json_command() {
  local off=0 w lead t s want=value stack="" key="" in="" kind="" val k_command="" v_command="" k_cmd="" v_cmd=""
  local -a parts=()
  while :; do
    w=${1:off:256}
    lead=${w%%[!$json_ws]*}
    ((off += ${#lead}))
    w=${w:${#lead}}
    case $w in
      '') break ;;
      [][{}:,]*) t=${w:0:1} ;;
      '"'*)
        if [[ $w =~ $json_plain || $w =~ $json_string ]]; then
          :
        elif ! [[ ${1:off} =~ $json_string ]]; then
          break
        fi
        t=${BASH_REMATCH[0]} ;;
      true* | null*) t=${w:0:4} ;;
      false*) t=false ;;
      [-0-9]*)
        [[ $w =~ $json_number ]] || break
        t=${BASH_REMATCH[0]}
        # A number that ends where the window does may go on past it.
        if ((${#t} == ${#w})) && ! [[ ${1:off} =~ $json_number ]]; then break; fi
        t=${BASH_REMATCH[0]} ;;
      *) break ;;
    esac
    ((off += ${#t}))
    case $t in
      '{' | '[')
        [[ ($want == value || $want == item0) && ($t == '{' || -n $stack) ]] || return 1
        ((${#stack} < 10000)) || return 1 # encoding/json's nesting limit
        if [[ $stack == o && -n $key ]]; then
          in=$key kind=other parts=() # command's or cmd's value: an array of strings is its command
          [[ $t == '[' ]] && kind=array
        elif [[ $stack == oa && -n $in ]]; then
          kind=other # an element that is no string
        fi
        if [[ $t == '{' ]]; then stack+=o want=key0; else stack+=a want=item0; fi
        continue ;;
      '}' | ']')
        if [[ $t == '}' ]]; then
          [[ $stack == *o && ($want == next || $want == key0) ]] || return 1
        else
          [[ $stack == *a && ($want == next || $want == item0) ]] || return 1
        fi
        stack=${stack%?} want=next
        [[ -z $stack ]] && want=end
        if [[ $stack == o && -n $in ]]; then
          val=""
          if [[ $kind == array ]]; then printf -v val '%s ' "${parts[@]}"; val=${val% }; fi
          printf -v "k_$in" %s "$kind"
          printf -v "v_$in" %s "$val"
          in="" key=""
        fi
        continue ;;
      ,)
        [[ $want == next ]] || return 1
        if [[ $stack == *o ]]; then want=key; else want=value; fi
        continue ;;
      :)
        [[ $want == colon ]] || return 1
        want=value
        continue ;;
    esac
    # A string, a number, true, false or null.
    s=""
    if [[ $t == '"'* ]]; then
      [[ $t == *[$'\x01'-$'\x1f']* ]] && return 1 # a raw control character
      s=${t:1:${#t}-2}
      if [[ $s == *\\* ]]; then json_string "$t" || return 1; fi
      if [[ $want == key || $want == key0 ]]; then
        key=""
        [[ $stack == o && ($s == command || $s == cmd) ]] && key=$s
        want=colon
        continue
      fi
    fi
    [[ ($want == value || $want == item0) && -n $stack ]] || return 1
    if [[ $stack == o && -n $key ]]; then
      kind=other
      [[ $t == '"'* ]] && kind=string
      [[ $t == null || $t == false ]] && kind=none
      printf -v "k_$key" %s "$kind"
      printf -v "v_$key" %s "$s"
      key=""
    elif [[ $stack == oa && -n $in && $kind == array ]]; then
      if [[ $t == '"'* ]]; then parts+=("$s"); else kind=other; fi
    fi
    want=next
  done
  [[ $want == end && ${1:off} =~ ^[$json_ws]*$ ]] || return 1
  if [[ -n $k_command && $k_command != none ]]; then
    kind=$k_command val=$v_command
  else
    kind=$k_cmd val=$v_cmd
  fi
  cmd=""
  if [[ $kind == string || $kind == array ]]; then cmd=$val; fi
}

# tool_command reads the tool arguments JSON on stdin and sets cmd (steps 1 and 2); it fails
# when the gate is to be skipped.
tool_command() {
  case "$PIXIE_TOOL_NAME" in Bash | bash | shell | exec_command | run_shell_command | local_shell) ;; *) return 1 ;; esac
  local args
  IFS= read -r -d '' args && return 1 # a NUL byte: not JSON
  json_command "$args" || return 1
  [[ $cmd == *[![:space:]]* ]]
}

# Step 4's classification: simple WORD... sets v (0 safe, 1 unclear, 2 stop) and why.
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

main() {
  tool_command || exit 10

  # Step 3: whole-command patterns; each is tried only on a command that holds the words it
  # cannot match without (a glob costs far less than compiling the regexp).
  if [[ $cmd == *curl* || $cmd == *wget* ]] && [[ $cmd =~ $re_pipe_shell || $cmd =~ $re_sub_shell ]]; then conclude_stop "$reason_pipe_shell"; fi
  if [[ $cmd == *':()'* && $cmd =~ $re_fork_bomb ]]; then conclude_stop "$reason_fork_bomb"; fi
  if [[ $cmd == *'>'*/dev/* && $cmd =~ $re_disk ]]; then conclude_stop "$reason_disk"; fi

  # Step 4: the simple commands (cut at ; & | ( ) ` and line breaks, quotes removed), each split
  # into words at spaces and tabs by the shell itself (set -f: never globbed).
  flat=${cmd//\'/}
  flat=${flat//\"/}
  worst=0
  IFS=$';&|()`\n'
  segs=($flat)
  for seg in "${segs[@]}"; do
    IFS=$' \t'
    words=($seg)
    simple "${words[@]}"
    ((v == 2)) && conclude_stop "$why"
    ((v > worst)) && worst=$v
  done
  unset IFS

  ((worst == 0)) && exit 10

  # Step 5: an unclear command is judged.
  printf '%s' "$cmd" | pixie judge --question "$question" --threshold 0.5 --input >/dev/null
  status=$?
  [ "$status" -eq 0 ] && conclude_stop "$reason_judged"
  [ "$status" -eq 1 ] || exit 1 # 2: a judgment error; anything else: no helper
  printf '{"verdict":"pass","note":"%s"}' "$note_judged_safe"
  exit 11
}

# Run as a rule; sourced (by the guest's tests), only define the functions.
[[ ${BASH_SOURCE[0]} != "$0" ]] || main

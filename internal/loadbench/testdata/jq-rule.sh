#!/bin/bash
# A legacy rule as people write them (the bash-jq row): one jq to read the tool arguments, then
# the conclusion. jq 1.6 compiles its builtins at every start, so this row shows what a rule's
# own programs add to the executor's floor.
command=$(jq -r '.command // empty' <<<"$PIXIE_TOOL_ARGS")
case "$command" in
  *"rm -rf /"*) printf '{"verdict":"stop","reason":"Blocked: %s"}' "${command//\"/}"; exit 11 ;;
esac
exit 10

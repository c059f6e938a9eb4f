#!/bin/bash
answer=$(cat)
evidence=$(cat .last-test-run 2>/dev/null || echo "no recorded test run")
result=$(jq -n --arg a "$answer" --arg e "$evidence" '{answer:$a, evidence:$e}' | pixie judge --type select --json --input \
  --question "Is the claim in \`answer\` that tests passed supported by \`evidence\`?" \
  --option supported="evidence shows the claimed tests ran and passed, or answer makes no test claim" \
  --option contradicted="evidence shows a failure or a different run" \
  --option missing="answer claims tests passed but evidence has no run") || exit 1
case "$(jq -r .label <<<"$result")" in
  supported) exit 10 ;;
  contradicted) printf '{"verdict":"stop","reason":"The test results contradict the claim. Check the actual results and report again."}'; exit 11 ;;
  missing) [ "$(jq '.answer.confidence < 0.6' <<<"$result")" = true ] && { printf '%s' "$result"; exit 0; }
           printf '{"note":"No recorded test run."}'; exit 11 ;;
esac

#!/bin/bash
# The bench's floor of a bash rule (the bash-floor row): it starts no program and concludes at
# once, so a decision costs what the executor and the sandbox cost.
printf '{"verdict":"stop","reason":"floor"}'
exit 11

package gate

import (
	"context"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/runtime/bash"
)

// TestFailedRuleKeepsItsStderr: a rule that exits with an error code has the end of its stderr
// (where its message is) in the record's error detail, at most maxStderrDetail bytes.
func TestFailedRuleKeepsItsStderr(t *testing.T) {
	e := newEnv(t, envOptions{exec: bashExecutor(t, bash.Config{})})
	ctx := context.Background()
	cwd := t.TempDir()
	e.writeScript(t, "says.sh", "#!/bin/bash\necho 'pixie: rate_limited: the run has used its 20 helper calls' >&2\nexit 1\n")
	e.writeScript(t, "long.sh", "#!/bin/bash\nhead -c 5000 /dev/zero | tr '\\0' 'x' >&2\necho ' the end' >&2\nexit 2\n")
	e.writeScript(t, "quiet.sh", "#!/bin/bash\nexit 3\n")
	for _, tt := range []struct{ script, detail string }{
		{"says.sh", "stderr: pixie: rate_limited: the run has used its 20 helper calls"},
		{"long.sh", "stderr: …" + strings.Repeat("x", maxStderrDetail-len(" the end")) + " the end"},
		{"quiet.sh", ""},
	} {
		t.Run(tt.script, func(t *testing.T) {
			e.saveGates(t, scriptGate("g", "tool-before", "unused", tt.script))
			res, err := e.svc.Evaluate(ctx, inSession(evalReq("tool-before", "{}"), cwd))
			if err != nil || !strings.Contains(res.Error, "exited with status") {
				t.Fatalf("%+v %v", res, err)
			}
			rec, err := e.svc.Record(ctx, res.RunID)
			if err != nil || rec.ErrorDetail != tt.detail {
				t.Fatalf("detail %q (%v), want %q", rec.ErrorDetail, err, tt.detail)
			}
		})
	}
}

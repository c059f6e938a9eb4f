package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/testutil"
)

// TestMCPInspectorStrict lints pixie mcp's tools with the MCP inspector 2.12.0's --strict
// check (tool-schema portability): no error and no warning, and every tool has an output
// schema and annotations.
func TestMCPInspectorStrict(t *testing.T) {
	inspector := testutil.Tool(t, testutil.ToolInspector)
	t.Parallel()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// tools/list needs no server; the token file only has to exist.
	if err := writeFile(filepath.Join(home, "token"), "t"); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, inspector, "--cli", "--strict", "--method", "tools/list",
		"-e", "PIXIE_HOME="+home, "-e", "PIXIE_SERVER_URL=http://127.0.0.1:1", testutil.PixieBinary(t), "mcp")
	cmd.Env = append(baseEnv(), "HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("inspector --strict: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if s := stderr.String(); strings.Contains(s, "Warning") || strings.Contains(s, "Error") || strings.Contains(s, "warning") {
		t.Fatalf("inspector --strict reports:\n%s", s)
	}
	var list struct {
		Tools []struct {
			Name         string          `json:"name"`
			OutputSchema json.RawMessage `json:"outputSchema"`
			Annotations  *struct {
				ReadOnlyHint bool `json:"readOnlyHint"`
			} `json:"annotations"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &list); err != nil || len(list.Tools) != 6 {
		t.Fatalf("tools/list: %v\n%s", err, stdout.String())
	}
	for _, tl := range list.Tools {
		if len(tl.OutputSchema) == 0 || tl.Annotations == nil {
			t.Errorf("%s: no outputSchema or annotations", tl.Name)
		}
	}
}

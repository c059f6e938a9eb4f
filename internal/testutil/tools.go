package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The agent CLIs the end-to-end tests drive. They are test tools, installed by .ci/tools.sh
// (pinned versions, outside the repository); Pixie itself never depends on them.
const (
	ToolClaude    = "claude"        // @anthropic-ai/claude-code
	ToolCodex     = "codex"         // @openai/codex
	ToolInspector = "mcp-inspector" // @modelcontextprotocol/inspector
)

// toolEnv names the variable that points at each tool's command, overriding the tools folder.
var toolEnv = map[string]string{
	ToolClaude:    "PIXIE_CLAUDE_BIN",
	ToolCodex:     "PIXIE_CODEX_BIN",
	ToolInspector: "PIXIE_MCP_INSPECTOR_BIN",
}

// ToolsDir is the folder .ci/tools.sh installs into: $PIXIE_TOOLS_DIR, else
// $HOME/.cache/pixie-tools.
func ToolsDir() string {
	if d := os.Getenv("PIXIE_TOOLS_DIR"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "pixie-tools")
	}
	return filepath.Join(home, ".cache", "pixie-tools")
}

// ToolPath returns the command of a tool (ToolClaude, ToolCodex, ToolInspector): the file its
// variable names (PIXIE_CLAUDE_BIN, …), else <ToolsDir>/bin/<name>. ok is false when there is
// no executable there.
func ToolPath(name string) (string, bool) {
	p := os.Getenv(toolEnv[name])
	if p == "" {
		p = filepath.Join(ToolsDir(), "bin", name)
	}
	if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return p, false
	}
	if _, err := exec.LookPath(p); err != nil {
		return p, false
	}
	return p, true
}

// Tool returns the command of a tool, or skips the test with a message saying how to install
// it. With PIXIE_REQUIRE_TOOLS=1 (set by .ci/run, which installs them) a missing tool fails the
// test instead, so CI never passes by skipping.
func Tool(t testing.TB, name string) string {
	t.Helper()
	p, ok := ToolPath(name)
	if ok {
		return p
	}
	msg := "the " + name + " CLI is not installed at " + p + ": run .ci/tools.sh (or make tools), or set " + toolEnv[name]
	if os.Getenv("PIXIE_REQUIRE_TOOLS") == "1" {
		t.Fatal(msg + " (PIXIE_REQUIRE_TOOLS=1)")
	}
	t.Skip(msg)
	return ""
}

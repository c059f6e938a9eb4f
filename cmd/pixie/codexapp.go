package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/pixie-dev/pixie/internal/codexapp"
)

// Codex's app server (internal/codexapp) is used only when the user asks: pixie init codex
// --trust records the hooks' trust, pixie doctor reads the hooks and the MCP entry Codex sees.
// Codex is never a dependency of Pixie: without the codex command these features say so.

// codexHook is one entry of hooks/list.
type codexHook = codexapp.Hook

// codexCommand finds the codex command: $PIXIE_CODEX_BIN, else codex on PATH.
func codexCommand() (string, error) {
	if p := os.Getenv("PIXIE_CODEX_BIN"); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("codex")
	if err != nil {
		return "", errors.New("the codex command is not on PATH (set PIXIE_CODEX_BIN to its path)")
	}
	return p, nil
}

// startCodexApp starts `codex app-server` in dir and initializes the connection.
func startCodexApp(ctx context.Context, dir string) (*codexapp.Client, error) {
	bin, err := codexCommand()
	if err != nil {
		return nil, err
	}
	return codexapp.Start(ctx, codexapp.Options{Command: bin, Dir: dir, Version: version})
}

// tomlKey quotes a key for a config/batchWrite key path.
func tomlKey(k string) string { return codexapp.TOMLKey(k) }

// isPixieCodexHook reports whether a hook Codex lists is one pixie init wrote into file.
func isPixieCodexHook(h codexHook, file string) bool {
	return isPixieCommand(h.Command) && (file == "" || filepath.Clean(h.SourcePath) == filepath.Clean(file))
}

// codexTrust records trust for the project and for Pixie's hooks in file, as the TUI's hook
// review does, and returns the hooks it trusted. Codex keeps both in the user's config.toml.
func codexTrust(ctx context.Context, project, file string, trustProject bool) ([]codexHook, error) {
	a, err := startCodexApp(ctx, project)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	return codexapp.Trust(a, project, file, trustProject, func(h codexHook) bool { return isPixieCodexHook(h, file) })
}

// writeCodexMCP puts the [mcp_servers.pixie] table into a Codex config.toml (created when
// absent), keeping the rest of the file: an existing pixie table (with its sub-tables such as
// [mcp_servers.pixie.env]) is replaced where it stands, else the table is appended. The file
// is rewritten atomically.
func writeCodexMCP(path, table string) error {
	raw, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var out []string
	replaced, skipping := false, false
	for _, line := range strings.Split(string(raw), "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "[") {
			name := strings.Trim(strings.SplitN(t, "#", 2)[0], "[] \t")
			ours := name == "mcp_servers.pixie" || strings.HasPrefix(name, "mcp_servers.pixie.")
			if ours && !replaced {
				out = append(out, strings.TrimRight(table, "\n"))
				replaced = true
			}
			skipping = ours
		}
		if !skipping {
			out = append(out, line)
		}
	}
	text := strings.Join(out, "\n")
	if !replaced {
		text = strings.TrimRight(text, "\n")
		if text != "" {
			text += "\n\n"
		}
		text += table
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return writeFileAtomic(path, []byte(text), 0o600)
}

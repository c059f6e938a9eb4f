package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// codexApp is a client of `codex app-server` (stdio, newline-delimited JSON-RPC without the
// "jsonrpc" header): the protocol Codex's own TUI and editor extensions use. Pixie uses three of
// its methods, and only when the user asks (pixie init codex --trust, pixie doctor):
//
//   - hooks/list: every hook Codex sees for a folder, with its key, its current hash and its
//     trust status (trusted, untrusted, modified);
//   - config/batchWrite: the writes the TUI's hook review makes (projects.<path>.trust_level,
//     hooks.state.<key>.trusted_hash) and the MCP server table;
//   - config/read: the effective configuration of a folder (the MCP server entry).
//
// Codex is never a dependency of Pixie: without the codex command these features say so.
type codexApp struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	mu     sync.Mutex
	nextID int
	stderr *strings.Builder
}

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
func startCodexApp(ctx context.Context, dir string) (*codexApp, error) {
	bin, err := codexCommand()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "app-server")
	cmd.Dir = dir
	a := &codexApp{cmd: cmd, stderr: &strings.Builder{}}
	cmd.Stderr = a.stderr
	if a.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	a.out = bufio.NewReaderSize(stdout, 1<<20)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start codex app-server: %w", err)
	}
	var init json.RawMessage
	if err := a.call("initialize", map[string]any{"clientInfo": map[string]any{"name": "pixie", "title": "Pixie", "version": version}}, &init); err != nil {
		a.Close()
		return nil, err
	}
	if err := a.send(map[string]any{"method": "initialized"}); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

func (a *codexApp) send(msg any) error {
	raw, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	_, err = a.stdin.Write(append(raw, '\n'))
	return err
}

// call sends a request and waits for its answer, skipping notifications.
func (a *codexApp) call(method string, params, result any) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nextID++
	id := a.nextID
	if err := a.send(map[string]any{"id": id, "method": method, "params": params}); err != nil {
		return fmt.Errorf("codex app-server %s: %w", method, err)
	}
	for {
		line, err := a.out.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("codex app-server %s: %w (stderr: %s)", method, err, strings.TrimSpace(a.stderr.String()))
		}
		var msg struct {
			ID     *int            `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(line, &msg) != nil || msg.ID == nil || *msg.ID != id {
			continue // a notification, or a request Pixie does not serve
		}
		if msg.Error != nil {
			return fmt.Errorf("codex app-server %s: %s", method, msg.Error.Message)
		}
		if result == nil {
			return nil
		}
		return json.Unmarshal(msg.Result, result)
	}
}

// Close ends the app server.
func (a *codexApp) Close() {
	_ = a.stdin.Close()
	done := make(chan struct{})
	go func() { _ = a.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = a.cmd.Process.Kill()
		<-done
	}
}

// codexHook is one entry of hooks/list.
type codexHook struct {
	Key         string `json:"key"`
	EventName   string `json:"eventName"`
	Command     string `json:"command"`
	SourcePath  string `json:"sourcePath"`
	Source      string `json:"source"`
	Enabled     bool   `json:"enabled"`
	IsManaged   bool   `json:"isManaged"`
	CurrentHash string `json:"currentHash"`
	TrustStatus string `json:"trustStatus"`
}

// hooks lists the hooks Codex sees for dir (an untrusted project's own hooks are not among
// them: Codex does not load that layer).
func (a *codexApp) hooks(dir string) ([]codexHook, []string, error) {
	var res struct {
		Data []struct {
			Hooks    []codexHook `json:"hooks"`
			Warnings []string    `json:"warnings"`
			Errors   []struct {
				Message string `json:"message"`
			} `json:"errors"`
		} `json:"data"`
	}
	if err := a.call("hooks/list", map[string]any{"cwds": []string{dir}}, &res); err != nil {
		return nil, nil, err
	}
	var hs []codexHook
	var warn []string
	for _, d := range res.Data {
		hs = append(hs, d.Hooks...)
		warn = append(warn, d.Warnings...)
		for _, e := range d.Errors {
			warn = append(warn, e.Message)
		}
	}
	return hs, warn, nil
}

// codexEdit is one config/batchWrite edit.
type codexEdit struct {
	KeyPath       string `json:"keyPath"`
	MergeStrategy string `json:"mergeStrategy"`
	Value         any    `json:"value"`
}

// write applies edits to a config file (empty: the user's config.toml) and returns the file.
func (a *codexApp) write(file string, edits []codexEdit) (string, error) {
	params := map[string]any{"edits": edits}
	if file != "" {
		params["filePath"] = file
	}
	var res struct {
		Status   string `json:"status"`
		FilePath string `json:"filePath"`
	}
	if err := a.call("config/batchWrite", params, &res); err != nil {
		return "", err
	}
	return res.FilePath, nil
}

// config returns the effective configuration for dir.
func (a *codexApp) config(dir string) (map[string]any, error) {
	var res struct {
		Config map[string]any `json:"config"`
	}
	if err := a.call("config/read", map[string]any{"cwd": dir}, &res); err != nil {
		return nil, err
	}
	return res.Config, nil
}

// tomlKey quotes a key for a config/batchWrite key path.
func tomlKey(k string) string {
	raw, _ := json.Marshal(k)
	return string(raw)
}

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
	// The project first: Codex does not load an untrusted project's hooks, so it would not
	// list them.
	if trustProject {
		if _, err := a.write("", []codexEdit{{KeyPath: "projects." + tomlKey(project) + ".trust_level", MergeStrategy: "upsert", Value: "trusted"}}); err != nil {
			return nil, err
		}
	}
	hs, _, err := a.hooks(project)
	if err != nil {
		return nil, err
	}
	var edits []codexEdit
	var ours []codexHook
	for _, h := range hs {
		if !isPixieCodexHook(h, file) || h.IsManaged {
			continue
		}
		ours = append(ours, h)
		edits = append(edits, codexEdit{KeyPath: "hooks.state." + tomlKey(h.Key) + ".trusted_hash", MergeStrategy: "upsert", Value: h.CurrentHash})
	}
	if len(ours) == 0 {
		return nil, fmt.Errorf("codex lists none of Pixie's hooks for %s (is the project explicitly untrusted in Codex's config.toml?)", project)
	}
	if _, err := a.write("", edits); err != nil {
		return nil, err
	}
	return ours, nil
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

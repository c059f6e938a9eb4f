// Package codexapp is a client of `codex app-server` (stdio, newline-delimited JSON-RPC without
// the "jsonrpc" header): the protocol Codex's own TUI and editor extensions use. Pixie uses three
// of its methods:
//
//   - hooks/list: every hook Codex sees for a folder, with its key, its current hash and its
//     trust status (trusted, untrusted, modified);
//   - config/batchWrite: the writes the TUI's hook review makes (projects.<path>.trust_level,
//     hooks.state.<key>.trusted_hash) and the MCP server table;
//   - config/read: the effective configuration of a folder (the MCP server entry).
//
// Trust records Codex's trust for hooks exactly as its hook review does, from the hashes Codex
// itself computes: `pixie init codex --trust` uses it for a project's hooks, and Pet for the
// hooks in the private CODEX_HOME of each Run of a Codex-executed Skill (internal/pet). Codex is
// never a dependency of Pixie: without the codex command these features say so.
package codexapp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Options start an app server.
type Options struct {
	// Command is the codex command (required: a path, or a name looked up in PATH).
	Command string
	// Dir is the working directory of the app server.
	Dir string
	// Env, when non-nil, is the app server's whole environment (for example a private
	// CODEX_HOME); nil inherits this process's.
	Env []string
	// Version is what Pixie reports as its clientInfo.version.
	Version string
}

// Client is one running `codex app-server`. Its methods are safe for concurrent use (calls are
// serialised).
type Client struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	mu     sync.Mutex
	nextID int
	stderr *lockedBuilder
}

// lockedBuilder is the app server's stderr, written by exec's copier and read by errors.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 64<<10 {
		l.b.Write(p)
	}
	return len(p), nil
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Start starts `codex app-server` and initializes the connection. ctx bounds the server's
// whole life: when it ends, the server is killed.
func Start(ctx context.Context, o Options) (*Client, error) {
	if o.Command == "" {
		return nil, fmt.Errorf("codexapp: no codex command")
	}
	cmd := exec.CommandContext(ctx, o.Command, "app-server")
	cmd.Dir = o.Dir
	if o.Env != nil {
		cmd.Env = o.Env
	}
	c := &Client{cmd: cmd, stderr: &lockedBuilder{}}
	cmd.Stderr = c.stderr
	var err error
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c.out = bufio.NewReaderSize(stdout, 1<<20)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start codex app-server: %w", err)
	}
	var init json.RawMessage
	if err := c.call("initialize", map[string]any{"clientInfo": map[string]any{"name": "pixie", "title": "Pixie", "version": o.Version}}, &init); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.send(map[string]any{"method": "initialized"}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Client) send(msg any) error {
	raw, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	_, err = c.stdin.Write(append(raw, '\n'))
	return err
}

// call sends a request and waits for its answer, skipping notifications.
func (c *Client) call(method string, params, result any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	id := c.nextID
	if err := c.send(map[string]any{"id": id, "method": method, "params": params}); err != nil {
		return fmt.Errorf("codex app-server %s: %w", method, err)
	}
	for {
		line, err := c.out.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("codex app-server %s: %w (stderr: %s)", method, err, strings.TrimSpace(c.stderr.String()))
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
func (c *Client) Close() {
	_ = c.stdin.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// Hook is one entry of hooks/list.
type Hook struct {
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

// Hooks lists the hooks Codex sees for dir (an untrusted project's own hooks are not among
// them: Codex does not load that layer), and the warnings and errors it reported.
func (c *Client) Hooks(dir string) ([]Hook, []string, error) {
	var res struct {
		Data []struct {
			Hooks    []Hook   `json:"hooks"`
			Warnings []string `json:"warnings"`
			Errors   []struct {
				Message string `json:"message"`
			} `json:"errors"`
		} `json:"data"`
	}
	if err := c.call("hooks/list", map[string]any{"cwds": []string{dir}}, &res); err != nil {
		return nil, nil, err
	}
	var hs []Hook
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

// Edit is one config/batchWrite edit.
type Edit struct {
	KeyPath       string `json:"keyPath"`
	MergeStrategy string `json:"mergeStrategy"`
	Value         any    `json:"value"`
}

// Write applies edits to a config file (empty: the user's config.toml, in CODEX_HOME) and
// returns the file written.
func (c *Client) Write(file string, edits []Edit) (string, error) {
	params := map[string]any{"edits": edits}
	if file != "" {
		params["filePath"] = file
	}
	var res struct {
		Status   string `json:"status"`
		FilePath string `json:"filePath"`
	}
	if err := c.call("config/batchWrite", params, &res); err != nil {
		return "", err
	}
	return res.FilePath, nil
}

// Config returns the effective configuration for dir.
func (c *Client) Config(dir string) (map[string]any, error) {
	var res struct {
		Config map[string]any `json:"config"`
	}
	if err := c.call("config/read", map[string]any{"cwd": dir}, &res); err != nil {
		return nil, err
	}
	return res.Config, nil
}

// TOMLKey quotes a key for a config/batchWrite key path.
func TOMLKey(k string) string {
	raw, _ := json.Marshal(k)
	return string(raw)
}

// Trust records trust for the hooks in file (every file when file is empty) that ours selects,
// as the TUI's hook review does: each one's trusted_hash, as Codex computed it, in the user's
// config.toml. With trustProject it first records project as trusted (Codex does not load, and
// so does not list, an untrusted project's hooks). It returns the hooks it trusted, and fails
// when it found none.
func Trust(c *Client, project, file string, trustProject bool, ours func(Hook) bool) ([]Hook, error) {
	if trustProject {
		if _, err := c.Write("", []Edit{{KeyPath: "projects." + TOMLKey(project) + ".trust_level", MergeStrategy: "upsert", Value: "trusted"}}); err != nil {
			return nil, err
		}
	}
	hs, _, err := c.Hooks(project)
	if err != nil {
		return nil, err
	}
	var edits []Edit
	var trusted []Hook
	for _, h := range hs {
		if h.IsManaged || !ours(h) || (file != "" && filepath.Clean(h.SourcePath) != filepath.Clean(file)) {
			continue
		}
		trusted = append(trusted, h)
		edits = append(edits, Edit{KeyPath: "hooks.state." + TOMLKey(h.Key) + ".trusted_hash", MergeStrategy: "upsert", Value: h.CurrentHash})
	}
	if len(trusted) == 0 {
		return nil, fmt.Errorf("codex lists none of Pixie's hooks for %s (is the project explicitly untrusted in Codex's config.toml?)", project)
	}
	if _, err := c.Write("", edits); err != nil {
		return nil, err
	}
	return trusted, nil
}

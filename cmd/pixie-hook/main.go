// Command pixie-hook is Pixie's command hook adapter for Claude Code and Codex on its own:
// `pixie-hook claude|codex [flags] < hook-input.json` does exactly what `pixie hook
// claude|codex` does (internal/hookcmd), in a program that starts in a fraction of the pixie
// binary's time. pixie init writes it into the hooks when it lies beside pixie (make build puts
// both in bin/); docs/agents/claude-code.md, "The command adapter".
//
// It links no net/http, no crypto and no YAML. What needs them it asks of the pixie binary
// beside it: the configuration (`pixie config --get …`, only when a flag does not already say),
// and an https server URL (the call is handed to `pixie hook` before stdin is read).
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pixie-dev/pixie/internal/hookcmd"
)

// version is set at build time with -ldflags "-X main.version=…", as pixie's.
var version = "0.1.0-dev"

func main() {
	// As pixie's main: SIGINT and SIGTERM cancel the call, and the adapter fails open or closed.
	// The handler is installed beside the call rather than before it: the runtime starts a
	// thread of its own for it, which cost about 0.3 ms of the adapter's start (docs/bench.md,
	// "The command adapter"). A signal in the first moment of the process ends it as an
	// unhandled signal does, which the hosts treat as a failed hook.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		<-ch
		cancel()
	}()
	code := hookcmd.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, version,
		hookcmd.Binary{Settings: settings, Handoff: handoff})
	os.Exit(code)
}

// pixie is the pixie binary beside this program.
func pixie() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	p := filepath.Join(filepath.Dir(self), "pixie")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("pixie-hook reads the configuration through the pixie binary beside it: %w", err)
	}
	return p, nil
}

// settingKeys are the settings the adapter reads, in the order of `pixie config --get`'s lines.
var settingKeys = []string{"addr", "hooks.failOpen", "hooks.timeout"}

// settings runs `pixie config --home H --get addr --get hooks.failOpen --get hooks.timeout`:
// config.Load itself, with this process's environment, for the calls that need it.
func settings(ctx context.Context, home string) (hookcmd.Settings, error) {
	bin, err := pixie()
	if err != nil {
		return hookcmd.Settings{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	args := []string{"config", "--home", home}
	for _, k := range settingKeys {
		args = append(args, "--get", k)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return hookcmd.Settings{}, errors.New(msg)
		}
		return hookcmd.Settings{}, fmt.Errorf("%s config: %w", bin, err)
	}
	return parseSettings(string(out))
}

// parseSettings reads the lines `pixie config --get` printed for settingKeys.
func parseSettings(out string) (hookcmd.Settings, error) {
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(settingKeys) {
		return hookcmd.Settings{}, fmt.Errorf("pixie config printed %d lines for %d settings", len(lines), len(settingKeys))
	}
	open, err := strconv.ParseBool(lines[1])
	if err != nil {
		return hookcmd.Settings{}, fmt.Errorf("hooks.failOpen: %w", err)
	}
	limit, err := time.ParseDuration(lines[2])
	if err != nil {
		return hookcmd.Settings{}, fmt.Errorf("hooks.timeout: %w", err)
	}
	return hookcmd.Settings{Addr: lines[0], FailOpen: open, Timeout: limit}, nil
}

// handoff replaces this process with `pixie hook` and the same arguments (stdin unread): for an
// https server URL, which needs the TLS pixie-hook does not link.
func handoff() error {
	bin, err := pixie()
	if err != nil {
		return err
	}
	return syscall.Exec(bin, append([]string{bin, "hook"}, os.Args[1:]...), os.Environ())
}

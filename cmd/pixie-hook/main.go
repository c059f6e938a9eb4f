// Command pixie-hook is Pixie's command hook adapter for Claude Code and Codex on its own:
// `pixie-hook claude|codex [flags] < hook-input.json` does exactly what `pixie hook
// claude|codex` does (internal/hookcmd) in a program that starts in about 2 ms instead of the
// pixie binary's 10. pixie init --command writes it into the hooks when it lies beside pixie
// (make build puts both in bin/); docs/agents/claude-code.md, "The command adapter".
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/pixie-dev/pixie/internal/hookcmd"
)

// version is set at build time with -ldflags "-X main.version=…", as pixie's.
var version = "0.1.0-dev"

func main() {
	// As pixie's main: SIGINT and SIGTERM cancel the call, and the adapter fails open or closed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := hookcmd.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, version)
	stop()
	os.Exit(code)
}

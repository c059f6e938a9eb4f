// Command pixie is Pixie's one binary: the server (`pixie serve`), the CLI that talks to it, the
// helper scripts call (`pixie ask`, `pixie judge`), the agent-host adapters, and the sandbox
// re-exec used to start legacy scripts.
//
// Each verb lives in its own file and registers itself in init with register (cli.go holds the
// subcommand table and how to add a verb); main only dispatches.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

func init() {
	register(&command{name: "version", summary: "print the version", flags: func(*flag.FlagSet) runFunc {
		return func(_ context.Context, io cmdIO, _ []string) error {
			fmt.Fprintln(io.stdout, "pixie", version)
			return nil
		}
	}})
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, cmdIO{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}

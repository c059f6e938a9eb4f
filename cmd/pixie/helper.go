package main

import (
	"context"
	"os"

	"github.com/pixie-dev/pixie/internal/helpercli"
)

// `pixie ask` and `pixie judge` are the helper gate scripts call. They reach the server with
// the run's PIXIE_URL and PIXIE_TOKEN; outside a run they fail with
// "pixie: helper is not available" and exit 2.
func init() {
	register(verb{name: "ask", usage: `ask the Pixie model, inside a gate script: pixie ask "<instruction>" [--input]`,
		run: func(ctx context.Context, args []string) int {
			return helpercli.Ask(ctx, args, os.Stdin, os.Stdout, os.Stderr, os.Getenv)
		}})
	register(verb{name: "judge", usage: "judge with the decision engine, inside a gate script: pixie judge [--type bool|select|score] --question … [--json] [--input]",
		run: func(ctx context.Context, args []string) int {
			return helpercli.Judge(ctx, args, os.Stdin, os.Stdout, os.Stderr, os.Getenv)
		}})
}

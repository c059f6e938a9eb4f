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
	register(&command{name: "ask", args: `"<instruction>" [--input]`, summary: "ask the Pixie model, inside a gate script",
		raw: func(ctx context.Context, io cmdIO, args []string) int {
			return helpercli.Ask(ctx, args, io.stdin, io.stdout, io.stderr, os.Getenv)
		}})
	register(&command{name: "judge", args: "[--type bool|select|score] --question … [--json] [--input]", summary: "judge with the decision engine, inside a gate script",
		raw: func(ctx context.Context, io cmdIO, args []string) int {
			return helpercli.Judge(ctx, args, io.stdin, io.stdout, io.stderr, os.Getenv)
		}})
}

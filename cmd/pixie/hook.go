package main

import (
	"context"
	"flag"

	"github.com/pixie-dev/pixie/internal/hookcmd"
)

// `pixie hook claude|codex`: the command hook adapter (internal/hookcmd), the same code as the
// small pixie-hook program that pixie init prefers when it lies beside this binary.
func init() {
	register(&command{name: "hook", args: "claude|codex < hook-input.json", nargs: one, summary: "agent hook adapter for Claude Code and Codex (hook input JSON on stdin)",
		help: hookcmd.Help, flags: hookFlags, usageCode: hookcmd.ExitUsage})
}

func hookFlags(fs *flag.FlagSet) runFunc {
	var a hookcmd.Args
	a.Define(fs)
	return func(ctx context.Context, io cmdIO, pos []string) error {
		host, err := hookcmd.Host(pos[0])
		if err != nil {
			return usagef("%s", err.Error())
		}
		if code := hookcmd.Run(ctx, a, host, io.stdin, io.stdout, io.stderr, version); code != 0 {
			return exitCode(code)
		}
		return nil
	}
}

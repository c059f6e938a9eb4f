package main

import (
	"context"

	"github.com/pixie-dev/pixie/runtime/sandbox"
)

// The hidden sandbox verb: the bash executor (runtime/bash) starts `pixie __sandbox …`, which
// confines itself with Landlock and execs bash. It must not touch config, the store or signals.
func init() {
	register(&command{name: sandbox.Verb, hidden: true, summary: "confine with Landlock and exec a program (internal)",
		raw: func(_ context.Context, _ cmdIO, args []string) int { return sandbox.Main(args) }})
}

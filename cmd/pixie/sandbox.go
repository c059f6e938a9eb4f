package main

import (
	"context"

	"github.com/pixie-dev/pixie/runtime/sandbox"
)

// The hidden sandbox verb: the bash executor (runtime/bash) starts `pixie __sandbox …`, which
// confines itself with Landlock and execs bash. It must not touch config, the store or signals.
func init() {
	register(verb{name: sandbox.Verb, hidden: true, usage: "confine with Landlock and exec a program (internal)",
		run: func(_ context.Context, args []string) int { return sandbox.Main(args) }})
}

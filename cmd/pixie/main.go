// Command pixie is Pixie's one binary: the server (`pixie serve`), the CLI that talks to it, the
// helper scripts call (`pixie ask`, `pixie judge`), the agent-host adapters, and the sandbox
// re-exec used to start legacy scripts.
//
// Each verb lives in its own file and registers itself in init with register; main only
// dispatches.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

type verb struct {
	name   string
	usage  string
	hidden bool
	run    func(ctx context.Context, args []string) int
}

var verbs = map[string]verb{}

// register adds a verb; called from init functions of the verb files.
func register(v verb) {
	if _, dup := verbs[v.name]; dup {
		panic("pixie: verb registered twice: " + v.name)
	}
	verbs[v.name] = v
}

func init() {
	register(verb{name: "version", usage: "print the version", run: func(context.Context, []string) int {
		fmt.Println("pixie", version)
		return 0
	}})
	register(verb{name: "help", usage: "show this help", run: func(context.Context, []string) int {
		usage(os.Stdout)
		return 0
	}})
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: pixie <verb> [flags]")
	fmt.Fprintln(w)
	names := make([]string, 0, len(verbs))
	for n, v := range verbs {
		if !v.hidden {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, verbs[n].usage)
	}
}

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(2)
	}
	v, ok := verbs[os.Args[1]]
	if !ok {
		if os.Args[1] == "-h" || os.Args[1] == "--help" {
			usage(os.Stdout)
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "pixie: unknown verb %q\n\n", os.Args[1])
		usage(os.Stderr)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := v.run(ctx, os.Args[2:])
	stop()
	os.Exit(code)
}

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pixie-dev/pixie/internal/guestbuild"
)

// `pixie guest build DIR`: build a WASM guest with the standard Go toolchain and the flags a
// Pixie guest needs (docs/guests.md).

func init() {
	register(&command{name: "guest", summary: "WASM guests: build", subs: []*command{
		{name: "build", args: "DIR", nargs: one, summary: "build the guest package in DIR into a .wasm module",
			help: `Builds the guest package in DIR (a Go main package exporting gate or run with
//go:wasmexport) with the Go toolchain on PATH:
  GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 go build -buildmode=c-shared -trimpath
The module goes to -o, by default <name of DIR>.wasm in the current directory.`,
			flags: func(fs *flag.FlagSet) runFunc {
				out := fs.String("o", "", "the module file to write (default <name of DIR>.wasm)")
				return func(ctx context.Context, io cmdIO, pos []string) error {
					return guestBuild(ctx, io, pos[0], *out)
				}
			}},
	}})
}

// runGuest runs `pixie guest …` (the tests' entry point).
func runGuest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return executeVerb(ctx, "guest", args, cmdIO{os.Stdin, stdout, stderr})
}

func guestBuild(ctx context.Context, io cmdIO, dir, out string) error {
	if out == "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		out = filepath.Base(abs) + ".wasm"
	}
	if !strings.HasSuffix(out, ".wasm") {
		return usagef("the output %q should end in .wasm", out)
	}
	if err := guestbuild.Build(ctx, dir, out); err != nil {
		return err
	}
	st, err := os.Stat(out)
	if err != nil {
		return err
	}
	fmt.Fprintf(io.stdout, "built %s (%d bytes); upload it with: pixie module push %s\n", out, st.Size(), out)
	return nil
}

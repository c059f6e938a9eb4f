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
	register(verb{name: "guest", usage: "WASM guests: pixie guest build DIR [-o OUT.wasm]", run: cmdGuest})
}

const guestUsage = `usage:
  pixie guest build DIR [-o OUT.wasm]
      build the guest package in DIR (a Go main package exporting gate or run with
      //go:wasmexport) with the Go toolchain on PATH:
        GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 go build -buildmode=c-shared -trimpath
      The module goes to OUT, by default <name of DIR>.wasm in the current directory.`

func cmdGuest(ctx context.Context, args []string) int {
	return runGuest(ctx, args, os.Stdout, os.Stderr)
}

func runGuest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, guestUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] != "build" {
		fmt.Fprintf(stderr, "pixie guest: unknown subcommand %q\n%s\n", args[0], guestUsage)
		return 2
	}
	fs := flag.NewFlagSet("guest build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "the module file to write (default <name of DIR>.wasm)")
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return 2
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "pixie guest build: needs the guest's folder\n%s\n", guestUsage)
		return 2
	}
	dir := pos[0]
	if *out == "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return failTo(stderr, err)
		}
		*out = filepath.Base(abs) + ".wasm"
	}
	if !strings.HasSuffix(*out, ".wasm") {
		fmt.Fprintf(stderr, "pixie guest build: the output %q should end in .wasm\n", *out)
		return 2
	}
	if err := guestbuild.Build(ctx, dir, *out); err != nil {
		return failTo(stderr, err)
	}
	st, err := os.Stat(*out)
	if err != nil {
		return failTo(stderr, err)
	}
	fmt.Fprintf(stdout, "built %s (%d bytes); upload it with: pixie module push %s\n", *out, st.Size(), *out)
	return 0
}

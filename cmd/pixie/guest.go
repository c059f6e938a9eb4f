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
	"github.com/pixie-dev/pixie/internal/guestnew"
)

// `pixie guest new DIR` scaffolds a guest project (Go or AssemblyScript) outside the repository;
// `pixie guest build DIR` builds a guest in either language (docs/guests.md).

func init() {
	register(&command{name: "guest", summary: "WASM guests: new, build", subs: []*command{
		{name: "new", args: "DIR", nargs: one, summary: "create a guest project in DIR (Go or AssemblyScript)",
			help: `Writes a new guest project into DIR (which must not exist, or be empty): a tool-before
rule, its host-side test with the SDK's fake, a README with the test, build and upload
commands, and the dependency on the SDK: for Go a go.mod (with go.sum), for AssemblyScript a
package.json pinning AssemblyScript ` + guestnew.ASVersion + ` and an asconfig.json.
The SDK is not published yet: the project depends on the SDK of a Pixie checkout (a go.mod
replace, an npm file: dependency), found from --sdk, $PIXIE_SDK, or the checkout this pixie
binary or the current folder is in. The README explains it.`,
			flags: func(fs *flag.FlagSet) runFunc {
				lang := fs.String("lang", "go", "the guest's language: go or assemblyscript")
				name := fs.String("name", "", "the module name, kebab-case (default: the name of DIR)")
				module := fs.String("module", "", "the Go module path (default example.com/<name>)")
				sdk := fs.String("sdk", "", "the sdk folder of a Pixie checkout (default: $PIXIE_SDK, or found around this binary)")
				return func(ctx context.Context, io cmdIO, pos []string) error {
					return guestNew(io, pos[0], *lang, guestnew.Options{Name: *name, Module: *module, SDK: *sdk})
				}
			}},
		{name: "build", args: "DIR", nargs: one, summary: "build the guest in DIR (Go or AssemblyScript) into a .wasm module",
			help: `Builds the guest in DIR, and checks that the module imports only what Pixie provides.
A Go guest (a main package exporting gate or run with //go:wasmexport) is built with the Go
toolchain on PATH:
  GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 go build -buildmode=c-shared -trimpath
An AssemblyScript guest (a folder with asconfig.json; run npm ci there first) is built with its
own compiler, node_modules/assemblyscript, with its asconfig.json's release target, its start
code exported as _initialize and the SDK's abort (--use abort=` + guestbuild.ASAbort + `).
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

func guestNew(io cmdIO, dir, lang string, o guestnew.Options) error {
	switch lang {
	case "go":
		o.Lang = guestbuild.Go
	case "assemblyscript", "as":
		o.Lang = guestbuild.AssemblyScript
	default:
		return usagef("--lang is go or assemblyscript, not %q", lang)
	}
	files, err := guestnew.New(dir, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(io.stdout, "created %s:\n", dir)
	for _, f := range files {
		fmt.Fprintf(io.stdout, "  %s\n", f)
	}
	if o.Lang == guestbuild.AssemblyScript {
		fmt.Fprintf(io.stdout, "next: cd %s && npm install && npm test && pixie guest build .\n", dir)
	} else {
		fmt.Fprintf(io.stdout, "next: cd %s && go test ./... && pixie guest build .\n", dir)
	}
	return nil
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

// Package guestbuild builds WASM guests with the standard Go toolchain: the logic behind
// `pixie guest build DIR`, `make guests` and the test helper that builds guests on demand.
package guestbuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Env is the environment a guest is built with, on top of the caller's.
var Env = []string{"GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0"}

// Args are the `go` arguments before the output and package: a WASI reactor (c-shared), so the
// module exports _initialize and the //go:wasmexport functions instead of running main.
var Args = []string{"build", "-buildmode=c-shared", "-trimpath"}

// Command returns the command that builds the guest package in dir into out.
func Command(ctx context.Context, dir, out string) *exec.Cmd {
	args := append(append([]string{}, Args...), "-o", out, ".")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), Env...)
	return cmd
}

// Build builds the guest package in dir (a Go main package exporting its entry point with
// //go:wasmexport) into the module file out. The file is written to a temporary name beside
// out and renamed, so a reader never sees half a module. The error carries the toolchain's
// output.
func Build(ctx context.Context, dir, out string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("guest build: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("guest build: %s is not a directory", dir)
	}
	if out == "" {
		return errors.New("guest build: no output file")
	}
	out, err = filepath.Abs(out)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("guest build: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*.tmp")
	if err != nil {
		return fmt.Errorf("guest build: %w", err)
	}
	tmpName := tmp.Name()
	tmp.Close()
	defer os.Remove(tmpName)
	cmd := Command(ctx, dir, tmpName)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("guest build %s: %w\n%s", dir, err, strings.TrimSpace(buf.String()))
	}
	if err := os.Rename(tmpName, out); err != nil {
		return fmt.Errorf("guest build: %w", err)
	}
	return nil
}

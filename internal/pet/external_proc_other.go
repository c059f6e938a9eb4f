//go:build !linux

package pet

import (
	"context"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/sandbox"
)

// proc is one contained process; outside Linux there is no sandbox to contain it in.
type proc struct {
	argv  []string
	env   []string
	dir   string
	stdin string
	iso   sandbox.Isolation
	line  func(b []byte, cut bool)
}

type procResult struct {
	exitCode int
	stderr   string
	err      error
}

func (p proc) run(context.Context) procResult {
	return procResult{exitCode: -1, err: errs.Wrap(errs.Unavailable, runtime.ErrUnsupported, "%s: external executors run only on Linux, under Pixie's sandbox", runtime.ErrUnsupported)}
}

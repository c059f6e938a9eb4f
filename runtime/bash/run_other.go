//go:build !linux

package bash

import (
	"context"
	"os"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/runtime"
)

func supported() error {
	return errs.Wrap(errs.Unavailable, runtime.ErrUnsupported, "%s: bash scripts run only on Linux", runtime.ErrUnsupported)
}

func (e *Executor) run(context.Context, []string, []string, runtime.Request, time.Duration, []*os.File) (runtime.Result, error) {
	return failed, supported()
}

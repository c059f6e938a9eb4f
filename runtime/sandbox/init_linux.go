//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// FindInit returns the sandbox command of the init program beside self (the pixie binary, its
// symbolic links resolved): its path alone, since it runs Main without a verb. It returns an
// error saying why when there is none to use: it is missing, not an executable regular file,
// writable by others than its owner, owned by someone other than this user or root, cannot
// run, or was built from other sources than this binary (its Fingerprint differs). The caller
// then starts self with Verb, which runs the same code in the bigger binary. It takes one
// start of the init program.
func FindInit(self string) ([]string, error) {
	p := filepath.Join(filepath.Dir(self), InitName)
	st, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("there is no %s beside %s", InitName, self)
	case err != nil:
		return nil, err
	case !st.Mode().IsRegular() || st.Mode()&0o111 == 0:
		return nil, fmt.Errorf("%s is not an executable file", p)
	case st.Mode()&0o022 != 0:
		return nil, fmt.Errorf("%s is writable by others than its owner (mode %04o)", p, st.Mode().Perm())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 && int(sys.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("%s belongs to another user (uid %d)", p, sys.Uid)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, p, FingerprintArg)
	cmd.Env = []string{}
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s does not run: %v %s", p, err, strings.TrimSpace(stderr.String()))
	}
	if got, want := strings.TrimSpace(out.String()), Fingerprint(); got != want {
		return nil, fmt.Errorf("%s was built from other sources than %s (its fingerprint is %.12s…, this binary's %.12s…): build both together (make build)", p, self, got, want)
	}
	return []string{p}, nil
}

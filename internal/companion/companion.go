// Package companion finds the small programs that ship beside the pixie binary (make build puts
// them in bin/ with it): the sandbox init (cmd/pixie-sandbox, runtime/sandbox) and the command
// hook adapter (cmd/pixie-hook, internal/hookcmd). Each runs code of this repository that the
// pixie binary also holds, in a binary that starts in a few milliseconds rather than pixie's
// ten. A companion is used only when it provably runs the same code: Fingerprint hashes that
// code's source (embedded in both binaries), and Find checks the companion's.
package companion

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strings"
	"syscall"
	"time"
)

// FingerprintArg, as a companion's only argument, makes it print its fingerprint and exit.
const FingerprintArg = "-fingerprint"

// Source is the Go source of one package, named by its import path below the module.
type Source struct {
	Name string // "runtime/sandbox"
	FS   fs.FS  // the package's embedded *.go files
}

// Fingerprint is a 128-bit FNV-1a hash over the sources (each file's name and contents, in a
// fixed order) and the Go version: two binaries with the same fingerprint run the same code.
// It tells builds apart, it is no defence (whoever can replace a program beside pixie runs code
// already), and FNV keeps crypto/sha256 and its FIPS module out of the companions' start. (The versions
// of third-party modules are not in it: test binaries do not record them.)
func Fingerprint(sources ...Source) string {
	h := fnv.New128a()
	for _, src := range sources {
		names, _ := fs.Glob(src.FS, "*")
		sort.Strings(names)
		for _, n := range names {
			b, _ := fs.ReadFile(src.FS, n)
			fmt.Fprintf(h, "%s/%s %d\n", src.Name, n, len(b))
			h.Write(b)
		}
	}
	fmt.Fprintf(h, "go %s\n", goruntime.Version())
	return hex.EncodeToString(h.Sum(nil))
}

// Find returns the path of the companion program name beside self (the pixie binary, its
// symbolic links resolved), or an error saying why there is none to use: it is missing, not an
// executable regular file, writable by others than its owner, owned by someone other than this
// user or root, cannot run, or prints another fingerprint than want when run with
// FingerprintArg (it was built from other sources). It takes one start of the companion.
func Find(self, name, want string) (string, error) {
	p := filepath.Join(filepath.Dir(self), name)
	st, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("there is no %s beside %s", name, self)
	case err != nil:
		return "", err
	case !st.Mode().IsRegular() || st.Mode()&0o111 == 0:
		return "", fmt.Errorf("%s is not an executable file", p)
	case st.Mode()&0o022 != 0:
		return "", fmt.Errorf("%s is writable by others than its owner (mode %04o)", p, st.Mode().Perm())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 && int(sys.Uid) != os.Geteuid() {
		return "", fmt.Errorf("%s belongs to another user (uid %d)", p, sys.Uid)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, p, FingerprintArg)
	cmd.Env = []string{}
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s does not run: %v %s", p, err, strings.TrimSpace(stderr.String()))
	}
	if got := strings.TrimSpace(out.String()); got != want {
		return "", fmt.Errorf("%s was built from other sources than %s (its fingerprint is %.12s…, this binary's %.12s…): build both together (make build)", p, self, got, want)
	}
	return p, nil
}

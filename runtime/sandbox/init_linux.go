//go:build linux

package sandbox

import "github.com/pixie-dev/pixie/internal/companion"

// FindInit returns the sandbox command of the init program beside self (the pixie binary, its
// symbolic links resolved): its path alone, since it runs Main without a verb. It returns an
// error saying why when there is none to use: it is missing, not an executable regular file,
// writable by others than its owner, owned by someone other than this user or root, cannot
// run, or was built from other sources than this binary (its Fingerprint differs). The caller
// then starts self with Verb, which runs the same code in the bigger binary. It takes one
// start of the init program.
func FindInit(self string) ([]string, error) {
	p, err := companion.Find(self, InitName, Fingerprint())
	if err != nil {
		return nil, err
	}
	return []string{p}, nil
}

// Package pixiehome owns where Pixie's home is (--home, else $PIXIE_HOME, else ~/.pixie) and
// the names of the files in it that a client reads. It imports only the standard library's
// small packages, so that the hook adapter pixie-hook, which starts for every hook event, can
// find the home without linking the configuration's YAML; internal/config re-exports it.
package pixiehome

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ConfigFile is the configuration file inside the home.
const ConfigFile = "pixie.yaml"

// TokenFile is the admin token's file inside the home (written 0600 by the server's first
// start; internal/cluster owns it).
const TokenFile = "token"

// Resolve picks the home: flag, else $PIXIE_HOME, else ~/.pixie, made absolute.
func Resolve(flagHome string, getenv func(string) string) (string, error) {
	h := flagHome
	if h == "" {
		h = getenv("PIXIE_HOME")
	}
	if h == "" {
		uh, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("config: no home directory: %w", err)
		}
		h = filepath.Join(uh, ".pixie")
	}
	h, err := ExpandPath(h)
	if err != nil {
		return "", err
	}
	return filepath.Abs(h)
}

// ExpandPath expands a leading ~/ to the user's home.
func ExpandPath(p string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		uh, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("config: expand %s: %w", p, err)
		}
		return filepath.Join(uh, strings.TrimPrefix(p, "~")), nil
	}
	return p, nil
}

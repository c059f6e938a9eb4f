package sandbox

import (
	"embed"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/pixie-dev/pixie/internal/companion"
	"github.com/pixie-dev/pixie/internal/confine"
)

// InitName is the file name of the sandbox init program (cmd/pixie-sandbox): a small binary
// whose main is InitMain, built beside pixie (make build, or go build -o DIR/ ./cmd/...). With
// it, a run starts a 3 MB program instead of the whole pixie binary, whose start (the runtime
// and the initialisation of about a thousand packages) costs about 10 ms of CPU.
const InitName = "pixie-sandbox"

// FingerprintArg, as the init's only argument, makes it print its Fingerprint and exit.
const FingerprintArg = companion.FingerprintArg

// ownSource is this package's Go source, hashed into Fingerprint.
//
//go:embed *.go
var ownSource embed.FS

// Fingerprint identifies the code Main runs: a 128-bit FNV-1a hash (internal/companion) over
// the Go source of this package and of internal/confine and the Go version. FindInit uses only an init program whose fingerprint
// is this binary's, so a pixie-sandbox left from an older build is never used. (The versions of
// the modules it uses, go-landlock and x/sys, are not in it: test binaries do not record them.)
func Fingerprint() string { return fingerprint() }

var fingerprint = sync.OnceValue(func() string {
	return companion.Fingerprint(companion.Source{Name: "runtime/sandbox", FS: ownSource}, companion.Source{Name: "internal/confine", FS: confine.Source})
})

// InitMain is the init program's main: with the single argument FingerprintArg it prints
// Fingerprint; otherwise it is Main (args are the verb's arguments, without Verb).
func InitMain(args []string, stdout io.Writer) int {
	if len(args) == 1 && args[0] == FingerprintArg {
		fmt.Fprintln(stdout, Fingerprint())
		return 0
	}
	if len(args) == 0 {
		fmt.Fprintf(os.Stderr, "%s is the sandbox init of Pixie's bash executor: pixie serve starts it for every hook script and script Skill; it is not a command\n", InitName)
		return 2
	}
	return Main(args)
}

// Package importrules keeps the package rooms of DESIGN.md true: for each package, the full
// set of its dependencies (go list -deps, so transitive imports count) must not reach what its
// room denies.
package importrules

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const (
	mod    = "github.com/pixie-dev/pixie"
	sdkMod = mod + "/sdk" // the guest SDK's own module, in sdk/
	pdk    = "github.com/extism/go-pdk"
)

var (
	echo    = "github.com/labstack/echo"
	badger  = "github.com/dgraph-io/badger"
	pgx     = "github.com/jackc/pgx"
	wazero  = "github.com/tetratelabs/wazero"
	extism  = "github.com/extism/go-sdk"
	server  = mod + "/server"
	gate    = mod + "/internal/gate"
	pet     = mod + "/internal/pet"
	store   = mod + "/internal/store"
	app     = mod + "/internal/app" // the composition root: only cmd/pixie builds on it
	rtime   = mod + "/runtime"
	larkSDK = "github.com/larksuite/oapi-sdk-go"
	larkAPI = mod + "/internal/channel/lark/larkapi"
	stdOnly = "<std>"
)

// hookAdapter is the command hook adapter's program and the packages it runs.
const hookAdapter = "./cmd/pixie-hook ./internal/hookcmd ./internal/hookwire ./internal/minihttp ./internal/serverref ./internal/pixiehome"

// rule: packages matching pattern must not depend on any denied prefix. The special deny
// stdOnly allows only the standard library plus the listed allow prefixes.
type rule struct {
	name    string
	pattern string // a go list pattern
	deny    []string
	allow   []string // with stdOnly: non-std prefixes allowed
	goos    string   // build for this GOOS/GOARCH (wasip1 packages)
	dir     string   // the module folder to list from, relative to the repository ("" is the server's)
}

var rules = []rule{
	{name: "server", pattern: "./server/...", deny: []string{badger, pgx, wazero, extism, app}},
	{name: "runtime-root", pattern: "./runtime", deny: []string{echo, badger, pgx, wazero, extism, server}},
	{name: "runtime-engines", pattern: "./runtime/...", deny: []string{echo, badger, pgx, server}},
	{name: "hostfuncs", pattern: "./hostfuncs/...", deny: []string{echo, badger, pgx, server, rtime}},
	{name: "store-portable", pattern: "./internal/store", deny: []string{echo, wazero, badger, pgx}},
	{name: "store-drivers", pattern: "./internal/store/...", deny: []string{echo, wazero}},
	{name: "domain", pattern: "./internal/gate/... ./internal/helper/... ./internal/hint/... ./internal/judge/... ./internal/model/... ./internal/pet/... ./internal/channel/... ./internal/proxy/... ./internal/rewrite/...",
		deny: []string{echo, badger, pgx, wazero, extism, app}},
	// The per-run helper serves gate rules and Pet's Skills as siblings: it knows neither, and
	// Pet reaches it without going through the gate.
	{name: "helper", pattern: "./internal/helper/...", deny: []string{gate, pet, server, store}},
	// The Loci with their Delivery queue, and the image spool, know nothing of Lark's API: the
	// channel (internal/channel/lark) drives them and does the Lark side.
	{name: "lark-locus-spool", pattern: "./internal/channel/lark/locus/... ./internal/channel/lark/spool/...", deny: []string{larkSDK, larkAPI}},
	{name: "pet-not-gate", pattern: "./internal/pet/...", deny: []string{gate}},
	// The built-in agent runs a tool loop on the model: it takes the gates through its own
	// interface (internal/app adapts the gate service) and keeps no state of its own.
	{name: "agent", pattern: "./internal/agent/...", deny: []string{echo, badger, pgx, wazero, extism, app, server, store, gate, pet, mod + "/internal/channel"}},
	// The codex app-server client is a protocol client, shared by the CLI (pixie init codex
	// --trust, doctor) and Pet's Codex executor: the standard library only.
	{name: "codexapp", pattern: "./internal/codexapp", deny: []string{stdOnly}},
	{name: "errs", pattern: "./internal/errs", deny: []string{stdOnly}},
	// The sandbox init program starts for every hook script run: it stays a small binary that
	// links only the sandbox's own code (its start is what the bash row of make bench pays).
	{name: "sandbox-init", pattern: "./cmd/pixie-sandbox ./runtime/sandbox", deny: []string{stdOnly},
		allow: []string{"golang.org/x/sys", "github.com/landlock-lsm/go-landlock", "kernel.org/pub/linux/libs/security/libcap/psx",
			rtime, mod + "/internal/confine", mod + "/internal/errs", mod + "/internal/companion", sdkMod + "/abi"}},
	// The hook adapter starts for every hook event of Claude Code and Codex: pixie-hook stays a
	// small binary, far from the server's packages, and without the standard library's heavy
	// parts: net/http, crypto (TLS, the hashes' FIPS module) and the configuration's YAML were
	// most of its start (docs/bench.md, "The command adapter").
	{name: "hook-adapter", pattern: hookAdapter, deny: []string{stdOnly},
		allow: []string{mod + "/internal/errs", mod + "/internal/companion", mod + "/internal/hookcmd", mod + "/internal/hookwire",
			mod + "/internal/minihttp", mod + "/internal/serverref", mod + "/internal/pixiehome"}},
	{name: "hook-adapter-lean", pattern: hookAdapter, deny: []string{"net/http", "crypto", "go.yaml.in", "regexp", "compress", "mime", "encoding/pem", "os/user"}},
	{name: "sandbox-init-engines", pattern: "./cmd/pixie-sandbox ./runtime/sandbox", deny: []string{rtime + "/bash", rtime + "/wasm", rtime + "/modules"}},
	{name: "abi", pattern: "./abi/...", dir: "sdk", deny: []string{stdOnly}},
	{name: "sdk-host", pattern: "./...", dir: "sdk", deny: []string{stdOnly}, allow: []string{pdk, sdkMod}},
	{name: "sdk-wasip1", pattern: "./...", dir: "sdk", deny: []string{stdOnly}, allow: []string{pdk, sdkMod}, goos: "wasip1"},
	{name: "guests", pattern: "./guests/...", deny: []string{stdOnly}, allow: []string{pdk, sdkMod, mod + "/guests"}, goos: "wasip1"},
}

type pkg struct {
	ImportPath string
	Standard   bool
	Deps       []string
	DepsErrors []struct{ Err string }
	// Direct imports: the package's own, its tests' and its external tests'.
	Imports, TestImports, XTestImports []string
}

func root(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func list(t *testing.T, r rule) []pkg {
	args := append([]string{"list", "-e", "-json=ImportPath,Deps,Standard,Imports,TestImports,XTestImports"}, strings.Fields(r.pattern)...)
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join(root(t), filepath.FromSlash(r.dir))
	if r.goos != "" {
		cmd.Env = append(cmd.Environ(), "GOOS="+r.goos, "GOARCH=wasm")
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", r.pattern, err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func TestImportRules(t *testing.T) {
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			matched := 0
			for _, p := range list(t, r) {
				if strings.Contains(p.ImportPath, "matched no packages") {
					continue
				}
				matched++
				for _, d := range p.Deps {
					for _, deny := range r.deny {
						if deny == stdOnly {
							if isStd(d) || hasAnyPrefix(d, r.allow) {
								continue
							}
							t.Errorf("%s depends on %s; its room allows only the standard library%s", p.ImportPath, d, allowText(r.allow))
							continue
						}
						if d == deny || strings.HasPrefix(d, deny+"/") {
							t.Errorf("%s depends on %s, which its room denies", p.ImportPath, d)
						}
					}
				}
			}
			if matched == 0 {
				t.Errorf("%s (in ./%s) matched no packages: the rule checks nothing", r.pattern, r.dir)
			}
		})
	}
}

// soleImporters name third-party modules that only one package may import directly (tests
// included): the package that wraps the module, so that none of its types reaches the rest of
// Pixie (the Lark SDK stays behind larkapi's API).
var soleImporters = []struct{ module, importer string }{
	{larkSDK, larkAPI},
}

func TestSoleImporters(t *testing.T) {
	pkgs := list(t, rule{pattern: "./..."})
	for _, si := range soleImporters {
		t.Run(si.module, func(t *testing.T) {
			wrapped := false
			for _, p := range pkgs {
				for _, imp := range append(append(append([]string(nil), p.Imports...), p.TestImports...), p.XTestImports...) {
					if !hasAnyPrefix(imp, []string{si.module}) {
						continue
					}
					if p.ImportPath == si.importer {
						wrapped = true
						continue
					}
					t.Errorf("%s imports %s; only %s may", p.ImportPath, imp, si.importer)
				}
			}
			if !wrapped {
				t.Errorf("%s does not import %s: the rule checks nothing (update it)", si.importer, si.module)
			}
		})
	}
}

func hasAnyPrefix(s string, ps []string) bool {
	for _, p := range ps {
		if s == p || strings.HasPrefix(s, p+"/") {
			return true
		}
	}
	return false
}

func allowText(a []string) string {
	if len(a) == 0 {
		return ""
	}
	return " and " + strings.Join(a, ", ")
}

// TestImportRulesSeeViolations proves the checker can fail: the Badger driver's dependencies
// must show Badger, as a deny rule on it would report.
func TestImportRulesSeeViolations(t *testing.T) {
	for _, p := range list(t, rule{pattern: "./internal/store/badgerstore"}) {
		for _, d := range p.Deps {
			if strings.HasPrefix(d, badger+"/") {
				return
			}
		}
	}
	t.Fatal("go list -deps of the Badger driver did not show Badger; the rules above would pass vacuously")
}

// TestSDKModuleGraph keeps the guest SDK's module small for the authors who depend on it: its
// whole module graph (go list -m all in sdk/, test dependencies included) is the SDK itself
// and go-pdk, so a guest's go.mod pulls in nothing of the server's.
func TestSDKModuleGraph(t *testing.T) {
	cmd := exec.Command("go", "list", "-m", "all")
	cmd.Dir = filepath.Join(root(t), "sdk")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m all in sdk/: %v", err)
	}
	var mods []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		mods = append(mods, strings.Fields(line)[0])
	}
	if want := []string{sdkMod, pdk}; strings.Join(mods, " ") != strings.Join(want, " ") {
		t.Errorf("the SDK module's graph is %q; it must be exactly %q", mods, want)
	}
	// go-pdk's exact version: the only one Pixie's host is tested with (docs/abi.md).
	if !strings.Contains(string(out), pdk+" v1.1.3\n") {
		t.Errorf("the SDK must require %s v1.1.3:\n%s", pdk, out)
	}
}

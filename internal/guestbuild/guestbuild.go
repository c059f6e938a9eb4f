// Package guestbuild builds WASM guests, in Go with the standard Go toolchain or in
// AssemblyScript with the guest's own AssemblyScript compiler: the logic behind
// `pixie guest build DIR`, `make guests` and the test helper that builds guests on demand.
// After a build it checks the module's imports against what Pixie's host provides, so that a
// module the upload would refuse (an AssemblyScript env.abort, a Math.random that imports
// env.seed) is reported by the build, with the reason.
package guestbuild

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pixie-dev/pixie/sdk/abi"
)

// Language is a guest's source language.
type Language string

// Languages.
const (
	Go             Language = "go"
	AssemblyScript Language = "assemblyscript"
)

// Env is the environment a Go guest is built with, on top of the caller's.
var Env = []string{"GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0"}

// Args are the `go` arguments before the output and package: a WASI reactor (c-shared), so the
// module exports _initialize and the //go:wasmexport functions instead of running main.
var Args = []string{"build", "-buildmode=c-shared", "-trimpath"}

// SDKPackage is the npm name of the AssemblyScript SDK (sdk/assemblyscript).
const SDKPackage = "@pixie-dev/sdk"

// ASAbort is the AssemblyScript SDK's abort, which replaces the compiler's default (an import
// of env.abort, which Pixie does not provide) when the guest's asconfig.json names none.
const ASAbort = "~lib/" + SDKPackage + "/assembly/index/abort"

// ASConfig is the AssemblyScript compiler's configuration file a guest folder holds.
const ASConfig = "asconfig.json"

// ascPath is the AssemblyScript compiler inside a guest folder, installed by `npm ci`.
var ascPath = filepath.Join("node_modules", "assemblyscript", "bin", "asc.js")

// Detect returns the language of the guest in dir: AssemblyScript when it holds an
// asconfig.json, Go when it holds a go.mod or .go files.
func Detect(dir string) (Language, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("guest build: %w", err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("guest build: %s is not a directory", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, ASConfig)); err == nil {
		return AssemblyScript, nil
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
		return Go, nil
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.go")); len(m) > 0 {
		return Go, nil
	}
	return "", fmt.Errorf("guest build: %s holds no guest: expected Go sources (go.mod, *.go) or an AssemblyScript %s", dir, ASConfig)
}

// Command returns the command that builds the guest in dir into out.
func Command(ctx context.Context, dir, out string) (*exec.Cmd, error) {
	lang, err := Detect(dir)
	if err != nil {
		return nil, err
	}
	if lang == AssemblyScript {
		return ascCommand(ctx, dir, out)
	}
	args := append(append([]string{}, Args...), "-o", out, ".")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), Env...)
	return cmd, nil
}

// asconfig is what ascCommand reads of a guest's asconfig.json.
type asconfig struct {
	Entries []string                   `json:"entries"`
	Targets map[string]json.RawMessage `json:"targets"`
	Options struct {
		Use json.RawMessage `json:"use"`
	} `json:"options"`
}

// ascCommand is the AssemblyScript build: the guest's own compiler (node_modules, pinned by its
// package-lock.json) with its asconfig.json, its "release" target when it has one, and the
// options Pixie needs on top: the start code exported as _initialize (a start section would run
// while the module is instantiated, where it cannot be interrupted), and the SDK's abort unless
// the configuration names its own.
func ascCommand(ctx context.Context, dir, out string) (*exec.Cmd, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, errors.New("guest build: an AssemblyScript guest needs Node.js 20 or newer, and node is not on PATH")
	}
	if _, err := os.Stat(filepath.Join(dir, ascPath)); err != nil {
		return nil, fmt.Errorf("guest build: %s has no AssemblyScript compiler installed (%s): run `npm ci` (or `npm install`) there first", dir, ascPath)
	}
	raw, err := os.ReadFile(filepath.Join(dir, ASConfig))
	if err != nil {
		return nil, fmt.Errorf("guest build: %w", err)
	}
	var cfg asconfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("guest build: %s: %w", filepath.Join(dir, ASConfig), err)
	}
	args := []string{ascPath}
	if len(cfg.Entries) == 0 {
		args = append(args, "assembly/index.ts")
	}
	args = append(args, "--config", ASConfig)
	if _, ok := cfg.Targets["release"]; ok {
		args = append(args, "--target", "release")
	}
	args = append(args, "--outFile", out, "--exportStart", "_initialize")
	if !usesAbort(cfg.Options.Use) {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", filepath.FromSlash(SDKPackage))); err != nil {
			return nil, fmt.Errorf("guest build: %s does not have %s installed, whose abort replaces AssemblyScript's env.abort import: add it to package.json and run `npm ci`, or name an abort of your own in %s (options.use: [\"abort=…\"])", dir, SDKPackage, ASConfig)
		}
		args = append(args, "--use", "abort="+ASAbort)
	}
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	return cmd, nil
}

// usesAbort reports whether an asconfig "use" value (a string or a list) aliases abort.
func usesAbort(raw json.RawMessage) bool {
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		var one string
		if json.Unmarshal(raw, &one) != nil {
			return false
		}
		list = strings.Split(one, ",")
	}
	for _, u := range list {
		if strings.HasPrefix(strings.TrimSpace(u), "abort=") {
			return true
		}
	}
	return false
}

// Build builds the guest in dir (a Go main package exporting its entry point with
// //go:wasmexport, or an AssemblyScript package with an asconfig.json) into the module file
// out, and checks the module's imports. The file is written to a temporary name beside out and
// renamed, so a reader never sees half a module. The error carries the compiler's output.
func Build(ctx context.Context, dir, out string) error {
	if out == "" {
		return errors.New("guest build: no output file")
	}
	out, err := filepath.Abs(out)
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
	cmd, err := Command(ctx, dir, tmpName)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("guest build %s: %w\n%s", dir, err, strings.TrimSpace(buf.String()))
	}
	wasm, err := os.ReadFile(tmpName)
	if err != nil {
		return fmt.Errorf("guest build: %w", err)
	}
	if err := CheckImports(wasm); err != nil {
		return fmt.Errorf("guest build %s: %w", dir, err)
	}
	if err := os.Chmod(tmpName, 0o644); err != nil {
		return fmt.Errorf("guest build: %w", err)
	}
	if err := os.Rename(tmpName, out); err != nil {
		return fmt.Errorf("guest build: %w", err)
	}
	return nil
}

// CheckImports reports the imports of the module wasm that Pixie's host does not provide
// (docs/abi.md, "Module shape"): anything outside WASI, Extism's kernel (extism:host/env) and
// Pixie's host functions, and an imported memory, table or global. It reads the import section
// only; the upload checks the rest.
func CheckImports(wasm []byte) error {
	imps, err := imports(wasm)
	if err != nil {
		return err
	}
	user := []string{abi.FnAsk, abi.FnJudge, abi.FnLog, abi.FnPetContext, abi.FnContext}
	var bad []string
	for _, im := range imps {
		ok := im.kind == 0 && (im.module == "wasi_snapshot_preview1" || im.module == "extism:host/env" ||
			(im.module == abi.Namespace && slices.Contains(user, im.name)))
		if !ok {
			bad = append(bad, im.String())
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	hint := ""
	for _, b := range bad {
		switch {
		case strings.HasSuffix(b, "env.abort"):
			hint += "; env.abort is AssemblyScript's default abort: build with the SDK's (--use abort=" + ASAbort + ")"
		case strings.HasSuffix(b, "env.seed"):
			hint += "; env.seed is what AssemblyScript's Math.random imports: a guest has no such source"
		case strings.HasPrefix(b, "function env.Date") || strings.HasSuffix(b, "env.trace"):
			hint += "; " + strings.TrimPrefix(b, "function ") + " is a JavaScript host's, not Pixie's"
		}
	}
	return fmt.Errorf("the module imports what Pixie's host does not provide: %s%s", strings.Join(bad, ", "), hint)
}

type wasmImport struct {
	module, name string
	kind         byte // 0 function, 1 table, 2 memory, 3 global
}

func (im wasmImport) String() string {
	kinds := [...]string{"function", "table", "memory", "global"}
	k := "import"
	if int(im.kind) < len(kinds) {
		k = kinds[im.kind]
	}
	return k + " " + im.module + "." + im.name
}

// imports reads the import section of a WebAssembly 1.0 binary.
func imports(b []byte) ([]wasmImport, error) {
	if len(b) < 8 || string(b[:4]) != "\x00asm" || !bytes.Equal(b[4:8], []byte{1, 0, 0, 0}) {
		return nil, errors.New("the output is not a WebAssembly 1.0 module")
	}
	r := &reader{b: b, i: 8}
	for r.i < len(r.b) && r.err == nil {
		id := r.byte()
		size := int(r.uleb())
		if r.err != nil || size > len(r.b)-r.i {
			return nil, errors.New("the module is truncated")
		}
		if id != 2 {
			r.i += size
			continue
		}
		s := &reader{b: r.b[r.i : r.i+size]}
		var out []wasmImport
		for n := s.uleb(); n > 0 && s.err == nil; n-- {
			im := wasmImport{module: s.name(), name: s.name(), kind: s.byte()}
			switch im.kind {
			case 0:
				s.uleb()
			case 1:
				s.byte()
				s.limits()
			case 2:
				s.limits()
			case 3:
				s.byte()
				s.byte()
			default:
				s.err = fmt.Errorf("unknown import kind %d", im.kind)
			}
			out = append(out, im)
		}
		if s.err != nil {
			return nil, fmt.Errorf("the module's import section is malformed: %w", s.err)
		}
		return out, nil
	}
	if r.err != nil {
		return nil, errors.New("the module is truncated")
	}
	return nil, nil
}

type reader struct {
	b   []byte
	i   int
	err error
}

func (r *reader) byte() byte {
	if r.i >= len(r.b) {
		r.err = errors.New("unexpected end")
		return 0
	}
	c := r.b[r.i]
	r.i++
	return c
}

func (r *reader) uleb() uint64 {
	var v uint64
	for shift := 0; shift < 64; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
	r.err = errors.New("integer too long")
	return 0
}

func (r *reader) name() string {
	n := int(r.uleb())
	if r.err != nil || n > len(r.b)-r.i {
		r.err = errors.New("name past the end")
		return ""
	}
	s := string(r.b[r.i : r.i+n])
	r.i += n
	return s
}

func (r *reader) limits() {
	flags := r.byte()
	r.uleb()
	if flags&1 != 0 {
		r.uleb()
	}
}

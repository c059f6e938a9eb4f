package instrument

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// wazeroDir is the wazero module's folder in the module cache (it holds the spec suite).
func wazeroDir(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/tetratelabs/wazero").Output()
	if err != nil {
		t.Fatalf("go list wazero: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	if _, err := os.Stat(filepath.Join(dir, "internal", "integration_test", "spectest")); err != nil {
		t.Fatalf("the spec suite is not in the module cache: %v", err)
	}
	return dir
}

// specCommand is one command of a wast2json file.
type specCommand struct {
	Type       string `json:"type"`
	Line       int    `json:"line"`
	Name       string `json:"name"`
	As         string `json:"as"`
	Filename   string `json:"filename"`
	ModuleType string `json:"module_type"`
	Action     struct {
		Type   string      `json:"type"`
		Module string      `json:"module"`
		Field  string      `json:"field"`
		Args   []specValue `json:"args"`
	} `json:"action"`
}

type specValue struct {
	Type     string          `json:"type"`
	LaneType string          `json:"lane_type"`
	Value    json.RawMessage `json:"value"`
}

// words encodes a spec argument as wazero's stack values.
func (v specValue) words(t *testing.T) []uint64 {
	if v.Type == "v128" {
		var lanes []string
		if err := json.Unmarshal(v.Value, &lanes); err != nil {
			t.Fatalf("v128 %s: %v", v.Value, err)
		}
		var b [16]byte
		size := map[string]int{"i8": 1, "i16": 2, "i32": 4, "f32": 4, "i64": 8, "f64": 8}[v.LaneType]
		for i, l := range lanes {
			n, err := strconv.ParseUint(l, 10, 64)
			if err != nil {
				t.Fatalf("lane %q: %v", l, err)
			}
			var w [8]byte
			binary.LittleEndian.PutUint64(w[:], n)
			copy(b[i*size:], w[:size])
		}
		return []uint64{binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])}
	}
	var s string
	if err := json.Unmarshal(v.Value, &s); err != nil {
		t.Fatalf("value %s: %v", v.Value, err)
	}
	if s == "null" {
		return []uint64{0}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("value %q: %v", s, err)
	}
	return []uint64{n}
}

// specRuntime is one side of the differential run.
type specRuntime struct {
	rt      wazero.Runtime
	modules map[string]api.Module
	last    api.Module
}

func newSpecRuntime(ctx context.Context, t *testing.T, cfg wazero.RuntimeConfig, spectest []byte, withCheck bool) *specRuntime {
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	if _, err := rt.InstantiateWithConfig(ctx, spectest, wazero.NewModuleConfig()); err != nil {
		t.Fatal(err)
	}
	if withCheck {
		if _, err := rt.NewHostModuleBuilder(CheckModule).NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) { stack[0] = Budget }),
				nil, []api.ValueType{api.ValueTypeI64}).Export(CheckName).Instantiate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return &specRuntime{rt: rt, modules: map[string]api.Module{}}
}

func (s *specRuntime) module(name string) api.Module {
	if name != "" {
		return s.modules[name]
	}
	return s.last
}

// outcome is what an action did: its results, or the first line of its error.
type outcome struct {
	results []uint64
	err     string
}

func firstLine(err error) string {
	if err == nil {
		return ""
	}
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

func (s *specRuntime) act(ctx context.Context, t *testing.T, c specCommand) outcome {
	m := s.module(c.Action.Module)
	if m == nil {
		return outcome{err: "no module"}
	}
	switch c.Action.Type {
	case "invoke":
		f := m.ExportedFunction(c.Action.Field)
		if f == nil {
			return outcome{err: "no function " + c.Action.Field}
		}
		var args []uint64
		for _, a := range c.Action.Args {
			args = append(args, a.words(t)...)
		}
		res, err := f.Call(ctx, args...)
		return outcome{results: res, err: firstLine(err)}
	case "get":
		g := m.ExportedGlobal(c.Action.Field)
		if g == nil {
			return outcome{err: "no global " + c.Action.Field}
		}
		return outcome{results: []uint64{g.Get()}}
	}
	t.Fatalf("unknown action %q", c.Action.Type)
	return outcome{}
}

// TestSpecSuiteDifferential runs every command of the WebAssembly spec suite (v1 and v2, as
// wazero ships it in its module) against the original modules and against their rewrites, in
// two runtimes side by side, and requires the same outcome for each: the same results or the
// same trap, the same instantiation success, and a refusal of every module wazero refuses.
func TestSpecSuiteDifferential(t *testing.T) {
	if raceEnabled {
		t.Skip("run without -race (make test runs this package so, as a step of its own)")
	}
	ctx := context.Background()
	base := filepath.Join(wazeroDir(t), "internal", "integration_test", "spectest")
	spectest, err := os.ReadFile(filepath.Join(base, "testdata", "spectest.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := specConfig()
	var files []string
	for _, v := range []string{"v1", "v2"} {
		m, _ := filepath.Glob(filepath.Join(base, v, "testdata", "*.json"))
		files = append(files, m...)
	}
	if len(files) < 100 {
		t.Fatalf("only %d spec files found", len(files))
	}
	var modules, assertions, refused int
	for _, file := range files {
		name := filepath.Base(filepath.Dir(filepath.Dir(file))) + "/" + strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var suite struct {
				Commands []specCommand `json:"commands"`
			}
			if err := json.Unmarshal(raw, &suite); err != nil {
				t.Fatal(err)
			}
			orig := newSpecRuntime(ctx, t, cfg, spectest, false)
			defer orig.rt.Close(ctx)
			rewr := newSpecRuntime(ctx, t, cfg, spectest, true)
			defer rewr.rt.Close(ctx)
			dir := filepath.Dir(file)
			read := func(c specCommand) []byte {
				b, err := os.ReadFile(filepath.Join(dir, c.Filename))
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			cmds := suite.Commands
			for i := 0; i < len(cmds); i++ {
				c := cmds[i]
				at := c.Type + " at line " + strconv.Itoa(c.Line)
				switch c.Type {
				case "module", "assert_unlinkable", "assert_uninstantiable":
					if c.ModuleType == "text" {
						continue
					}
					wasm := read(c)
					regName := ""
					if c.Type == "module" && i+1 < len(cmds) && cmds[i+1].Type == "register" {
						regName = cmds[i+1].As
						i++
					}
					if _, err := orig.rt.CompileModule(ctx, wasm); err != nil {
						t.Fatalf("%s: wazero refuses the original: %v", at, err)
					}
					res, err := Rewrite(wasm)
					if err != nil {
						t.Fatalf("%s: a module wazero compiles was refused: %v", at, err)
					}
					modules++
					mo, errO := orig.rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(regName))
					mr, errR := rewr.rt.InstantiateWithConfig(ctx, res.Wasm, wazero.NewModuleConfig().WithName(regName))
					if (errO == nil) != (errR == nil) {
						t.Fatalf("%s: instantiating the original: %v; the rewrite: %v", at, errO, errR)
					}
					if errO == nil && c.Type == "module" {
						if c.Name != "" {
							orig.modules[c.Name], rewr.modules[c.Name] = mo, mr
						}
						orig.last, rewr.last = mo, mr
					}
				case "register":
					// A register that does not follow its module registers a named one: wazero
					// names a module when it instantiates it, so these cases are skipped.
				case "assert_return", "action", "assert_trap", "assert_exhaustion":
					a, b := orig.act(ctx, t, c), rewr.act(ctx, t, c)
					if a.err != b.err || !slices.Equal(a.results, b.results) {
						t.Fatalf("%s %s %v: original %+v, rewrite %+v", at, c.Action.Field, c.Action.Args, a, b)
					}
					assertions++
				case "assert_invalid", "assert_malformed":
					if c.ModuleType == "text" {
						continue
					}
					wasm := read(c)
					if _, err := orig.rt.CompileModule(ctx, wasm); err == nil {
						continue // wazero accepts it: nothing to compare
					}
					res, err := Rewrite(wasm)
					if err == nil {
						if _, cerr := rewr.rt.CompileModule(ctx, res.Wasm); cerr == nil {
							t.Fatalf("%s: wazero refuses the module but accepts its rewrite", at)
						}
					} else if !errors.Is(err, ErrUnsupported) {
						t.Fatalf("%s: %v", at, err)
					}
					refused++
				}
			}
		})
	}
	t.Logf("%d modules, %d assertions, %d invalid modules refused, in %d files", modules, assertions, refused, len(files))
}

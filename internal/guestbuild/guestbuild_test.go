package guestbuild

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDetect(t *testing.T) {
	tests := []struct {
		name  string
		files []string
		want  Language
		err   string
	}{
		{"go module", []string{"go.mod"}, Go, ""},
		{"go files", []string{"main.go"}, Go, ""},
		{"assemblyscript", []string{"asconfig.json", "package.json"}, AssemblyScript, ""},
		{"assemblyscript wins over stray go files", []string{"asconfig.json", "x.go"}, AssemblyScript, ""},
		{"nothing", []string{"README.md"}, "", "holds no guest"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Detect(dir)
			if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Detect = %q, %v; want %q, %q", got, err, tc.want, tc.err)
			}
		})
	}
	if _, err := Detect(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing folder was detected")
	}
}

// module builds a WebAssembly binary with an import section importing each of imps
// ("module.name", functions of type 0; "memory module.name" for a memory).
func module(imps ...string) []byte {
	b := []byte{0, 'a', 's', 'm', 1, 0, 0, 0, 1, 4, 1, 0x60, 0, 0} // type section: () -> ()
	var sec []byte
	sec = append(sec, byte(len(imps)))
	for _, im := range imps {
		kind := byte(0)
		if m, ok := strings.CutPrefix(im, "memory "); ok {
			kind, im = 2, m
		}
		i := strings.LastIndex(im, ".")
		mod, name := im[:i], im[i+1:]
		sec = append(sec, byte(len(mod)))
		sec = append(sec, mod...)
		sec = append(sec, byte(len(name)))
		sec = append(sec, name...)
		sec = append(sec, kind)
		if kind == 2 {
			sec = append(sec, 0, 1)
		} else {
			sec = append(sec, 0)
		}
	}
	b = append(b, 2, byte(len(sec)))
	return append(b, sec...)
}

func TestCheckImports(t *testing.T) {
	tests := []struct {
		name string
		wasm []byte
		err  string
	}{
		{"what Pixie provides", module("wasi_snapshot_preview1.fd_write", "extism:host/env.alloc", "extism:host/user.pixie_context", "extism:host/user.pixie_judge"), ""},
		{"no imports", module(), ""},
		{"AssemblyScript's default abort", module("env.abort"), "function env.abort; env.abort is AssemblyScript's default abort"},
		{"Math.random", module("env.seed"), "env.seed is what AssemblyScript's Math.random imports"},
		{"an unknown host function", module("extism:host/user.pixie_exec"), "extism:host/user.pixie_exec"},
		{"an imported memory", module("memory env.memory"), "memory env.memory"},
		{"not wasm", []byte("hello"), "not a WebAssembly 1.0 module"},
		{"truncated", module("env.abort")[:20], "truncated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckImports(tc.wasm)
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("CheckImports: %v; want %q", err, tc.err)
			}
		})
	}
}

func TestUsesAbort(t *testing.T) {
	for raw, want := range map[string]bool{
		`["abort=assembly/index/myAbort"]`: true, `"Math=JSMath,abort=x/y"`: true, `["Math=JSMath"]`: false, ``: false, `null`: false,
	} {
		if got := usesAbort([]byte(raw)); got != want {
			t.Errorf("usesAbort(%s) = %v, want %v", raw, got, want)
		}
	}
}

func TestBuildRefusesWhatItCannotBuild(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ASConfig), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Build(t.Context(), dir, filepath.Join(t.TempDir(), "x.wasm"))
	if err == nil || !(strings.Contains(err.Error(), "run `npm ci`") || strings.Contains(err.Error(), "needs Node.js")) {
		t.Fatalf("an AssemblyScript guest without its compiler: %v", err)
	}
	if err := Build(t.Context(), dir, ""); err == nil {
		t.Fatal("no output file was accepted")
	}
}

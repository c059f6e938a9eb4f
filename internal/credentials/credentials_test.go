package credentials

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
)

func TestFile(t *testing.T) {
	ctx := context.Background()
	home := filepath.Join(t.TempDir(), "home") // does not exist yet
	f := Open(home)

	if _, ok, err := f.Get(ctx, "TYPESAFE_API_KEY"); err != nil || ok {
		t.Fatalf("Get on a missing file = ok %v, err %v", ok, err)
	}
	if err := f.Set(ctx, "TYPESAFE_API_KEY", "ts-secret-1"); err != nil {
		t.Fatal(err)
	}
	if err := f.Set(ctx, "lark.appSecret", "lark-secret"); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(f.Path())
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("file mode = %v, want 0600", st.Mode().Perm())
	}
	if dst, _ := os.Stat(home); dst.Mode().Perm() != 0o700 {
		t.Errorf("home mode = %v, want 0700", dst.Mode().Perm())
	}
	// A second handle (another process) sees the same values.
	g := Open(home)
	if v, ok, err := g.Get(ctx, "TYPESAFE_API_KEY"); err != nil || !ok || v != "ts-secret-1" {
		t.Fatalf("Get = %q %v %v", v, ok, err)
	}
	names, err := g.Names(ctx)
	if err != nil || strings.Join(names, ",") != "TYPESAFE_API_KEY,lark.appSecret" {
		t.Fatalf("Names = %v %v", names, err)
	}
	if err := g.Delete(ctx, "TYPESAFE_API_KEY"); err != nil {
		t.Fatal(err)
	}
	if err := g.Delete(ctx, "TYPESAFE_API_KEY"); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	if _, ok, _ := f.Get(ctx, "TYPESAFE_API_KEY"); ok {
		t.Error("deleted key still there")
	}
	if v, _, _ := f.Get(ctx, "lark.appSecret"); v != "lark-secret" {
		t.Errorf("other secret = %q", v)
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(home)
	if len(entries) != 1 {
		t.Errorf("home holds %d entries, want only %s", len(entries), FileName)
	}
}

func TestFileValidation(t *testing.T) {
	ctx := context.Background()
	f := Open(t.TempDir())
	tests := []struct {
		name, key, value string
		code             errs.Code
	}{
		{"empty name", "", "v", errs.Invalid},
		{"bad name", "a/b", "v", errs.Invalid},
		{"name at 128", strings.Repeat("a", 128), "v", ""},
		{"name at 129", strings.Repeat("a", 129), "v", errs.Invalid},
		{"empty value", "k", "", errs.Invalid},
		{"value at limit", "k", strings.Repeat("v", MaxValueSize), ""},
		{"value over limit", "k", strings.Repeat("v", MaxValueSize+1), errs.TooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := f.Set(ctx, tt.key, tt.value)
			if tt.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errs.Is(err, tt.code) {
				t.Fatalf("err = %v, want %s", err, tt.code)
			}
		})
	}
}

func TestCorruptFileHidesContents(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, FileName), []byte(`{"secrets": {"k": "hunter2-secret`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := Open(home).Get(context.Background(), "k")
	if err == nil || strings.Contains(fmt.Sprintf("%+v", err), "hunter2") {
		t.Fatalf("err = %v", err)
	}
}

func TestConcurrentSet(t *testing.T) {
	ctx := context.Background()
	f := Open(t.TempDir())
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.Set(ctx, fmt.Sprintf("k%d", i), "v"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	names, err := f.Names(ctx)
	if err != nil || len(names) != 20 {
		t.Fatalf("Names = %d %v", len(names), err)
	}
}

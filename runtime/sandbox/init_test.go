//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestFindInit puts each kind of file where the init program belongs, beside a pixie binary,
// and checks that only a runnable one with this binary's fingerprint is used. The test binary
// plays the good init (its TestMain answers FingerprintArg as InitMain does).
func TestFindInit(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		make    func(t *testing.T, p string)
		wantErr string // empty: the init is used
	}{
		{"good", func(t *testing.T, p string) { link(t, self, p) }, ""},
		{"missing", func(*testing.T, string) {}, "there is no pixie-sandbox beside"},
		{"directory", func(t *testing.T, p string) { mkdir(t, p) }, "is not an executable file"},
		{"not executable", func(t *testing.T, p string) { write(t, p, "#!/bin/sh\n", 0o644) }, "is not an executable file"},
		{"writable by the group", func(t *testing.T, p string) { copyFile(t, self, p, 0o775) }, "writable by others than its owner (mode 0775)"},
		{"writable by anyone", func(t *testing.T, p string) { copyFile(t, self, p, 0o757) }, "writable by others than its owner (mode 0757)"},
		{"other sources", func(t *testing.T, p string) { write(t, p, "#!/bin/sh\necho 0123456789abcdef0123\n", 0o755) }, "was built from other sources than"},
		{"empty answer", func(t *testing.T, p string) { write(t, p, "#!/bin/sh\n", 0o755) }, "was built from other sources than"},
		{"another user's", func(t *testing.T, p string) {
			if os.Geteuid() != 0 {
				t.Skip("only root can give a file away")
			}
			copyFile(t, self, p, 0o755)
			if err := os.Chown(p, 4242, 4242); err != nil {
				t.Fatal(err)
			}
		}, "belongs to another user (uid 4242)"},
		{"fails", func(t *testing.T, p string) { write(t, p, "#!/bin/sh\necho broken >&2; exit 3\n", 0o755) }, "does not run: exit status 3 broken"},
		{"not a program", func(t *testing.T, p string) { write(t, p, "\x7fELF garbage", 0o755) }, "does not run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			pixie := filepath.Join(dir, "pixie")
			write(t, pixie, "#!/bin/sh\n", 0o755)
			p := filepath.Join(dir, InitName)
			tt.make(t, p)
			got, err := FindInit(pixie)
			if tt.wantErr == "" {
				if err != nil || !reflect.DeepEqual(got, []string{p}) {
					t.Fatalf("FindInit = %q, %v; want [%s]", got, err, p)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || got != nil {
				t.Fatalf("FindInit = %q, %v; want an error with %q", got, err, tt.wantErr)
			}
		})
	}
}

// The fingerprint covers this package's and internal/confine's source: it is a 128-bit FNV-1a
// hash that stays the same within a binary.
func TestFingerprint(t *testing.T) {
	f := Fingerprint()
	if len(f) != 32 || strings.Trim(f, "0123456789abcdef") != "" || Fingerprint() != f {
		t.Fatalf("Fingerprint = %q", f)
	}
	for _, name := range []string{"sandbox_linux.go", "init.go"} {
		if _, err := ownSource.ReadFile(name); err != nil {
			t.Errorf("%s is not hashed: %v", name, err)
		}
	}
}

func link(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p, body string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	write(t, to, string(b), mode)
}

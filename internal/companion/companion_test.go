package companion

import (
	"testing"
	"testing/fstest"
)

// The fingerprint changes with any byte of any file, with a file's name, and with the package
// a file belongs to; it does not depend on the order the sources are listed in a package.
func TestFingerprint(t *testing.T) {
	src := func(files map[string]string) fstest.MapFS {
		m := fstest.MapFS{}
		for n, b := range files {
			m[n] = &fstest.MapFile{Data: []byte(b)}
		}
		return m
	}
	base := Fingerprint(Source{"a", src(map[string]string{"x.go": "package a", "y.go": "package a // y"})})
	if len(base) != 32 {
		t.Fatalf("Fingerprint = %q", base)
	}
	for name, other := range map[string]string{
		"a byte":      Fingerprint(Source{"a", src(map[string]string{"x.go": "package b", "y.go": "package a // y"})}),
		"a name":      Fingerprint(Source{"a", src(map[string]string{"z.go": "package a", "y.go": "package a // y"})}),
		"the package": Fingerprint(Source{"b", src(map[string]string{"x.go": "package a", "y.go": "package a // y"})}),
		"a file more": Fingerprint(Source{"a", src(map[string]string{"x.go": "package a", "y.go": "package a // y", "z.go": ""})}),
		"moved bytes": Fingerprint(Source{"a", src(map[string]string{"x.go": "package ", "y.go": "apackage a // y"})}),
	} {
		if other == base {
			t.Errorf("changing %s keeps the fingerprint", name)
		}
	}
	if again := Fingerprint(Source{"a", src(map[string]string{"y.go": "package a // y", "x.go": "package a"})}); again != base {
		t.Error("the same sources give another fingerprint")
	}
}

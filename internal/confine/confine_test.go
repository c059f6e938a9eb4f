package confine

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestWithin(t *testing.T) {
	tests := []struct {
		p, dir string
		want   bool
	}{
		{"/a/b", "/a", true},
		{"/a", "/a", true},
		{"/ab", "/a", false},
		{"/a/../b", "/a", true}, // callers pass clean paths; Within compares strings
		{"/x", "/", true},
		{"/", "/", true},
	}
	for _, tt := range tests {
		if got := Within(tt.p, tt.dir); got != tt.want {
			t.Errorf("Within(%q, %q) = %v, want %v", tt.p, tt.dir, got, tt.want)
		}
	}
}

func TestResolveFollowsEveryComponent(t *testing.T) {
	root, err := Resolve(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(root, "real", "home")
	if err := os.MkdirAll(real, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "real"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(root, "link", "home"), filepath.Join(root, "link", "..", "real", "home"), filepath.Join(root, "real", ".", "home")} {
		if got, err := Resolve(p); err != nil || got != real {
			t.Errorf("Resolve(%q) = %q, %v; want %q", p, got, err, real)
		}
	}
}

func TestAliasesFromTheMountTable(t *testing.T) {
	// The home /home/u/.pixie on 8:1 (mounted at /), with: a bind of the home at /mnt/b, a bind
	// of /home/u at /srv/u, a bind of data/ at /x, a second mount of all of 8:1 at /disk, a
	// mount nested inside the home (data on 8:2) that is also mounted at /d2, and unrelated
	// mounts.
	mounts := parseMountInfo(`22 1 8:1 / / rw - ext4 /dev/sda1 rw
23 22 8:1 /home/u/.pixie /mnt/b rw - ext4 /dev/sda1 rw
24 22 8:1 /home/u /srv/u rw - ext4 /dev/sda1 rw
25 22 8:1 /home/u/.pixie/data /x rw - ext4 /dev/sda1 rw
26 22 8:1 / /disk rw - ext4 /dev/sda1 rw
27 22 8:2 / /home/u/.pixie/store rw - ext4 /dev/sdb1 rw
28 22 8:2 / /d2 rw - ext4 /dev/sdb1 rw
29 22 8:1 /home/u/other /mnt/other rw - ext4 /dev/sda1 rw
30 22 0:5 / /proc rw - proc proc rw
31 22 8:1 /home/u /with\040space rw - ext4 /dev/sda1 rw
`)
	// Every candidate stats like what it should show, except /disk, which another mount hides.
	ids := map[string]fileID{
		"/home/u/.pixie":       {1, 100},
		"/srv/u/.pixie":        {1, 100},
		"/with space/.pixie":   {1, 100},
		"/home/u/.pixie/store": {2, 2},
		"/disk/home/u/.pixie":  {9, 9},
	}
	id := func(p string) (fileID, bool) { v, ok := ids[p]; return v, ok }
	got := aliases("/home/u/.pixie", mounts, id)
	want := []string{"/home/u/.pixie", "/d2", "/home/u/.pixie/store", "/mnt/b", "/srv/u/.pixie", "/with space/.pixie", "/x"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("aliases = %q\nwant      %q", got, want)
	}
}

func TestAliasesOfARealDirectory(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	real, _ := Resolve(dir)
	got, err := Aliases(link)
	if err != nil || len(got) == 0 || got[0] != real {
		t.Fatalf("Aliases(%s) = %q, %v; want %s first", link, got, err, real)
	}
	if got, err := Aliases(filepath.Join(dir, "missing")); err != nil || got != nil {
		t.Errorf("a missing directory: %q, %v", got, err)
	}
	if _, err := Aliases("/"); err == nil {
		t.Error("the root directory has aliases")
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/t\011x\012`: "/t\tx\n", `/b\134s`: `/b\s`, `/plain`: "/plain", `/bad\04`: `/bad\04`, `/x\999`: `/x\999`} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

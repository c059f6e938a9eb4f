//go:build linux

package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime"
)

const mountSecret = "tok-secret-9c1e"

// mountHome lays out a user dir with a Pixie home (.pixie) and a project beside it, and
// returns the user dir and the home.
func mountHome(t *testing.T) (user, home string) {
	t.Helper()
	user = t.TempDir()
	home = filepath.Join(user, ".pixie")
	for p, body := range map[string]string{
		".pixie/token":            mountSecret,
		".pixie/credentials.json": mountSecret,
		".pixie/data/MANIFEST":    mountSecret,
		"project/main.go":         "package main",
		"project/docs/readme":     "hello",
		"notes.txt":               "notes",
	} {
		full := filepath.Join(user, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return user, home
}

// hiddenEnv is an executor whose mount hides home.
func hiddenEnv(t *testing.T, home string) *testEnv {
	t.Helper()
	e, err := newEnv(context.Background(), t.TempDir(), Config{CacheDir: testutil.WasmCacheDir(t), Hidden: []string{home}, PoolSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	e.push(t, "testdata/fs-read", "fs-read")
	return e
}

// readAll runs fs-read over paths with cwd mounted.
func readAll(t *testing.T, e *testEnv, cwd string, paths ...string) (map[string]string, error) {
	t.Helper()
	res, err := e.run(t, runtime.Request{Ref: "fs-read", Cwd: cwd, Policy: runtime.PolicyReadOnly, MountCwd: true, Target: strings.Join(paths, "\n")})
	if err != nil {
		return nil, err
	}
	var out map[string]string
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		t.Fatalf("%q: %v", res.Stdout, err)
	}
	return out, nil
}

func requireNoSecret(t *testing.T, out map[string]string) {
	t.Helper()
	for p, v := range out {
		if strings.Contains(v, mountSecret) {
			t.Errorf("%s gave the secret: %q", p, v)
		}
	}
}

func TestMountNeverLeavesTheCwd(t *testing.T) {
	user, home := mountHome(t)
	e := hiddenEnv(t, home)
	cwd := filepath.Join(user, "project")
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "other"), []byte(mountSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"to-token":     filepath.Join(home, "token"),           // the attack: a link at the home's token
		"to-home":      home,                                   // a link at the home
		"to-outside":   filepath.Join(outside, "other"),        // an absolute link out
		"climb":        "../.pixie/token",                      // a relative link that climbs out
		"to-root":      "/",                                    // the root
		"to-proc-root": "/proc/self/root" + outside + "/other", // a magic link
		"inner":        "docs/readme",                          // a link that stays inside: fine
		"inner-dir":    "docs",                                 // likewise
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(cwd, name)); err != nil {
			t.Fatal(err)
		}
	}
	out, err := readAll(t, e, cwd, "/work/to-token", "/work/to-home/token", "/work/to-outside", "/work/climb",
		"/work/to-root/etc/hostname", "/work/to-proc-root", "/work/../.pixie/token", "/work/docs/../../.pixie/token",
		"/work/../notes.txt", "../notes.txt", "/work/inner", "/work/inner-dir/readme", "/work/main.go", "/work")
	if err != nil {
		t.Fatal(err)
	}
	requireNoSecret(t, out)
	for _, p := range []string{"/work/to-token", "/work/to-home/token", "/work/to-outside", "/work/climb", "/work/to-root/etc/hostname", "/work/to-proc-root", "/work/../notes.txt", "../notes.txt"} {
		if !strings.HasPrefix(out[p], "error:") {
			t.Errorf("%s: %q, want an error", p, out[p])
		}
	}
	for p, want := range map[string]string{"/work/inner": "file:hello", "/work/inner-dir/readme": "file:hello", "/work/main.go": "file:package main"} {
		if out[p] != want {
			t.Errorf("%s = %q, want %q", p, out[p], want)
		}
	}
	if !strings.Contains(out["/work"], "main.go") || !strings.Contains(out["/work"], "to-token") {
		t.Errorf("/work lists %q", out["/work"])
	}
}

func TestMountNeverShowsTheHome(t *testing.T) {
	user, home := mountHome(t)
	e := hiddenEnv(t, home)
	t.Run("cwd holds the home (~)", func(t *testing.T) {
		out, err := readAll(t, e, user, "/work", "/work/.pixie", "/work/.pixie/token", "/work/.pixie/data/MANIFEST", "/work/project/../.pixie/credentials.json", "/work/notes.txt")
		if err != nil {
			t.Fatal(err)
		}
		requireNoSecret(t, out)
		if out["/work"] != "dir:notes.txt,project" {
			t.Errorf("/work lists %q, want the home left out", out["/work"])
		}
		for _, p := range []string{"/work/.pixie", "/work/.pixie/token", "/work/.pixie/data/MANIFEST", "/work/project/../.pixie/credentials.json"} {
			if !strings.Contains(strings.ToLower(out[p]), "no such file") {
				t.Errorf("%s = %q, want it not to exist", p, out[p])
			}
		}
		if out["/work/notes.txt"] != "file:notes" {
			t.Errorf("notes.txt = %q", out["/work/notes.txt"])
		}
	})
	t.Run("cwd is a symlink to ~", func(t *testing.T) {
		link := filepath.Join(t.TempDir(), "me")
		if err := os.Symlink(user, link); err != nil {
			t.Fatal(err)
		}
		out, err := readAll(t, e, link, "/work", "/work/.pixie/token")
		if err != nil {
			t.Fatal(err)
		}
		requireNoSecret(t, out)
		if out["/work"] != "dir:notes.txt,project" {
			t.Errorf("/work lists %q", out["/work"])
		}
	})
	for name, cwd := range map[string]string{"the home": home, "inside the home": filepath.Join(home, "data")} {
		t.Run("cwd is "+name, func(t *testing.T) {
			out, err := readAll(t, e, cwd, "/work/token", "/work/MANIFEST")
			if err == nil || !errors.Is(err, runtime.ErrUnsupported) || !strings.Contains(err.Error(), "inside the Pixie home") {
				t.Fatalf("err = %v (out %v), want the mount refused", err, out)
			}
		})
	}
	t.Run("cwd is a symlink into the home", func(t *testing.T) {
		link := filepath.Join(t.TempDir(), "data")
		if err := os.Symlink(filepath.Join(home, "data"), link); err != nil {
			t.Fatal(err)
		}
		if _, err := readAll(t, e, link, "/work/MANIFEST"); !errors.Is(err, runtime.ErrUnsupported) {
			t.Fatalf("err = %v, want the mount refused", err)
		}
	})
	t.Run("the home bound under another name inside the cwd", func(t *testing.T) {
		target := filepath.Join(user, "project", "mnt")
		if err := os.Mkdir(target, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount(home, target, "", unix.MS_BIND, ""); err != nil {
			t.Skipf("cannot bind-mount here (%v); needs root", err)
		}
		t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })
		out, err := readAll(t, e, filepath.Join(user, "project"), "/work", "/work/mnt", "/work/mnt/token", "/work/mnt/data/MANIFEST")
		if err != nil {
			t.Fatal(err)
		}
		requireNoSecret(t, out)
		if strings.Contains(out["/work"], "mnt") {
			t.Errorf("/work lists the bind: %q", out["/work"])
		}
	})
	t.Run("cwd is /", func(t *testing.T) {
		out, err := readAll(t, e, "/", "/work"+home+"/token", "/work"+filepath.Dir(home))
		if err != nil {
			t.Fatal(err)
		}
		requireNoSecret(t, out)
		if strings.Contains(out["/work"+filepath.Dir(home)], ".pixie") {
			t.Errorf("the home's parent lists it: %q", out["/work"+filepath.Dir(home)])
		}
	})
}

// TestMountRemembersTheCwd: a cwd's resolved path is remembered for aliasTTL (homeAliases), and
// what changes meanwhile never shows the home: a link re-pointed at it still mounts what it
// pointed at, a component replaced by a link to it is refused, and once the second is over
// the link's new target is refused as inside the home.
func TestMountRemembersTheCwd(t *testing.T) {
	user, home := mountHome(t)
	e := hiddenEnv(t, home)
	project := filepath.Join(user, "project")
	link := filepath.Join(t.TempDir(), "proj")
	if err := os.Symlink(project, link); err != nil {
		t.Fatal(err)
	}
	for _, cwd := range []string{link, project} { // both remembered
		if out, err := readAll(t, e, cwd, "/work/main.go"); err != nil || out["/work/main.go"] != "file:package main" {
			t.Fatalf("cwd %s: %v %v", cwd, out, err)
		}
	}
	resolvedAt := time.Now()

	t.Run("a link re-pointed at the home", func(t *testing.T) {
		if err := os.Remove(link); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(home, link); err != nil {
			t.Fatal(err)
		}
		out, err := readAll(t, e, link, "/work/token", "/work/main.go")
		if time.Since(resolvedAt) >= aliasTTL {
			t.Skip("the machine took longer than aliasTTL: the link was resolved again")
		}
		if err != nil {
			t.Fatalf("within the second: %v, want the remembered project mounted", err)
		}
		requireNoSecret(t, out)
		if out["/work/main.go"] != "file:package main" {
			t.Fatalf("/work/main.go = %q, want the project's", out["/work/main.go"])
		}
	})

	// The remembered descriptor is the project directory itself: moved away and replaced by a
	// link to the home, it is still what is mounted (wherever it is now) for the rest of the
	// second, never the link's target.
	t.Run("a component replaced by a link to the home", func(t *testing.T) {
		if err := os.Rename(project, project+".moved"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(home, project); err != nil {
			t.Fatal(err)
		}
		out, err := readAll(t, e, project, "/work/token", "/work/main.go")
		if time.Since(resolvedAt) >= aliasTTL {
			t.Skip("the machine took longer than aliasTTL: the cwd was opened again")
		}
		if err != nil {
			t.Fatalf("within the second: %v, want the remembered project mounted", err)
		}
		requireNoSecret(t, out)
		if out["/work/main.go"] != "file:package main" {
			t.Fatalf("/work/main.go = %q, want the moved project's", out["/work/main.go"])
		}
	})

	t.Run("once the second is over", func(t *testing.T) {
		time.Sleep(time.Until(resolvedAt.Add(aliasTTL + 50*time.Millisecond)))
		for _, cwd := range []string{link, project} {
			out, err := readAll(t, e, cwd, "/work/token")
			if err == nil || !strings.Contains(err.Error(), "inside the Pixie home") {
				t.Fatalf("cwd %s: err %v (out %v), want the mount refused as inside the home", cwd, err, out)
			}
		}
	})
}

// The cwd's descriptor is shared by the cache and the mounts bound to it: a mount holds it
// open after the cache forgets it, and the last one to let go closes it. Past
// maxRememberedDirs a cwd's descriptor is its mount's alone.
func TestMountSharesTheCwdDescriptor(t *testing.T) {
	c := &aliasCache{}
	dir := t.TempDir()
	b1, err := c.bind(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := c.bind(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b1.dir != b2.dir || b1.dir.refs.Load() != 3 {
		t.Fatalf("two binds: descriptors %p %p, %d references; want one shared, 3 (the cache's and two)", b1.dir, b2.dir, b1.dir.refs.Load())
	}
	forget := func() {
		c.mu.Lock()
		c.at = time.Now().Add(-2 * aliasTTL)
		c.freshLocked()
		c.mu.Unlock()
	}
	b1.dir.drop()
	forget()
	d := b2.dir
	if n := d.refs.Load(); n != 1 {
		t.Fatalf("forgotten with one mount left: %d references, want 1", n)
	}
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		t.Fatalf("the mount's descriptor after the cache forgot it: %v", err)
	}
	d.drop()
	if n := d.refs.Load(); n != 0 {
		t.Fatalf("after the last mount: %d references, want 0 (closed)", n)
	}
	b3, err := c.bind(dir, nil)
	if err != nil || b3.dir == d {
		t.Fatalf("a bind after forgetting: %v, same descriptor %v; want a new one", err, b3.dir == d)
	}
	b3.dir.drop()

	for i := len(c.dirs); i < maxRememberedDirs; i++ {
		sub := filepath.Join(t.TempDir(), "d")
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := c.bind(sub, nil)
		if err != nil {
			t.Fatal(err)
		}
		b.dir.drop()
	}
	extra := t.TempDir()
	b, err := c.bind(extra, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := b.dir.refs.Load(); n != 1 || len(c.dirs) != maxRememberedDirs {
		t.Fatalf("past the cap: %d references, %d remembered; want 1 (the mount's alone), %d", n, len(c.dirs), maxRememberedDirs)
	}
	b.dir.drop()
	forget()
}

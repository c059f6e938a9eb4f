//go:build linux

package sandbox

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/pixie-dev/pixie/runtime"
)

// isolations returns the ways this machine can contain a run: without namespaces always, with
// them when Detect finds them.
func isolations(t *testing.T) map[string]Isolation {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Isolation{"no namespaces": {Reason: "forced by the test"}}
	if iso := Detect([]string{exe, Verb}); iso.Namespaces {
		out["namespaces"] = iso
		if parentRulesets {
			// TestParentRulesets runs these again in the isolation the executor uses here (the
			// other is covered by the tests through sandboxed, which has no namespaces).
			delete(out, "no namespaces")
		}
	} else {
		t.Logf("no namespaces here: %s", iso.Reason)
	}
	return out
}

// sandboxedIn runs `bash -c script` through the verb, started as Isolation iso starts it.
func sandboxedIn(t *testing.T, iso Isolation, env []string, o Options, script string) outcome {
	t.Helper()
	return sandboxedWith(t, iso, env, o, script, parentRuleset(t, iso.Namespaces, &o))
}

// sandboxedWith is sandboxedIn with the verb given ruleset (Options.RulesetFD) when not nil.
func sandboxedWith(t *testing.T, iso Isolation, env []string, o Options, script string, ruleset *os.File) outcome {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	o.StatusFD = 3
	o.Namespaces = iso.Namespaces
	cmd := exec.Command(exe, append([]string{Verb}, o.Args(bash, "-c", script)...)...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "LANG=C", noExitSleep}, env...)
	cmd.ExtraFiles = []*os.File{w}
	if ruleset != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, ruleset)
	}
	cmd.SysProcAttr = iso.Attr()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	status, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return outcome{exit: cmd.ProcessState.ExitCode(), status: string(status), stdout: stdout.String(), stderr: stderr.String()}
}

// pixieHome lays out a user's home dir with a Pixie home inside it, as `make run` and the
// default ~/.pixie do: the admin token, the credentials, the store and the blobs.
type pixieHome struct {
	user, home string
}

const secret = "tok-secret-7f3a"

func newPixieHome(t *testing.T) pixieHome {
	t.Helper()
	user := t.TempDir()
	home := filepath.Join(user, ".pixie")
	for p, body := range map[string]string{
		"token":                secret,
		"credentials.json":     `{"openai":"` + secret + `"}`,
		"data/MANIFEST":        secret,
		"blobs/ab/abcdef":      secret,
		"commands/hook.sh":     "echo hook",
		"../project/main.go":   "package main",
		"../project/.git/HEAD": "ref: refs/heads/main",
	} {
		full := filepath.Join(home, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return pixieHome{user: user, home: home}
}

// state lists every file of the Pixie home with its content.
func (h pixieHome) state(t *testing.T) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(h.home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		line := strings.TrimPrefix(p, h.home)
		if !d.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += "=" + string(b)
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// attack tries every way to read and change the Pixie home at $H (also reached as $ALT when
// set); it prints LEAK or WROTE when one works.
const attack = `
try() { if out=$(eval "$1" 2>/dev/null) && [ -n "$out" ]; then case "$out" in *tok-secret*) echo "LEAK($1)";; esac; fi; }
for base in "$H" "$ALT" ./.pixie .pixie ../.pixie ~/.pixie; do
  [ -n "$base" ] || continue
  for f in token credentials.json data/MANIFEST blobs/ab/abcdef; do try "cat '$base/$f'"; done
  try "grep -r tok-secret '$base'"
  echo x > "$base/new" 2>/dev/null && echo "WROTE($base/new)"
  echo x >> "$base/token" 2>/dev/null && echo "WROTE($base/token)"
  mkdir "$base/data/x" 2>/dev/null && echo "WROTE($base/data/x)"
  rm -f "$base/credentials.json" 2>/dev/null # the test checks the home is unchanged
  mv "$base/token" "$base/token2" 2>/dev/null && echo "WROTE(mv token)"
done
[ "$PWD" = / ] || try "grep -r tok-secret . 2>/dev/null"
for l in leak leakdir; do [ -e "$l" ] && try "cat $l $l/token"; done
echo done
`

// TestPixieHomeIsNeverReachable runs the attack from every cwd the issue names (containing the
// home, inside it, a symlink to either, ~, /, a link planted in the cwd) under read-only and
// workspace-write, with and without namespaces. Each run either refuses to start with a clear
// "unsupported" reason, or runs and reaches nothing; the home is unchanged afterwards.
func TestPixieHomeIsNeverReachable(t *testing.T) {
	requireLandlock(t)
	h := newPixieHome(t)
	links := t.TempDir()
	for name, target := range map[string]string{"to-user": h.user, "to-home": h.home, "to-data": filepath.Join(h.home, "data")} {
		if err := os.Symlink(target, filepath.Join(links, name)); err != nil {
			t.Fatal(err)
		}
	}
	planted := t.TempDir()
	if err := os.Symlink(filepath.Join(h.home, "token"), filepath.Join(planted, "leak")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(h.home, filepath.Join(planted, "leakdir")); err != nil {
		t.Fatal(err)
	}
	// The attack works where nothing stops it, so a pass below means something.
	control := newPixieHome(t)
	out := sandboxedIn(t, Isolation{}, []string{"H=" + control.home, "HOME=" + control.user}, Options{Policy: runtime.PolicyFull, Cwd: control.user}, attack)
	if !strings.Contains(out.stdout, "LEAK(cat") || !strings.Contains(out.stdout, "WROTE(") {
		t.Fatalf("the attack reaches nothing even unconfined: %q %q", out.stdout, out.stderr)
	}
	before := h.state(t)
	cwds := []struct {
		name, cwd string
		inside    bool // the cwd resolves inside the home: always refused
		holds     bool // the cwd holds the home: workspace-write needs a mount namespace
	}{
		{"user home (~)", h.user, false, true},
		{"the Pixie home", h.home, true, false},
		{"inside the home (data/)", filepath.Join(h.home, "data"), true, false},
		{"symlink to ~", filepath.Join(links, "to-user"), false, true},
		{"symlink to the home", filepath.Join(links, "to-home"), true, false},
		{"symlink into data/", filepath.Join(links, "to-data"), true, false},
		{"project beside the home", filepath.Join(h.user, "project"), false, false},
		{"links planted in the cwd", planted, false, false},
		{"root /", "/", false, true},
	}
	for isoName, iso := range isolations(t) {
		for _, c := range cwds {
			for _, p := range []runtime.Policy{runtime.PolicyReadOnly, runtime.PolicyWorkspaceWrite} {
				t.Run(isoName+"/"+c.name+"/"+string(p), func(t *testing.T) {
					o := Options{Policy: p, Cwd: c.cwd, Hidden: []string{h.home}, Writable: []string{t.TempDir()}}
					out := sandboxedIn(t, iso, []string{"H=" + h.home, "HOME=" + h.user}, o, attack)
					refused := c.inside || (c.holds && p == runtime.PolicyWorkspaceWrite && !iso.Namespaces)
					switch {
					case refused:
						if out.exit != ExitFailure || !strings.HasPrefix(out.status, statusUnsupported) {
							t.Fatalf("want a refusal; exit %d status %q stdout %q", out.exit, out.status, out.stdout)
						}
						t.Logf("refused: %s", strings.TrimSpace(out.status))
					case out.status != "" || !strings.HasSuffix(out.stdout, "done\n"):
						t.Fatalf("the run failed: exit %d status %q stdout %q stderr %q", out.exit, out.status, out.stdout, out.stderr)
					}
					if strings.Contains(out.stdout, "LEAK") || strings.Contains(out.stdout, "WROTE") || strings.Contains(out.stdout+out.stderr, secret) {
						t.Fatalf("the home was reached:\n%s", out.stdout)
					}
					if after := h.state(t); after != before {
						t.Fatalf("the home changed:\n%s\nwant\n%s", after, before)
					}
				})
			}
		}
	}
}

// TestPixieHomeThroughABindMount: the home bind-mounted under another name (and a bind of the
// user's home) is hidden too: the sandbox finds every alias in the mount table.
func TestPixieHomeThroughABindMount(t *testing.T) {
	requireLandlock(t)
	h := newPixieHome(t)
	other := t.TempDir()
	binds := map[string]string{filepath.Join(other, "renamed"): h.home, filepath.Join(other, "user-again"): h.user}
	for target, src := range binds {
		if err := os.Mkdir(target, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
			t.Skipf("cannot bind-mount here (%v); needs root", err)
		}
		t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })
	}
	before := h.state(t)
	for isoName, iso := range isolations(t) {
		for _, alt := range []string{filepath.Join(other, "renamed"), filepath.Join(other, "user-again", ".pixie")} {
			for _, p := range []runtime.Policy{runtime.PolicyReadOnly, runtime.PolicyWorkspaceWrite} {
				for _, cwd := range []string{other, t.TempDir()} {
					t.Run(isoName+"/"+filepath.Base(alt)+"/"+string(p), func(t *testing.T) {
						o := Options{Policy: p, Cwd: cwd, Hidden: []string{h.home}}
						out := sandboxedIn(t, iso, []string{"H=" + h.home, "ALT=" + alt}, o, attack)
						if cwd == other && p == runtime.PolicyWorkspaceWrite && !iso.Namespaces {
							if !strings.HasPrefix(out.status, statusUnsupported) {
								t.Fatalf("want a refusal, got exit %d status %q", out.exit, out.status)
							}
							return
						}
						if out.status != "" || !strings.HasSuffix(out.stdout, "done\n") {
							t.Fatalf("the run failed: exit %d status %q stdout %q stderr %q", out.exit, out.status, out.stdout, out.stderr)
						}
						if strings.Contains(out.stdout, "LEAK") || strings.Contains(out.stdout, "WROTE") {
							t.Fatalf("the home was reached through %s:\n%s", alt, out.stdout)
						}
						if after := h.state(t); after != before {
							t.Fatalf("the home changed:\n%s", after)
						}
					})
				}
			}
		}
	}
	// A cwd inside an alias is inside the home.
	for isoName, iso := range isolations(t) {
		out := sandboxedIn(t, iso, nil, Options{Policy: runtime.PolicyReadOnly, Cwd: filepath.Join(other, "renamed", "data"), Hidden: []string{h.home}}, "cat MANIFEST")
		if !strings.HasPrefix(out.status, statusUnsupported) || strings.Contains(out.stdout, secret) {
			t.Errorf("%s: cwd inside a bind of the home: exit %d status %q stdout %q", isoName, out.exit, out.status, out.stdout)
		}
	}
}

// TestHomeScriptStillRuns: with the cwd at ~ under workspace-write, the hook script and the
// helper that live inside the home (commands/) stay readable, read-only, and nothing else does.
func TestHomeScriptStillRuns(t *testing.T) {
	requireLandlock(t)
	h := newPixieHome(t)
	script := filepath.Join(h.home, "commands", "hook.sh")
	for isoName, iso := range isolations(t) {
		if !iso.Namespaces {
			continue // workspace-write at ~ is refused there (TestPixieHomeIsNeverReachable)
		}
		t.Run(isoName, func(t *testing.T) {
			o := Options{Policy: runtime.PolicyWorkspaceWrite, Cwd: h.user, Hidden: []string{h.home}, Readable: []string{script}}
			out := sandboxedIn(t, iso, nil, o, "bash "+script+"; echo x >> "+script+" || echo script-read-only; cat .pixie/token || echo token-hidden; echo w > notes && echo cwd-writable")
			if out.status != "" {
				t.Fatalf("status %q stderr %q", out.status, out.stderr)
			}
			if want := "hook\nscript-read-only\ntoken-hidden\ncwd-writable\n"; out.stdout != want {
				t.Fatalf("stdout %q, want %q (stderr %q)", out.stdout, want, out.stderr)
			}
		})
	}
}

// TestRootScriptCannotReadTheDisk: a confined script started as root cannot read a block
// device (which would bypass every path rule) nor make one.
func TestRootScriptCannotReadTheDisk(t *testing.T) {
	requireLandlock(t)
	if os.Geteuid() != 0 {
		t.Skip("only root can read block devices")
	}
	var dev string
	entries, _ := os.ReadDir("/dev")
	for _, e := range entries {
		if e.Type()&fs.ModeDevice != 0 && e.Type()&fs.ModeCharDevice == 0 {
			dev = "/dev/" + e.Name()
			break
		}
	}
	scratch := t.TempDir()
	script := "mknod " + scratch + "/disk b 7 0 && echo made; "
	if dev != "" {
		script += "head -c 512 " + dev + " >/dev/null && echo read-disk; "
	}
	script += "echo end"
	for isoName, iso := range isolations(t) {
		out := sandboxedIn(t, iso, nil, Options{Policy: runtime.PolicyWorkspaceWrite, Cwd: t.TempDir(), Writable: []string{scratch}}, script)
		if out.status != "" || out.stdout != "end\n" {
			t.Errorf("%s: stdout %q status %q stderr %q", isoName, out.stdout, out.status, out.stderr)
		}
	}
}

// TestMaskHidesTheHomeUnderTheFullPolicy: with Mask, a full-policy run (no Landlock) reaches
// nothing of the home from any cwd outside it, a root run cannot unmount the cover, and a run
// without a mount namespace, or with its cwd inside the home, is refused instead of running
// with the home in view.
func TestMaskHidesTheHomeUnderTheFullPolicy(t *testing.T) {
	h := newPixieHome(t)
	before := h.state(t)
	const unmount = `umount -l "$H" 2>/dev/null && echo UNMOUNTED; umount "$H" 2>/dev/null && echo UNMOUNTED; ` + attack
	for isoName, iso := range isolations(t) {
		for _, c := range []struct{ name, cwd string }{{"user home (~)", h.user}, {"project", filepath.Join(h.user, "project")}, {"root /", "/"}, {"inside the home", filepath.Join(h.home, "data")}} {
			t.Run(isoName+"/"+c.name, func(t *testing.T) {
				o := Options{Policy: runtime.PolicyFull, Mask: true, Cwd: c.cwd, Hidden: []string{h.home}}
				out := sandboxedIn(t, iso, []string{"H=" + h.home, "HOME=" + h.user}, o, unmount)
				if !iso.Namespaces || strings.HasPrefix(c.cwd, h.home) {
					if out.exit != ExitFailure || !strings.HasPrefix(out.status, statusUnsupported) {
						t.Fatalf("want a refusal; exit %d status %q stdout %q", out.exit, out.status, out.stdout)
					}
					return
				}
				if out.status != "" || !strings.HasSuffix(out.stdout, "done\n") {
					t.Fatalf("the run failed: exit %d status %q stdout %q stderr %q", out.exit, out.status, out.stdout, out.stderr)
				}
				if strings.Contains(out.stdout, "LEAK") || strings.Contains(out.stdout, "WROTE") || strings.Contains(out.stdout, "UNMOUNTED") {
					t.Fatalf("the home was reached:\n%s", out.stdout)
				}
				if after := h.state(t); after != before {
					t.Fatalf("the home changed:\n%s", after)
				}
			})
		}
	}
	// Without Mask the full policy hides nothing: the control that makes the pass above mean
	// something.
	out := sandboxedIn(t, Isolation{}, []string{"H=" + h.home, "HOME=" + h.user}, Options{Policy: runtime.PolicyFull, Cwd: h.user, Hidden: []string{h.home}}, attack)
	if !strings.Contains(out.stdout, "LEAK(cat") {
		t.Fatalf("unmasked full policy reached nothing: %q", out.stdout)
	}
}

package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/runtime"
)

// fakeABIEnv makes the re-executed test binary pretend the kernel offers this Landlock ABI.
const fakeABIEnv = "PIXIE_SANDBOX_TEST_FAKE_ABI"

// noExitSleep keeps the re-executed test binary, when built with -race, from sleeping a second
// before it exits (the race detector's atexit_sleep_ms): a second per run of the verb.
const noExitSleep = "GORACE=atexit_sleep_ms=0"

// TestMain lets the test binary play the pixie binary: `<test binary> __sandbox …` runs Main.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == Verb {
		if v := os.Getenv(fakeABIEnv); v != "" {
			n, _ := strconv.Atoi(v)
			kernelABI = func() int { return n }
		}
		os.Exit(Main(os.Args[2:]))
	}
	if len(os.Args) == 2 && os.Args[1] == FingerprintArg {
		// Playing the init program (cmd/pixie-sandbox) for TestFindInit.
		os.Exit(InitMain(os.Args[1:], os.Stdout))
	}
	// The verbs this process starts with its environment (Detect's probe, FindInit's) too.
	_ = os.Setenv("GORACE", strings.TrimPrefix(noExitSleep, "GORACE="))
	os.Exit(m.Run())
}

type outcome struct {
	exit           int
	status         string
	stdout, stderr string
}

// sandboxed runs `sh -c script` through the verb with o, returning what happened.
func sandboxed(t *testing.T, env []string, o Options, script string) outcome {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	o.StatusFD = 3
	ruleset := parentRuleset(t, false, &o)
	cmd := exec.Command(exe, append([]string{Verb}, o.Args(sh, "-c", script)...)...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "LANG=C", noExitSleep}, env...)
	cmd.ExtraFiles = []*os.File{w}
	if ruleset != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, ruleset)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
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

func requireLandlock(t *testing.T) {
	t.Helper()
	if err := Probe(); err != nil {
		t.Skipf("Landlock cannot be enforced here (%v); the fail-closed path is covered by TestUnsupportedFailsClosed", err)
	}
}

func TestOptionsArgsRoundTrip(t *testing.T) {
	o := Options{
		Policy:   runtime.PolicyWorkspaceWrite,
		Cwd:      "/work/project",
		Writable: []string{"/tmp/run-1"},
		Readable: []string{"/srv/scripts/a.sh", "/opt/pixie/bin"},
		Hidden:   []string{"/var/lib/pixie"},
		MinABI:   5,
		Mask:     true,
		StatusFD: 3,
	}
	got, argv, err := parse(o.Args("/bin/bash", "/srv/scripts/a.sh", "--x"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, o) {
		t.Errorf("parse(Args) = %+v, want %+v", got, o)
	}
	if want := []string{"/bin/bash", "/srv/scripts/a.sh", "--x"}; !reflect.DeepEqual(argv, want) {
		t.Errorf("argv = %q, want %q", argv, want)
	}
}

func TestParseRejects(t *testing.T) {
	ok := Options{Policy: runtime.PolicyReadOnly, Cwd: "/w"}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no policy", Options{Cwd: "/w"}.Args("/bin/sh"), "unknown sandbox policy"},
		{"bad policy", Options{Policy: "sometimes", Cwd: "/w"}.Args("/bin/sh"), "unknown sandbox policy"},
		{"relative cwd", Options{Policy: runtime.PolicyReadOnly, Cwd: "w"}.Args("/bin/sh"), "cwd \"w\" is not an absolute path"},
		{"no cwd", Options{Policy: runtime.PolicyReadOnly}.Args("/bin/sh"), "is not an absolute path"},
		{"relative program", ok.Args("sh"), "program \"sh\" is not an absolute path"},
		{"no program", append(Options{Policy: runtime.PolicyReadOnly, Cwd: "/w"}.Args("/bin/sh")[:4], "--"), "no program to run"},
		{"relative writable", Options{Policy: runtime.PolicyReadOnly, Cwd: "/w", Writable: []string{"tmp"}}.Args("/bin/sh"), "path \"tmp\" is not absolute"},
		{"hide root", Options{Policy: runtime.PolicyReadOnly, Cwd: "/w", Hidden: []string{"/"}}.Args("/bin/sh"), "root directory cannot be hidden"},
		{"abi too low", Options{Policy: runtime.PolicyReadOnly, Cwd: "/w", MinABI: 2}.Args("/bin/sh"), "outside 3..11"},
		{"abi too high", Options{Policy: runtime.PolicyReadOnly, Cwd: "/w", MinABI: 12}.Args("/bin/sh"), "outside 3..11"},
		{"status fd on stderr", Options{Policy: runtime.PolicyReadOnly, Cwd: "/w", StatusFD: 2}.Args("/bin/sh"), "not above stderr"},
		{"unknown flag", append([]string{"-nope"}, ok.Args("/bin/sh")...), "usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := parse(tt.args)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("parse(%q) error = %v, want it to contain %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestDecodeStatus(t *testing.T) {
	if sig, err := DecodeStatus(nil); err != nil || sig != 0 {
		t.Errorf("empty status: %d, %v", sig, err)
	}
	if sig, err := DecodeStatus([]byte("signal: 9\n")); err != nil || sig != 9 {
		t.Errorf("signal status: %d, %v", sig, err)
	}
	if _, err := DecodeStatus([]byte("signal: x\n")); errs.CodeOf(err) != errs.Internal {
		t.Errorf("bad signal status: %v", err)
	}
	_, err := DecodeStatus([]byte("unsupported: the kernel offers Landlock ABI v2; the sandbox needs v3\n"))
	if !errors.Is(err, runtime.ErrUnsupported) || errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("unsupported status: %v (code %s)", err, errs.CodeOf(err))
	}
	if want := "hook-script-unsupported: the kernel offers Landlock ABI v2; the sandbox needs v3"; err.Error() != want {
		t.Errorf("message = %q, want %q", err, want)
	}
	_, err = DecodeStatus([]byte("error: cwd: no such file or directory\n"))
	if err == nil || errors.Is(err, runtime.ErrUnsupported) || errs.CodeOf(err) != errs.Internal || err.Error() != "sandbox: cwd: no such file or directory" {
		t.Errorf("error status: %v (code %s)", err, errs.CodeOf(err))
	}
}

func TestProbe(t *testing.T) {
	err := Probe()
	t.Logf("kernel Landlock ABI v%d, Probe() = %v", KernelABI(), err)
	if (KernelABI() >= MinABI) != (err == nil) {
		t.Fatalf("Probe() = %v with kernel ABI v%d", err, KernelABI())
	}
	if err != nil && !errors.Is(err, runtime.ErrUnsupported) {
		t.Fatalf("Probe() = %v, want it to wrap ErrUnsupported", err)
	}
}

func TestUnsupportedFailsClosed(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		o    Options
		want string
	}{
		{"no landlock", []string{fakeABIEnv + "=0"}, Options{Policy: runtime.PolicyReadOnly}, "Landlock is not available"},
		{"abi v2", []string{fakeABIEnv + "=2"}, Options{Policy: runtime.PolicyWorkspaceWrite}, "the kernel offers Landlock ABI v2; the sandbox needs v3"},
		{"min abi above kernel", []string{fakeABIEnv + "=7"}, Options{Policy: runtime.PolicyReadOnly, MinABI: 8}, "the kernel offers Landlock ABI v7; the sandbox needs v8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cwd := t.TempDir()
			tt.o.Cwd = cwd
			out := sandboxed(t, tt.env, tt.o, "echo ran > marker")
			if out.exit != ExitFailure {
				t.Errorf("exit = %d, want %d", out.exit, ExitFailure)
			}
			if !strings.HasPrefix(out.status, statusUnsupported) || !strings.Contains(out.status, tt.want) {
				t.Errorf("status = %q, want unsupported with %q", out.status, tt.want)
			}
			if _, err := os.Stat(filepath.Join(cwd, "marker")); !os.IsNotExist(err) {
				t.Errorf("the program ran although the sandbox failed (stat: %v)", err)
			}
		})
	}
}

func TestFullPolicyNeedsNoLandlock(t *testing.T) {
	cwd := t.TempDir()
	out := sandboxed(t, []string{fakeABIEnv + "=0"}, Options{Policy: runtime.PolicyFull, Cwd: cwd}, "echo ran > marker; pwd")
	if out.exit != 0 || out.status != "" {
		t.Fatalf("full policy: exit %d status %q stderr %q", out.exit, out.status, out.stderr)
	}
	if strings.TrimSpace(out.stdout) != cwd {
		t.Errorf("pwd = %q, want %q", out.stdout, cwd)
	}
	if _, err := os.Stat(filepath.Join(cwd, "marker")); err != nil {
		t.Errorf("full policy could not write: %v", err)
	}
}

func TestSetupErrorsAreNotUnsupported(t *testing.T) {
	out := sandboxed(t, nil, Options{Policy: runtime.PolicyFull, Cwd: filepath.Join(t.TempDir(), "gone")}, "true")
	if out.exit != ExitFailure || !strings.HasPrefix(out.status, statusError+"cwd:") {
		t.Fatalf("exit %d status %q", out.exit, out.status)
	}
	if _, err := DecodeStatus([]byte(out.status)); errors.Is(err, runtime.ErrUnsupported) {
		t.Errorf("a missing cwd decoded as unsupported: %v", err)
	}
}

func TestReadOnly(t *testing.T) {
	requireLandlock(t)
	cwd, scratch := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(cwd, "in.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := Options{Policy: runtime.PolicyReadOnly, Cwd: cwd, Writable: []string{scratch}}
	tests := []struct {
		name, script string
		ok           bool
	}{
		{"read a file", "cat in.txt", true},
		{"list cwd", "ls", true},
		{"run programs", "/bin/true && sh -c true", true},
		{"write to /dev/null", "echo x > /dev/null", true},
		{"write to the scratch dir", "echo x > " + scratch + "/f && mkdir " + scratch + "/d && mv " + scratch + "/f " + scratch + "/d/", true},
		{"create in cwd", "echo x > new.txt", false},
		{"overwrite in cwd", "echo x > in.txt", false},
		{"append in cwd", "echo x >> in.txt", false},
		{"truncate in cwd", "truncate -s 0 in.txt", false},
		{"remove in cwd", "rm -f in.txt", false},
		{"mkdir in cwd", "mkdir sub", false},
		{"symlink in cwd", "ln -s in.txt l", false},
		{"write to /tmp", "echo x > /tmp/pixie-sandbox-test-$$", false},
		{"move out of the scratch dir", "echo x > " + scratch + "/g && mv " + scratch + "/g ./g", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := sandboxed(t, nil, o, tt.script)
			if out.status != "" {
				t.Fatalf("sandbox failed: %s", out.status)
			}
			if (out.exit == 0) != tt.ok {
				t.Fatalf("exit %d (want success %v); stderr %q", out.exit, tt.ok, out.stderr)
			}
		})
	}
	got, err := os.ReadFile(filepath.Join(cwd, "in.txt"))
	if err != nil || string(got) != "hello" {
		t.Fatalf("in.txt = %q, %v; the read-only run changed it", got, err)
	}
	entries, _ := os.ReadDir(cwd)
	if len(entries) != 1 {
		t.Errorf("cwd holds %d entries after read-only runs, want only in.txt", len(entries))
	}
}

func TestWorkspaceWrite(t *testing.T) {
	requireLandlock(t)
	cwd, outside := t.TempDir(), t.TempDir()
	o := Options{Policy: runtime.PolicyWorkspaceWrite, Cwd: cwd}
	tests := []struct {
		name, script string
		ok           bool
	}{
		{"create in cwd", "echo x > new.txt && cat new.txt", true},
		{"subdirs and renames in cwd", "mkdir -p a/b && echo y > a/f && mv a/f a/b/f && rm -r a", true},
		{"write outside", "echo x > " + outside + "/f", false},
		{"move out of cwd", "echo x > m && mv m " + outside + "/m", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := sandboxed(t, nil, o, tt.script)
			if out.status != "" {
				t.Fatalf("sandbox failed: %s", out.status)
			}
			if (out.exit == 0) != tt.ok {
				t.Fatalf("exit %d (want success %v); stderr %q", out.exit, tt.ok, out.stderr)
			}
		})
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("a workspace-write run wrote outside its cwd: %d entries", len(entries))
	}
}

func TestHiddenDirectory(t *testing.T) {
	requireLandlock(t)
	root := t.TempDir()
	data, cwd := filepath.Join(root, "data"), filepath.Join(root, "cwd")
	for _, d := range []string{data, cwd} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(data, "admin-token"): "secret",
		filepath.Join(data, "script.sh"):   "echo script",
		filepath.Join(root, "sibling"):     "visible",
	}
	for p, s := range files {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(data, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	o := Options{Policy: runtime.PolicyReadOnly, Cwd: cwd, Hidden: []string{data}, Readable: []string{filepath.Join(data, "script.sh")}}
	tests := []struct {
		name, script string
		ok           bool
	}{
		{"hidden file", "cat " + data + "/admin-token", false},
		{"readable exception", "sh " + data + "/script.sh", true},
		{"sibling of the hidden dir", "cat " + root + "/sibling", true},
		{"elsewhere", "cat /etc/hostname >/dev/null || cat /etc/passwd >/dev/null", true},
		{"through a symlink", "cat " + root + "/link/admin-token", false},
		{"through dot-dot", "cat " + cwd + "/../data/admin-token", false},
		{"list the hidden dir", "ls " + data + " | grep -q admin-token", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := sandboxed(t, nil, o, tt.script)
			if out.status != "" {
				t.Fatalf("sandbox failed: %s", out.status)
			}
			if (out.exit == 0) != tt.ok {
				t.Fatalf("exit %d (want success %v); stdout %q stderr %q", out.exit, tt.ok, out.stdout, out.stderr)
			}
			if strings.Contains(out.stdout, "secret") {
				t.Fatal("the hidden file leaked")
			}
		})
	}
}

func TestStatusPipeNotInherited(t *testing.T) {
	out := sandboxed(t, nil, Options{Policy: runtime.PolicyFull, Cwd: t.TempDir()}, "echo 'unsupported: forged' >&3")
	if out.status != "" {
		t.Fatalf("the program wrote to the status pipe: %q", out.status)
	}
	if out.exit == 0 {
		t.Fatalf("writing to fd 3 succeeded; it should be closed")
	}
}

func TestCannotReachOtherProcesses(t *testing.T) {
	requireLandlock(t)
	// A process outside the sandbox, standing in for the server, with a secret in its
	// environment.
	outside := exec.Command("sleep", "60")
	outside.Env = []string{"PIXIE_SANDBOX_TEST_SECRET=s3cr3t"}
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = outside.Process.Kill(); _ = outside.Wait() }()
	pid := strconv.Itoa(outside.Process.Pid)
	tests := []struct {
		name, script string
		needABI      int
	}{
		{"environment", "tr '\\0' '\\n' < /proc/" + pid + "/environ", MinABI},
		{"command line", "cat /proc/" + pid + "/cmdline", MinABI},
		{"open files", "ls -l /proc/" + pid + "/fd/", MinABI},
		{"signal", "kill -0 " + pid, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if KernelABI() < tt.needABI {
				t.Skipf("needs Landlock ABI v%d", tt.needABI)
			}
			// The test is only meaningful if the same access works without the sandbox.
			out := sandboxed(t, nil, Options{Policy: runtime.PolicyFull, Cwd: t.TempDir()}, tt.script)
			if out.exit != 0 {
				t.Fatalf("without the sandbox: exit %d, stderr %q", out.exit, out.stderr)
			}
			out = sandboxed(t, nil, Options{Policy: runtime.PolicyReadOnly, Cwd: t.TempDir()}, tt.script)
			if out.exit == 0 || strings.Contains(out.stdout, "s3cr3t") {
				t.Errorf("reached the outside process: exit %d, stdout %q", out.exit, out.stdout)
			}
		})
	}
}

func TestProcSelfStillWorks(t *testing.T) {
	requireLandlock(t)
	// /dev/stdout, /dev/fd and process substitution go through /proc/self/fd; the files they
	// reach are pipes, which Landlock does not restrict.
	out := sandboxed(t, nil, Options{Policy: runtime.PolicyReadOnly, Cwd: t.TempDir()},
		"echo out > /dev/stdout; echo err > /dev/stderr; cat /dev/stdin </dev/null; bash -c 'cat <(echo sub)'; ls / >/dev/null")
	if out.exit != 0 || out.stdout != "out\nsub\n" || out.stderr != "err\n" {
		t.Fatalf("exit %d stdout %q stderr %q", out.exit, out.stdout, out.stderr)
	}
}

func ExampleOptions_Args() {
	o := Options{Policy: runtime.PolicyReadOnly, Cwd: "/home/me/project", Writable: []string{"/tmp/pixie-run-1"}, StatusFD: 3}
	fmt.Println(strings.Join(append([]string{"pixie", Verb}, o.Args("/usr/bin/bash", "/home/me/hooks/check.sh")...), " "))
	// Output:
	// pixie __sandbox -status-fd 3 -policy read-only -cwd /home/me/project -rw /tmp/pixie-run-1 -- /usr/bin/bash /home/me/hooks/check.sh
}

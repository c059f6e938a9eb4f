//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/pixie-dev/pixie/internal/confine"
)

// ReadRules builds the Landlock rulesets of confined runs in the parent (the bash executor),
// so that the sandbox verb does not walk the file system at every run. The read rules
// (readRules: every entry of /, of /dev and of each ancestor of a hidden directory, but the
// hidden paths, block devices and, without a PID namespace of the run's own, /proc/<pid>) are
// the bulk of a ruleset: a few hundred paths, each listed, opened and closed, which was most of
// the verb's own time. ReadRules walks once and keeps each rule's path open (O_PATH), so that a
// run's ruleset is those descriptors added to a new ruleset, plus the run's own paths.
//
// The rules are the ones the verb would make, from the same walk, as long as nothing they
// depend on has changed, and it is checked at every run: the mount table (the hidden
// directories' aliases come from it; /proc/self/mountinfo tells poll when it changes), and
// each listed directory (its device, inode, modification and change times: they change when an
// entry is added, removed or renamed). A walk that saw a directory changed within racyWindow of it
// serves one run only (a change in the same tick of the file system's clock could go unseen),
// and no walk serves longer than readRulesTTL. Landlock rules hold inodes, not paths, so a
// ruleset built here restricts the run as one built in the verb's own mount namespace (a copy
// of this one), but for the run's own /proc, which the verb adds (Options.RulesetFD).
type ReadRules struct {
	hidden  []string
	ownProc bool

	mu      sync.Mutex
	cur     *readWalk
	watchFD int  // /proc/self/mountinfo, -1 until opened
	armed   bool // read to its end since the last change it reported
}

// readRulesTTL bounds how long one walk serves; racyWindow is the age below which a listed
// directory's modification time does not prove it unchanged.
const (
	readRulesTTL = time.Second
	racyWindow   = 100 * time.Millisecond
)

// readWalk is one walk's rules, held open while a build uses them.
type readWalk struct {
	at    time.Time
	rules []heldRule
	dirs  []dirStamp
	once  bool // serves one run (a racy directory), then a new walk
	refs  atomic.Int32
}

type heldRule struct {
	fd     int
	access landlock.AccessFSSet
}

// dirStamp is what must not change in a listed directory for its listing to stand: adding,
// removing or renaming an entry changes the modification time, and setting that time back
// changes the change time (which nothing can set).
type dirStamp struct {
	path         string
	dev, ino     uint64
	mtime, ctime unix.Timespec
}

// NewReadRules returns the rules of runs that hide hidden (absolute, cleaned; their aliases
// are found in the mount table) and, with ownProc, get a PID namespace and a /proc of their own.
func NewReadRules(hidden []string, ownProc bool) *ReadRules {
	return &ReadRules{hidden: append([]string(nil), hidden...), ownProc: ownProc, watchFD: -1}
}

// Ruleset returns a new Landlock ruleset for one run, for the sandbox verb
// (Options.RulesetFD): strict, for the kernel's ABI (at least minABI, or MinABI), holding the
// read rules, /dev/null, write access on writable and read access on readable (absolute paths,
// which it resolves). The verb adds the run's /proc and its cwd. On error, the verb should build
// the ruleset itself (it then reports what is wrong, as it always did).
func (r *ReadRules) Ruleset(writable, readable []string, minABI int) (*os.File, uint32, error) {
	v := kernelABI()
	if minABI < MinABI {
		minABI = MinABI
	}
	if v < minABI {
		return nil, 0, unsupported("%s", abiMessage(v, minABI))
	}
	w, err := r.walk()
	if err != nil {
		return nil, 0, err
	}
	defer w.release()
	var rules []landlock.Rule
	rules = append(rules, landlock.PathAccess(devNull, "/dev/null").IgnoreIfMissing())
	for _, p := range writable {
		rp, err := confine.Resolve(p)
		if err != nil {
			return nil, 0, fmt.Errorf("writable directory: %w", err)
		}
		rules = append(rules, landlock.PathAccess(dirWrite, rp))
	}
	for _, p := range readable {
		rp, err := confine.Resolve(p)
		if err != nil {
			return nil, 0, fmt.Errorf("readable path: %w", err)
		}
		st, err := os.Stat(rp)
		if err != nil {
			return nil, 0, fmt.Errorf("readable path: %w", err)
		}
		if st.IsDir() {
			rules = append(rules, landlock.PathAccess(dirRead, rp))
		} else {
			rules = append(rules, landlock.PathAccess(fileRead, rp))
		}
	}
	fd, flags, err := config(v).NewRulesetFD(rules...)
	if err != nil {
		return nil, 0, fmt.Errorf("landlock ruleset: %w", err)
	}
	if fd < 0 {
		return nil, 0, unsupported("landlock produced no ruleset")
	}
	for _, h := range w.rules {
		if err := ll.LandlockAddPathBeneathRule(fd, &ll.PathBeneathAttr{ParentFd: h.fd, AllowedAccess: uint64(h.access)}, 0); err != nil {
			_ = unix.Close(fd)
			r.forget(w) // an inode changed kind since the walk: walk again next time
			return nil, 0, fmt.Errorf("landlock ruleset: %w", err)
		}
	}
	return os.NewFile(uintptr(fd), "landlock-ruleset"), flags, nil
}

// Close releases the held descriptors (a build in progress keeps its own until it is done).
func (r *ReadRules) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != nil {
		r.cur.release()
		r.cur = nil
	}
	if r.watchFD >= 0 {
		_ = unix.Close(r.watchFD)
		r.watchFD = -1
	}
	return nil
}

// walk returns a walk whose rules stand, with a reference the caller releases.
func (r *ReadRules) walk() (*readWalk, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.cur; w != nil && !r.staleLocked(w) {
		w.refs.Add(1)
		return w, nil
	}
	if r.cur != nil {
		r.cur.release()
		r.cur = nil
	}
	w, err := r.newWalk()
	if err != nil {
		return nil, err
	}
	w.refs.Store(1) // the caller's
	if !w.once {
		w.refs.Add(1) // r.cur's
		r.cur = w
	}
	return w, nil
}

// forget drops w as the current walk.
func (r *ReadRules) forget(w *readWalk) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == w {
		r.cur = nil
		w.release()
	}
}

// staleLocked reports whether w may no longer hold the rules a walk would make now.
func (r *ReadRules) staleLocked(w *readWalk) bool {
	if time.Since(w.at) > readRulesTTL || r.mountsChangedLocked() {
		return true
	}
	for _, d := range w.dirs {
		if st, ok := stamp(d.path); !ok || st != d {
			return true
		}
	}
	return false
}

// newWalk walks the file system (walkRead, as the verb does) and opens every rule's path. Each
// directory is stamped before it is listed, so that a change during the walk is seen at the
// next run.
func (r *ReadRules) newWalk() (*readWalk, error) {
	r.mountsChangedLocked() // arm the watch: what the walk reads of the mount table is now
	var hidden []string
	for _, h := range r.hidden {
		al, err := confine.Aliases(h)
		if err != nil {
			return nil, fmt.Errorf("hidden directory: %w", err)
		}
		hidden = append(hidden, al...)
	}
	w := &readWalk{at: time.Now()}
	var openErr error
	err := walkRead(hidden, r.ownProc, func(dir string) {
		st, ok := stamp(dir)
		if !ok {
			if openErr == nil {
				openErr = fmt.Errorf("listing %s: not a directory", dir)
			}
			return
		}
		w.dirs = append(w.dirs, st)
		if w.at.Sub(time.Unix(st.ctime.Unix())) < racyWindow {
			w.once = true // changed just now: maybe again within the same tick of the clock
		}
	}, func(e readEntry) {
		if e.runProc || openErr != nil {
			return // the run's /proc is the verb's to add
		}
		fd, err := unix.Open(e.path, unix.O_PATH|unix.O_CLOEXEC, 0)
		switch {
		case errors.Is(err, unix.ENOENT) && e.path != "/":
			return // gone since it was listed, as IgnoreIfMissing
		case err != nil:
			openErr = fmt.Errorf("landlock ruleset: open %s: %w", e.path, err)
			return
		}
		w.rules = append(w.rules, heldRule{fd: fd, access: e.access})
	})
	if err == nil {
		err = openErr
	}
	if err != nil {
		w.closeAll()
		return nil, err
	}
	return w, nil
}

// stamp returns what identifies path's listing now.
func stamp(path string) (dirStamp, bool) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return dirStamp{}, false
	}
	return dirStamp{path: path, dev: st.Dev, ino: st.Ino, mtime: st.Mtim, ctime: st.Ctim}, true
}

func (w *readWalk) release() {
	if w.refs.Add(-1) == 0 {
		w.closeAll()
	}
}

func (w *readWalk) closeAll() {
	for _, h := range w.rules {
		_ = unix.Close(h.fd)
	}
	w.rules = nil
}

// mountsChangedLocked reports whether the mount table changed since the last call (the first
// call reports a change). The kernel reports a change to poll (POLLPRI) once per reading of
// /proc/self/mountinfo, so a change is followed by a read to the end, which arms it again.
func (r *ReadRules) mountsChangedLocked() bool {
	if r.watchFD < 0 {
		// A raw descriptor: the runtime's network poller would take the change events if
		// os.Open registered it.
		fd, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return true
		}
		r.watchFD, r.armed = fd, false
	}
	fds := []unix.PollFd{{Fd: int32(r.watchFD), Events: unix.POLLPRI}}
	n, err := unix.Poll(fds, 0)
	changed := err != nil || (n > 0 && fds[0].Revents&(unix.POLLPRI|unix.POLLERR) != 0) || !r.armed
	if changed {
		r.armed = false
		if _, err := unix.Seek(r.watchFD, 0, io.SeekStart); err == nil {
			buf := make([]byte, 32<<10)
			for {
				n, err := unix.Read(r.watchFD, buf)
				if err != nil {
					break
				}
				if n == 0 {
					r.armed = true
					break
				}
			}
		}
	}
	return changed
}

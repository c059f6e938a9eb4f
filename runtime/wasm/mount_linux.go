//go:build linux

package wasm

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pixie-dev/pixie/internal/confine"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/runtime"
)

// workFS is the bound /work mount: an fs.FS over a descriptor of the session's cwd (shared,
// see aliasCache.bind), whose every open is resolved beneath it by the kernel
// (confine.OpenBeneath). hidden are the aliases of the hidden directories that lie inside the
// cwd: nothing in them opens, and they are left out of the listings of their parents.
type workFS struct {
	root   string // the cwd, resolved
	mu     sync.Mutex
	dir    *rootDir // nil once closed
	dirfd  int      // dir's descriptor; -1 once closed
	hidden []string
}

var _ fs.FS = (*workFS)(nil)

func newWorkFS(dir string, hidden []string) (*workFS, error) {
	b, err := homeAliases.bind(dir, hidden)
	if err != nil {
		return nil, err
	}
	return &workFS{root: b.root, dir: b.dir, dirfd: b.dir.fd, hidden: b.hidden}, nil
}

func (w *workFS) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dir != nil {
		w.dir.drop()
		w.dir, w.dirfd = nil, -1
	}
}

// Open implements fs.FS: name is relative to the cwd ("." is the cwd). Only directories and
// regular files open; a path that leaves the cwd is EPERM, a hidden one ENOENT.
func (w *workFS) Open(name string) (fs.File, error) {
	if name == "" {
		name = "."
	}
	w.mu.Lock()
	dirfd := w.dirfd
	var fd int
	var err error
	if dirfd < 0 {
		err = syscall.EBADF
	} else {
		fd, err = confine.OpenBeneath(dirfd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	}
	w.mu.Unlock()
	if err != nil {
		if errors.Is(err, syscall.EXDEV) || errors.Is(err, syscall.ELOOP) {
			err = syscall.EPERM // a path out of the cwd
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	kind := st.Mode & unix.S_IFMT
	if kind != unix.S_IFREG && kind != unix.S_IFDIR {
		// Devices, fifos and sockets: nothing a rule needs, and a read could block the host.
		_ = unix.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EACCES}
	}
	path := ""
	if len(w.hidden) > 0 {
		path, err = os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		if err != nil {
			_ = unix.Close(fd)
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		if _, ok := confine.WithinAny(path, w.hidden); ok {
			_ = unix.Close(fd)
			return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOENT}
		}
	}
	f := os.NewFile(uintptr(fd), name)
	if kind == unix.S_IFDIR && len(w.hidden) > 0 {
		return &workDir{File: f, w: w, path: path}, nil
	}
	return f, nil
}

// workDir is a directory whose listing leaves out the hidden entries.
type workDir struct {
	*os.File
	w    *workFS
	path string
}

func (d *workDir) visible(name string) bool {
	_, hidden := confine.WithinAny(d.path+"/"+name, d.w.hidden)
	return !hidden
}

// Readdir is what wazero lists a directory with.
func (d *workDir) Readdir(n int) ([]fs.FileInfo, error) {
	for {
		list, err := d.File.Readdir(n)
		out := list[:0]
		for _, fi := range list {
			if d.visible(fi.Name()) {
				out = append(out, fi)
			}
		}
		// Keep "n > 0 means at most n, and an empty answer only at the end".
		if len(out) > 0 || err != nil || n <= 0 || len(list) == 0 {
			return out, err
		}
	}
}

// ReadDir mirrors Readdir.
func (d *workDir) ReadDir(n int) ([]fs.DirEntry, error) {
	for {
		list, err := d.File.ReadDir(n)
		out := list[:0]
		for _, e := range list {
			if d.visible(e.Name()) {
				out = append(out, e)
			}
		}
		if len(out) > 0 || err != nil || n <= 0 || len(list) == 0 {
			return out, err
		}
	}
}

// aliasCache remembers the aliases of each hidden directory, and the resolved path and an
// O_PATH descriptor of each cwd, until the mount table changes (/proc/self/mountinfo reports
// that to poll) or a second has passed (a directory itself could have moved).
type aliasCache struct {
	mu      sync.Mutex
	watch   bool
	watchFD int  // /proc/self/mountinfo
	armed   bool // the file was read since the last change it reported
	at      time.Time
	known   map[string][]string // confine.Aliases's answers
	roots   map[string]string   // confine.Resolve's answers
	dirs    map[string]*rootDir // a descriptor of each resolved root
}

var homeAliases aliasCache

const aliasTTL = time.Second

// maxRememberedDirs bounds the descriptors the cache keeps open: past it, a new cwd's
// descriptor is the mount's alone.
const maxRememberedDirs = 256

// rootDir is an O_PATH descriptor of a cwd, opened with no symbolic link allowed
// (confine.OpenNoSymlinks), shared by the cache and every bound mount of that cwd: the last
// of them to let go closes it.
type rootDir struct {
	fd   int
	refs atomic.Int32
}

func openRootDir(root string) (*rootDir, error) {
	fd, err := confine.OpenNoSymlinks(root, unix.O_PATH|unix.O_DIRECTORY, false)
	if err != nil {
		return nil, err
	}
	d := &rootDir{fd: fd}
	d.refs.Store(1) // the cache's
	return d, nil
}

func (d *rootDir) drop() {
	if d.refs.Add(-1) == 0 {
		_ = unix.Close(d.fd)
	}
}

// bound is what aliasCache.bind answers: the cwd resolved, a reference to its descriptor, and
// the aliases of the hidden directories inside it.
type bound struct {
	root   string
	dir    *rootDir
	hidden []string
}

// bind finds what mounting dir needs, with one look at the mount table: the cwd's resolved
// path (a session's cwd is resolved once a second, not at every run: its symbolic links were a
// tenth of a warm decision's time in the gate), the aliases of the hidden directories (a cwd
// inside one is refused, one inside the cwd is hidden), and a descriptor of the cwd, opened
// once a second too (the open, walking the path with openat2, was a twentieth of an idle
// decision's time). The caller drops the descriptor's reference when its mount goes.
//
// What a remembered root or descriptor can miss is safe. The descriptor is the directory the
// path named when it was opened, with no symbolic link on the way, and stays that directory:
// a link or another directory put in the path since is not followed, and a directory moved
// away is still the one mounted (its own contents, nothing around it: every open is beneath
// it), for the rest of the second. The hidden directories are checked against the root at
// every bind.
func (c *aliasCache) bind(dir string, hidden []string) (bound, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.freshLocked()
	root, err := rememberLocked(&c.roots, dir, confine.Resolve)
	if err != nil {
		return bound{}, errs.New(errs.Invalid, "the session cwd %s cannot be mounted: %v", dir, err)
	}
	b := bound{root: root}
	for _, h := range hidden {
		al, err := rememberLocked(&c.known, h, confine.Aliases)
		if err != nil {
			return bound{}, fmt.Errorf("%w: the cwd mount cannot hide %s: %v", runtime.ErrUnsupported, h, err)
		}
		for _, a := range al {
			if confine.Within(root, a) {
				return bound{}, errs.Wrap(errs.Forbidden, runtime.ErrUnsupported, "%s: the session cwd %s lies inside the Pixie home (%s); it is never mounted", runtime.ErrUnsupported, dir, a)
			}
			if confine.Within(a, root) {
				b.hidden = append(b.hidden, a)
			}
		}
	}
	var d *rootDir
	if _, ok := c.dirs[root]; ok || len(c.dirs) < maxRememberedDirs {
		d, err = rememberLocked(&c.dirs, root, openRootDir)
	} else if d, err = openRootDir(root); err == nil { // not remembered: the reference is the caller's alone
		d.refs.Store(0)
	}
	if err != nil {
		if errors.Is(err, confine.ErrNoOpenat2) {
			return bound{}, fmt.Errorf("%w: the cwd mount needs openat2: %v", runtime.ErrUnsupported, err)
		}
		return bound{}, errs.New(errs.Invalid, "the session cwd %s cannot be mounted: %v", dir, err)
	}
	d.refs.Add(1) // the cache holds one, so the count is at least 1 here
	b.dir = d
	return b, nil
}

// rememberLocked answers f(key) from the map *known, asking f when the answer is not there;
// errors are not remembered. c.mu is held, and c.freshLocked was called.
func rememberLocked[V any](known *map[string]V, key string, f func(string) (V, error)) (V, error) {
	if v, ok := (*known)[key]; ok {
		return v, nil
	}
	v, err := f(key)
	if err != nil {
		return v, err
	}
	if *known == nil {
		*known = map[string]V{}
	}
	(*known)[key] = v
	return v, nil
}

// freshLocked forgets everything once the mount table changed or aliasTTL passed. A forgotten
// descriptor stays open while a mount uses it.
func (c *aliasCache) freshLocked() {
	if !c.watch {
		// A raw descriptor: the runtime's network poller would take the change events (each
		// poll of the file consumes them) if os.Open registered it.
		if fd, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			c.watch, c.watchFD = true, fd
		}
	}
	if !c.watch || c.mountsChanged() || time.Since(c.at) > aliasTTL {
		for _, d := range c.dirs {
			d.drop()
		}
		c.known, c.roots, c.dirs, c.at = nil, nil, nil, time.Now()
	}
}

// mountsChanged reports whether the mount table changed since the last call. The kernel
// reports a change to poll (POLLPRI) once per reading of the file, so a change is followed by a
// read to the end, which arms it again.
func (c *aliasCache) mountsChanged() bool {
	fds := []unix.PollFd{{Fd: int32(c.watchFD), Events: unix.POLLPRI}}
	n, err := unix.Poll(fds, 0)
	changed := err != nil || (n > 0 && fds[0].Revents&(unix.POLLPRI|unix.POLLERR) != 0) || !c.armed
	if changed {
		c.armed = false
		if _, err := unix.Seek(c.watchFD, 0, io.SeekStart); err == nil {
			buf := make([]byte, 32<<10)
			for {
				n, err := unix.Read(c.watchFD, buf)
				if err != nil {
					break
				}
				if n == 0 {
					c.armed = true
					break
				}
			}
		}
	}
	return changed
}

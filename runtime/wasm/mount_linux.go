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
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pixie-dev/pixie/internal/confine"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/runtime"
)

// workFS is the bound /work mount: an fs.FS over a descriptor of the session's cwd, opened once
// at bind, whose every open is resolved beneath it by the kernel (confine.OpenBeneath). hidden
// are the aliases of the hidden directories that lie inside the cwd: nothing in them opens,
// and they are left out of the listings of their parents.
type workFS struct {
	root   string // the cwd, resolved
	mu     sync.Mutex
	dirfd  int // -1 once closed
	hidden []string
}

var _ fs.FS = (*workFS)(nil)

func newWorkFS(dir string, hidden []string) (*workFS, error) {
	root, err := homeAliases.resolve(dir)
	if err != nil {
		return nil, errs.New(errs.Invalid, "the session cwd %s cannot be mounted: %v", dir, err)
	}
	w := &workFS{root: root, dirfd: -1}
	for _, h := range hidden {
		al, err := homeAliases.get(h)
		if err != nil {
			return nil, fmt.Errorf("%w: the cwd mount cannot hide %s: %v", runtime.ErrUnsupported, h, err)
		}
		for _, a := range al {
			if confine.Within(root, a) {
				return nil, errs.Wrap(errs.Forbidden, runtime.ErrUnsupported, "%s: the session cwd %s lies inside the Pixie home (%s); it is never mounted", runtime.ErrUnsupported, dir, a)
			}
			if confine.Within(a, root) {
				w.hidden = append(w.hidden, a)
			}
		}
	}
	// No symbolic link may have replaced a component since it was resolved.
	fd, err := confine.OpenNoSymlinks(root, unix.O_PATH|unix.O_DIRECTORY, false)
	if err != nil {
		if errors.Is(err, confine.ErrNoOpenat2) {
			return nil, fmt.Errorf("%w: the cwd mount needs openat2: %v", runtime.ErrUnsupported, err)
		}
		return nil, errs.New(errs.Invalid, "the session cwd %s cannot be mounted: %v", dir, err)
	}
	w.dirfd = fd
	return w, nil
}

func (w *workFS) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dirfd >= 0 {
		_ = unix.Close(w.dirfd)
		w.dirfd = -1
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

// aliasCache remembers the aliases of each hidden directory, and the resolved path of each
// cwd, until the mount table changes (/proc/self/mountinfo reports that to poll) or a second
// has passed (a directory itself could have moved).
type aliasCache struct {
	mu      sync.Mutex
	watch   bool
	watchFD int  // /proc/self/mountinfo
	armed   bool // the file was read since the last change it reported
	at      time.Time
	known   map[string][]string // get's answers
	roots   map[string]string   // resolve's answers
}

var homeAliases aliasCache

const aliasTTL = time.Second

// get is confine.Aliases(dir), remembered.
func (c *aliasCache) get(dir string) ([]string, error) {
	return remembered(c, &c.known, dir, confine.Aliases)
}

// resolve is confine.Resolve(dir), remembered like the aliases: a session's cwd is resolved
// once a second, not at every run (its symbolic links were a tenth of a warm decision's time
// in the gate). What a remembered root can miss is safe: the mount opens it with no symbolic
// link allowed (confine.OpenNoSymlinks), so a component replaced by a link since is refused,
// and the hidden directories are checked against the root at every bind.
func (c *aliasCache) resolve(dir string) (string, error) {
	return remembered(c, &c.roots, dir, confine.Resolve)
}

// remembered answers f(dir) from the map *known of c, asking f when the answer is not there
// (or was forgotten: freshLocked); errors are not remembered.
func remembered[V any](c *aliasCache, known *map[string]V, dir string, f func(string) (V, error)) (V, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.freshLocked()
	if v, ok := (*known)[dir]; ok {
		return v, nil
	}
	v, err := f(dir)
	if err != nil {
		return v, err
	}
	if *known == nil {
		*known = map[string]V{}
	}
	(*known)[dir] = v
	return v, nil
}

// freshLocked forgets everything once the mount table changed or aliasTTL passed.
func (c *aliasCache) freshLocked() {
	if !c.watch {
		// A raw descriptor: the runtime's network poller would take the change events (each
		// poll of the file consumes them) if os.Open registered it.
		if fd, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			c.watch, c.watchFD = true, fd
		}
	}
	if !c.watch || c.mountsChanged() || time.Since(c.at) > aliasTTL {
		c.known, c.roots, c.at = nil, nil, time.Now()
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

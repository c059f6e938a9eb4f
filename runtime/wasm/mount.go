package wasm

import (
	"io/fs"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/sys"
)

// lateMount is the file system a pooled instance sees at MountPath. A WASI module's mounts are
// fixed when it is instantiated, long before the run that will use it (and its session's cwd)
// is known, so every instance is created with this mount unbound, and the run binds it to the
// session's cwd, read-only, just before the call. Unbound, it is an empty read-only directory:
// every lookup below it is ENOENT and every change EROFS, so a run without the mount reaches no
// file. An instance serves one run, so a mount is bound at most once and never outlives its run.
//
// Bound, every path is resolved beneath the cwd by the kernel (workFS: openat2 with
// RESOLVE_BENEATH from a descriptor of the cwd, shared by the runs of the same second
// (aliasCache.bind), for every open, stat and directory listing): no symbolic link and no ".." leads out of it, and a link that would is refused
// (EPERM). The hidden directories (Config.Hidden, the Pixie home) are never shown, through any
// of their aliases (internal/confine): a cwd inside one is refused at bind, and one inside the
// cwd is left out of listings and answers ENOENT.
//
// The guest's runtime looks at the mount's root while it starts (WASI's fd_prestat_get stats
// the preopened directory), before any run is known: the root is therefore a lateRoot, which
// follows the binding too. Every path below the root is resolved through the mount at each
// call, so binding after initialisation is what the guest sees.
type lateMount struct {
	fs   atomic.Pointer[experimentalsys.FS]
	work *workFS // what bind made; nil while unbound
}

var _ experimentalsys.FS = (*lateMount)(nil)

// bind mounts dir (a clean absolute directory) read-only, without the hidden directories. It
// fails when dir lies inside one of them, or cannot be confined here (no openat2).
func (m *lateMount) bind(dir string, hidden []string) error {
	w, err := newWorkFS(dir, hidden)
	if err != nil {
		return err
	}
	m.work = w
	var f experimentalsys.FS = &sysfs.ReadFS{FS: &sysfs.AdaptFS{FS: w}}
	m.fs.Store(&f)
	return nil
}

// release closes what bind opened; the instance's file system closes it with the root.
func (m *lateMount) release() {
	if m.work != nil {
		m.work.close()
	}
}

func (m *lateMount) target() experimentalsys.FS {
	if p := m.fs.Load(); p != nil {
		return *p
	}
	return nil
}

// withMount adds the late mount to mc at MountPath, with PWD there.
func withMount(mc wazero.ModuleConfig, m *lateMount) wazero.ModuleConfig {
	fsc := wazero.NewFSConfig().(sysfs.FSConfig).WithSysFSMount(m, MountPath)
	return mc.WithFSConfig(fsc).WithEnv("PWD", MountPath)
}

func (m *lateMount) OpenFile(path string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	if t := m.target(); t != nil {
		return t.OpenFile(path, flag, perm)
	}
	if path == "." || path == "" {
		if flag&(experimentalsys.O_WRONLY|experimentalsys.O_RDWR|experimentalsys.O_CREAT|experimentalsys.O_TRUNC) != 0 {
			return nil, experimentalsys.EISDIR
		}
		return &lateRoot{m: m}, 0
	}
	return nil, experimentalsys.ENOENT
}

func (m *lateMount) Lstat(path string) (sys.Stat_t, experimentalsys.Errno) {
	if t := m.target(); t != nil {
		return t.Lstat(path)
	}
	return sys.Stat_t{}, experimentalsys.ENOENT
}

func (m *lateMount) Stat(path string) (sys.Stat_t, experimentalsys.Errno) {
	if t := m.target(); t != nil {
		return t.Stat(path)
	}
	return sys.Stat_t{}, experimentalsys.ENOENT
}

func (m *lateMount) Readlink(path string) (string, experimentalsys.Errno) {
	if t := m.target(); t != nil {
		return t.Readlink(path)
	}
	return "", experimentalsys.ENOENT
}

func (m *lateMount) Mkdir(path string, perm fs.FileMode) experimentalsys.Errno {
	if t := m.target(); t != nil {
		return t.Mkdir(path, perm)
	}
	return experimentalsys.EROFS
}

func (m *lateMount) Chmod(path string, perm fs.FileMode) experimentalsys.Errno {
	if t := m.target(); t != nil {
		return t.Chmod(path, perm)
	}
	return experimentalsys.EROFS
}

func (m *lateMount) Rename(from, to string) experimentalsys.Errno {
	if t := m.target(); t != nil {
		return t.Rename(from, to)
	}
	return experimentalsys.EROFS
}

func (m *lateMount) Rmdir(path string) experimentalsys.Errno {
	if t := m.target(); t != nil {
		return t.Rmdir(path)
	}
	return experimentalsys.EROFS
}

func (m *lateMount) Unlink(path string) experimentalsys.Errno {
	if t := m.target(); t != nil {
		return t.Unlink(path)
	}
	return experimentalsys.EROFS
}

func (m *lateMount) Link(oldPath, newPath string) experimentalsys.Errno {
	if t := m.target(); t != nil {
		return t.Link(oldPath, newPath)
	}
	return experimentalsys.EROFS
}

func (m *lateMount) Symlink(oldPath, linkName string) experimentalsys.Errno {
	if t := m.target(); t != nil {
		return t.Symlink(oldPath, linkName)
	}
	return experimentalsys.EROFS
}

func (m *lateMount) Utimens(path string, atim, mtim int64) experimentalsys.Errno {
	if t := m.target(); t != nil {
		return t.Utimens(path, atim, mtim)
	}
	return experimentalsys.EROFS
}

// lateRoot is the mount's root directory opened before the mount was bound: an empty read-only
// directory until then, and the bound directory's root (opened on first use) after.
type lateRoot struct {
	// UnimplementedFile answers Seek (ENOSYS): a method named Seek with this signature does
	// not pass go vet, and no guest seeks the preopened directory itself.
	experimentalsys.UnimplementedFile
	m *lateMount
	f experimentalsys.File
}

var _ experimentalsys.File = (*lateRoot)(nil)

// file returns the bound root, or nil while the mount is unbound.
func (r *lateRoot) file() (experimentalsys.File, experimentalsys.Errno) {
	if r.f != nil {
		return r.f, 0
	}
	t := r.m.target()
	if t == nil {
		return nil, 0
	}
	f, errno := t.OpenFile(".", experimentalsys.O_RDONLY, 0)
	if errno != 0 {
		return nil, errno
	}
	r.f = f
	return f, 0
}

func (r *lateRoot) Dev() (uint64, experimentalsys.Errno) {
	f, errno := r.file()
	if f == nil {
		return 0, errno
	}
	return f.Dev()
}

func (r *lateRoot) Ino() (sys.Inode, experimentalsys.Errno) {
	f, errno := r.file()
	if f == nil {
		return 0, errno
	}
	return f.Ino()
}

func (r *lateRoot) Stat() (sys.Stat_t, experimentalsys.Errno) {
	f, errno := r.file()
	if f == nil {
		if errno != 0 {
			return sys.Stat_t{}, errno
		}
		return sys.Stat_t{Mode: fs.ModeDir | 0o555, Nlink: 1}, 0
	}
	return f.Stat()
}

func (r *lateRoot) Readdir(n int) ([]experimentalsys.Dirent, experimentalsys.Errno) {
	f, errno := r.file()
	if f == nil {
		return nil, errno
	}
	return f.Readdir(n)
}

func (r *lateRoot) IsDir() (bool, experimentalsys.Errno)      { return true, 0 }
func (r *lateRoot) IsAppend() bool                            { return false }
func (r *lateRoot) SetAppend(bool) experimentalsys.Errno      { return experimentalsys.EISDIR }
func (r *lateRoot) Read([]byte) (int, experimentalsys.Errno)  { return 0, experimentalsys.EISDIR }
func (r *lateRoot) Write([]byte) (int, experimentalsys.Errno) { return 0, experimentalsys.EISDIR }
func (r *lateRoot) Truncate(int64) experimentalsys.Errno      { return experimentalsys.EISDIR }
func (r *lateRoot) Pread([]byte, int64) (int, experimentalsys.Errno) {
	return 0, experimentalsys.EISDIR
}
func (r *lateRoot) Pwrite([]byte, int64) (int, experimentalsys.Errno) {
	return 0, experimentalsys.EISDIR
}

func (r *lateRoot) Sync() experimentalsys.Errno {
	if f, _ := r.file(); f != nil {
		return f.Sync()
	}
	return 0
}

func (r *lateRoot) Datasync() experimentalsys.Errno {
	if f, _ := r.file(); f != nil {
		return f.Datasync()
	}
	return 0
}

func (r *lateRoot) Utimens(int64, int64) experimentalsys.Errno { return experimentalsys.EROFS }

func (r *lateRoot) Close() experimentalsys.Errno {
	var errno experimentalsys.Errno
	if r.f != nil {
		errno = r.f.Close()
	}
	r.m.release()
	return errno
}

//go:build linux

package confine

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ErrNoOpenat2 means the kernel has no openat2(2) (Linux 5.6+), which the beneath and
// no-symlink opens need; callers fail closed on it.
var ErrNoOpenat2 = errors.New("the kernel has no openat2 (Linux 5.6 or newer is needed)")

// OpenBeneath opens rel, a relative path, beneath the directory dirfd: the kernel refuses
// (EXDEV) any resolution that would leave it, through "..", an absolute symbolic link or one
// that climbs out, and every magic link of /proc (openat2 with RESOLVE_BENEATH and
// RESOLVE_NO_MAGICLINKS). flags are open(2) flags; O_CLOEXEC is added.
func OpenBeneath(dirfd int, rel string, flags int) (int, error) {
	return openat2(dirfd, rel, flags, unix.RESOLVE_BENEATH|unix.RESOLVE_NO_MAGICLINKS)
}

// OpenNoSymlinks opens the path p refusing (ELOOP) a symbolic link in any of its components,
// the last included, and every mount crossing only when noXDev is set.
func OpenNoSymlinks(p string, flags int, noXDev bool) (int, error) {
	res := uint64(unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS)
	if noXDev {
		res |= unix.RESOLVE_NO_XDEV
	}
	return openat2(unix.AT_FDCWD, p, flags, res)
}

func openat2(dirfd int, p string, flags int, resolve uint64) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: resolve}
	// EAGAIN: a rename or mount raced the walk; the kernel asks for a retry, which a process
	// renaming in a loop could make endless, so the retries are bounded.
	for try := 0; ; try++ {
		fd, err := unix.Openat2(dirfd, p, &how)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN) && try < 64:
			continue
		case errors.Is(err, unix.ENOSYS):
			return -1, fmt.Errorf("%w: %w", ErrNoOpenat2, err)
		}
		return -1, err
	}
}

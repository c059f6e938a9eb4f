package wasm

import (
	"sync"
	"syscall"
	"unsafe"
)

// mapNoReserve keeps a memory's reservation out of the kernel's overcommit accounting.
const mapNoReserve = syscall.MAP_NORESERVE

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14): fault a range in, writable, in one
// call.
const madvPopulateWrite = 23

// populate makes b's pages resident, as wazero's own memories are when they grow (it zeroes the
// new part): paying for the page faults while an instance is prepared, not during the rule's
// call.
func populate(b []byte) {
	if len(b) == 0 {
		return
	}
	if syscall.Madvise(b, madvPopulateWrite) == nil {
		return
	}
	touch(b)
}

// madvHugepage is MADV_HUGEPAGE.
const madvHugepage = 14

// hugePages asks for transparent huge pages behind a guest's memory where writes are not
// tracked (a reset then copies everything anyway; tracking works per 4 KiB page).
func hugePages(b []byte) { _ = syscall.Madvise(b, madvHugepage) }

// Write tracking with userfaultfd (Linux 6.7: UFFD_FEATURE_WP_ASYNC and PAGEMAP_SCAN).
//
// One userfaultfd in asynchronous write-protect mode serves every memory: a memory's mapping is
// registered with it, and once write-protected, the kernel resolves a write fault itself (no
// thread of ours is involved) and marks the page written. PAGEMAP_SCAN on /proc/self/pagemap
// then lists the written pages of a range and write-protects them again, atomically. Writes the
// kernel makes on the process's behalf (a read(2) into guest memory) are tracked too. The
// userfaultfd is made with UFFD_USER_MODE_ONLY, which an unprivileged process may use where
// vm.unprivileged_userfaultfd is 0 (the default); where userfaultfd is not allowed at all, no
// memory is tracked and a reset copies the whole snapshot back (memory_unix.go).

const (
	sysUserfaultfd      = 323 // amd64
	uffdUserModeOnly    = 1
	uffdAPI             = 0xAA
	uffdioAPI           = 0xC018AA3F
	uffdioRegister      = 0xC020AA00
	uffdioWriteprotect  = 0xC018AA06
	uffdRegisterModeWP  = 1 << 1
	uffdWriteprotectWP  = 1 << 0
	featureWPAsync      = 1 << 15
	featureWPUnpopulate = 1 << 13
	pagemapScan         = 0xC0606610
	pmScanCheckWPAsync  = 1 << 1
	pageIsWritten       = 1 << 1
	madvDontneed        = 4
	osPage              = 4096
	madvNoHugepage      = 15
)

var tracker = sync.OnceValue(func() *writeTracker {
	if !trackingSupported {
		return nil
	}
	fd, _, e := syscall.Syscall(sysUserfaultfd, syscall.O_CLOEXEC|syscall.O_NONBLOCK|uffdUserModeOnly, 0, 0)
	if e != 0 {
		return nil
	}
	api := [3]uint64{uffdAPI, featureWPAsync | featureWPUnpopulate, 0}
	if ioctl(int(fd), uffdioAPI, unsafe.Pointer(&api)) != nil {
		syscall.Close(int(fd))
		return nil
	}
	pm, err := syscall.Open("/proc/self/pagemap", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		syscall.Close(int(fd))
		return nil
	}
	t := &writeTracker{uffd: int(fd), pagemap: pm}
	// PAGEMAP_SCAN must exist (Linux 6.7): probe it on a page of our own.
	probe, err := syscall.Mmap(-1, 0, osPage, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil || !t.register(probe) {
		return nil
	}
	defer syscall.Munmap(probe)
	probe[0] = 1
	if _, err := t.scan(probe, make([]pageRegion, 1)); err != nil {
		return nil
	}
	return t
})

// trackingSupported can be turned off by tests, to run the copy-everything reset.
var trackingSupported = true

type writeTracker struct {
	uffd, pagemap int
}

type pageRegion struct{ start, end, categories uint64 }

type pmScanArg struct {
	size, flags, start, end, walkEnd, vec, vecLen, maxPages, catInverted, catMask, catAnyof, retMask uint64
}

func ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), req, uintptr(arg)); e != 0 {
		return e
	}
	return nil
}

func addr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

func (t *writeTracker) register(b []byte) bool {
	reg := [4]uint64{addr(b), uint64(len(b)), uffdRegisterModeWP, 0}
	return ioctl(t.uffd, uffdioRegister, unsafe.Pointer(&reg)) == nil
}

func (t *writeTracker) protect(b []byte) {
	if len(b) == 0 {
		return
	}
	wp := [3]uint64{addr(b), uint64(len(b)), uffdWriteprotectWP}
	_ = ioctl(t.uffd, uffdioWriteprotect, unsafe.Pointer(&wp))
}

// scan lists the written pages of b (at most len(vec) regions per call, resuming where it
// stopped), leaving them as they are: writable and marked written.
func (t *writeTracker) scan(b []byte, vec []pageRegion) ([]pageRegion, error) {
	var out []pageRegion
	start, end := addr(b), addr(b)+uint64(len(b))
	for start < end {
		a := pmScanArg{size: uint64(unsafe.Sizeof(pmScanArg{})), flags: pmScanCheckWPAsync,
			start: start, end: end, vec: uint64(uintptr(unsafe.Pointer(&vec[0]))), vecLen: uint64(len(vec)),
			catMask: pageIsWritten, retMask: pageIsWritten}
		n, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(t.pagemap), pagemapScan, uintptr(unsafe.Pointer(&a)))
		if e != 0 {
			return nil, e
		}
		out = append(out, vec[:n]...)
		if a.walkEnd <= start || int(n) < len(vec) {
			break
		}
		start = a.walkEnd
	}
	return out, nil
}

// track registers b, a memory's whole mapping, for write tracking.
func track(b []byte) bool {
	t := tracker()
	if t == nil {
		return false
	}
	_ = syscall.Madvise(b, madvNoHugepage)
	return t.register(b)
}

func writeProtect(b []byte) {
	if t := tracker(); t != nil {
		t.protect(b)
	}
}

// restoreWritten copies back from snap every page of buf[:n] written since the memory was last
// protected; pages past len(snap) are left to drop. It returns the bytes copied.
//
// The pages stay writable, and so are found written (and copied) at every reset until the
// memory is protected again: write-protecting makes the kernel flush the TLB of every CPU that
// runs a thread of the process, which in a busy server costs more than copying a few dozen
// pages (it made a Go guest's reset 25 µs instead of 8, and was paid at every reset, since the
// copy itself marked the pages written again). With rearm it protects buf[:n] after the copy,
// so that the pages written from then on are again only those the next runs write.
func restoreWritten(buf []byte, n int, snap *image, rearm bool) int {
	t := tracker()
	var vec [128]pageRegion
	regions, err := t.scan(buf[:n], vec[:])
	if err != nil { // cannot happen once probed; be safe
		snap.copyTo(buf, 0, snap.len())
		return snap.len()
	}
	base := addr(buf)
	copied := 0
	for _, r := range regions {
		s, e := int(r.start-base), int(r.end-base)
		if s >= snap.len() {
			continue
		}
		e = min(e, snap.len())
		snap.copyTo(buf, s, e)
		copied += e - s
	}
	if rearm {
		t.protect(buf[:n])
	}
	return copied
}

// drop releases b's pages (they read as zeros again) and, when tracked, protects them again.
func drop(b []byte, tracked bool) {
	if len(b) == 0 {
		return
	}
	_ = syscall.Madvise(b, madvDontneed)
	if tracked {
		writeProtect(b)
	}
}

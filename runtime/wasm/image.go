package wasm

import "unsafe"

// image is a linear memory's bytes as a snapshot keeps them: without its zero pages.
//
// A Go guest's memory after initialisation is 4 MiB, 45 % of it zero pages (the Go runtime's
// heap arenas not yet used), and the Extism kernel's is 1 MiB of which one page is not zero. A
// snapshot keeps only the other pages, and a new instance made from it (clone) writes only
// those: its zero pages are never touched, so they take no memory until a run writes them.
type image struct {
	size int
	// page holds, for each imagePage of the memory, the index of its copy in data, or -1 for a
	// page of zeros.
	page []int32
	data []byte
}

// imagePage is the unit of an image: the kernel's page size, the unit of write tracking.
const imagePage = 4096

// newImage copies b into an image.
func newImage(b []byte) *image {
	n := (len(b) + imagePage - 1) / imagePage
	im := &image{size: len(b), page: make([]int32, n)}
	nonzero := 0
	for p := range n {
		if isZero(b[p*imagePage : min((p+1)*imagePage, len(b))]) {
			im.page[p] = -1
			continue
		}
		im.page[p] = int32(nonzero)
		nonzero++
	}
	im.data = make([]byte, 0, nonzero*imagePage)
	for p := range n {
		if im.page[p] >= 0 {
			page := b[p*imagePage : min((p+1)*imagePage, len(b))]
			im.data = append(im.data, page...)
			im.data = im.data[:len(im.data)+imagePage-len(page)] // a short last page: zeros
		}
	}
	return im
}

// len is the memory's length in bytes.
func (im *image) len() int {
	if im == nil {
		return 0
	}
	return im.size
}

// kept is the bytes the image holds (its non-zero pages).
func (im *image) kept() int { return len(im.data) }

// copyTo makes dst[s:e] the image's bytes s to e (e ≤ len).
func (im *image) copyTo(dst []byte, s, e int) {
	for s < e {
		p := s / imagePage
		end := min((p+1)*imagePage, e)
		if k := im.page[p]; k < 0 {
			clear(dst[s:end])
		} else {
			off := int(k)*imagePage + s - p*imagePage
			copy(dst[s:end], im.data[off:off+end-s])
		}
		s = end
	}
}

// fill makes dst[:len] the image's bytes, where only dst[:dirty] may hold anything but zeros
// (what instantiation wrote): it writes the image's non-zero pages and clears those of
// dst[:dirty] that are not zero, so that the zero pages of a fresh memory stay untouched.
func (im *image) fill(dst []byte, dirty int) {
	for p, k := range im.page {
		s, e := p*imagePage, min((p+1)*imagePage, im.size)
		switch {
		case k >= 0:
			copy(dst[s:e], im.data[int(k)*imagePage:])
		case s < dirty && !isZero(dst[s:e]):
			clear(dst[s:e])
		}
	}
}

// bytes returns the image's bytes (tests).
func (im *image) bytes() []byte {
	b := make([]byte, im.size)
	im.copyTo(b, 0, im.size)
	return b
}

// isZero reports whether b is all zeros, eight bytes at a time.
func isZero(b []byte) bool {
	if n := len(b) / 8; n > 0 {
		for _, w := range unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), n) {
			if w != 0 {
				return false
			}
		}
		b = b[n*8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// Package spool owns the private image spool of the Lark channel: the images of a current
// Delivery, downloaded into a directory that must be provably private (a real directory, not a
// symlink, mode 0700, owned by this process's user), or over a store other replicas share,
// kept in the store (lark-spool/<delivery>, lark-spool-body/<delivery>/<n>) and copied into each
// replica's directory on demand. It knows nothing of Lark: the channel hands it a download
// function. Images are removed when their Delivery settles.
package spool

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/store"
)

// Spool is the private directory images are downloaded into. Each Delivery gets its own
// subdirectory, removed before the Delivery settles. The directory must be provably private
// (a real directory, not a symlink, mode 0700, owned by this process's user); when it is not,
// only the image part of Deliveries is unavailable.
//
// Over a store other replicas share, the images live in the store instead (shared.go):
// any replica serves the image route and the Delivery views, and each copies an image into its
// own spool directory when a view names its path.
type Spool struct {
	dir string
	log *slog.Logger
	// st is set over a shared store: images and notes are kept there.
	st  *store.Store
	ttl time.Duration

	mu    sync.Mutex
	files map[string][]File
	// notes says, per Delivery, why some or all images are unavailable.
	notes map[string]string
}

// File is one spooled image (Path is empty where this replica's directory is unusable).
type File struct {
	Index     int    `json:"index"`
	Path      string `json:"path"`
	MediaType string `json:"mediaType"`
	Size      int64  `json:"size"`
}

// New returns the spool in dir (created if missing; what an earlier process left is removed).
// Over a shared st the images live in the store, for ttl at the most.
func New(dir string, log *slog.Logger, st *store.Store, ttl time.Duration) *Spool {
	s := &Spool{dir: dir, log: log, files: map[string][]File{}, notes: map[string]string{}}
	if st != nil && st.Shared() {
		s.st, s.ttl = st, ttl
	}
	if dir == "" {
		return s
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		log.Warn("lark: image spool unavailable", "dir", dir, "err", err.Error())
		return s
	}
	// Make sure a directory Pixie created earlier is private; a foreign one is not touched.
	if st, err := os.Lstat(dir); err == nil && st.IsDir() && ownedByMe(st) && st.Mode().Perm() != 0o700 {
		_ = os.Chmod(dir, 0o700)
	}
	// What a previous process left (it stopped before settling) is stale: the Deliveries are
	// re-fetched when they resume.
	if p := s.Problem(); p == "" {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	return s
}

// Problem says why the spool cannot be used, or "".
func (s *Spool) Problem() string {
	if s.dir == "" {
		return "no spool directory is configured"
	}
	st, err := os.Lstat(s.dir)
	switch {
	case err != nil:
		return "the spool directory " + s.dir + " does not exist"
	case st.Mode()&os.ModeSymlink != 0:
		return "the spool directory " + s.dir + " is a symlink"
	case !st.IsDir():
		return "the spool path " + s.dir + " is not a directory"
	case st.Mode().Perm() != 0o700:
		return fmt.Sprintf("the spool directory %s has mode %o, not 0700", s.dir, st.Mode().Perm())
	case !ownedByMe(st):
		return "the spool directory " + s.dir + " is owned by another user"
	}
	return ""
}

// Download fetches the image key of a Delivery; its error's text is shown as the reason the
// image is missing.
type Download func(ctx context.Context, key string) ([]byte, error)

// Fetch downloads the images keys of Delivery id with download, once (a second call for id is
// a no-op). Failures make only those images unavailable; the note says why.
func (s *Spool) Fetch(ctx context.Context, id string, keys []string, download Download) {
	if len(keys) == 0 {
		return
	}
	if s.st != nil {
		s.fetchShared(ctx, id, keys, download)
		return
	}
	s.mu.Lock()
	_, done := s.files[id]
	s.mu.Unlock()
	if done {
		return // fetched already by an earlier activation in this process
	}
	if p := s.Problem(); p != "" {
		s.setNote(id, p)
		return
	}
	sub := filepath.Join(s.dir, id)
	if err := os.Mkdir(sub, 0o700); err != nil && !os.IsExist(err) {
		s.setNote(id, "the Delivery's spool folder could not be created")
		return
	}
	var got []File
	notes := eachImage(ctx, keys, download, func(n int, mt string, data []byte) string {
		p := filepath.Join(sub, fmt.Sprintf("%d%s", n, extOf(mt)))
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return "could not be written to the spool"
		}
		_, werr := f.Write(data)
		cerr := f.Close()
		if werr != nil || cerr != nil {
			_ = os.Remove(p)
			return "could not be written to the spool"
		}
		got = append(got, File{Index: n, Path: p, MediaType: mt, Size: int64(len(data))})
		return ""
	})
	s.mu.Lock()
	s.files[id] = got
	if len(notes) > 0 {
		s.notes[id] = strings.Join(notes, "; ")
	}
	s.mu.Unlock()
}

// eachImage downloads keys in order and hands each image (numbered from 1, with its media
// type) to keep, which returns why it could not keep it, or "". The notes it returns say, in
// order, which images are missing and why: a failed download, not an image, or keep's reason.
func eachImage(ctx context.Context, keys []string, download Download, keep func(n int, mediaType string, data []byte) string) []string {
	var notes []string
	for i, key := range keys {
		data, err := download(ctx, key)
		if err != nil {
			notes = append(notes, fmt.Sprintf("image %d: %s", i+1, err))
			continue
		}
		mt := http.DetectContentType(data)
		if !strings.HasPrefix(mt, "image/") {
			notes = append(notes, fmt.Sprintf("image %d: not an image (%s)", i+1, mt))
			continue
		}
		if why := keep(i+1, mt, data); why != "" {
			notes = append(notes, fmt.Sprintf("image %d: %s", i+1, why))
		}
	}
	return notes
}

func (s *Spool) setNote(id, note string) {
	s.mu.Lock()
	s.notes[id] = note
	s.mu.Unlock()
}

// Get returns Delivery id's images and the note about missing ones.
func (s *Spool) Get(id string) ([]File, string) {
	if s.st != nil {
		return s.getShared(id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]File(nil), s.files[id]...), s.notes[id]
}

// Remove deletes Delivery id's images; it runs before the Delivery settles.
func (s *Spool) Remove(id string) error {
	if s.st != nil {
		s.removeShared(id)
	}
	s.mu.Lock()
	delete(s.files, id)
	delete(s.notes, id)
	s.mu.Unlock()
	if s.dir == "" || id == "" || strings.ContainsAny(id, `/\`) || id == "." || id == ".." {
		return nil
	}
	err := os.RemoveAll(filepath.Join(s.dir, id))
	if err != nil {
		s.log.Warn("lark: could not remove spooled images", "delivery", id, "err", err.Error())
	}
	return err
}

func extOf(mediaType string) string {
	switch mediaType {
	case "image/png":
		return ".png"
	case "image/jpeg":
		return ".jpg"
	case "image/gif":
		return ".gif"
	case "image/webp":
		return ".webp"
	case "image/bmp":
		return ".bmp"
	}
	return ".img"
}

// Shared reports whether the images live in a store other replicas share (Body reads them).
func (s *Spool) Shared() bool { return s.st != nil }

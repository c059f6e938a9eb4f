package lark

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

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
	"github.com/pixie-dev/pixie/internal/store"
)

// spool is the private directory images are downloaded into. Each Delivery gets its own
// subdirectory, removed before the Delivery settles. The directory must be provably private
// (a real directory, not a symlink, mode 0700, owned by this process's user); when it is not,
// only the image part of Deliveries is unavailable.
//
// Over a store other replicas share, the images live in the store instead (spool_shared.go):
// any replica serves the image route and the Delivery views, and each copies an image into its
// own spool directory when a view names its path.
type spool struct {
	dir string
	log *slog.Logger
	// st is set over a shared store: images and notes are kept there.
	st  *store.Store
	ttl time.Duration

	mu    sync.Mutex
	files map[string][]spooled
	// notes says, per Delivery, why some or all images are unavailable.
	notes map[string]string
}

// spooled is one image on disk.
type spooled struct {
	Index     int    `json:"index"`
	Path      string `json:"path"`
	MediaType string `json:"mediaType"`
	Size      int64  `json:"size"`
}

func newSpool(dir string, log *slog.Logger, st *store.Store, ttl time.Duration) *spool {
	s := &spool{dir: dir, log: log, files: map[string][]spooled{}, notes: map[string]string{}}
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
	if p := s.problem(); p == "" {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	return s
}

// problem says why the spool cannot be used, or "".
func (s *spool) problem() string {
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

// fetch downloads d's images. Failures make only those images unavailable; the note says why.
func (s *spool) fetch(ctx context.Context, a *larkapi.Client, d Delivery, max int64) {
	if len(d.Images) == 0 {
		return
	}
	if s.st != nil {
		s.fetchShared(ctx, a, d, max)
		return
	}
	s.mu.Lock()
	_, done := s.files[d.ID]
	s.mu.Unlock()
	if done {
		return // fetched already by an earlier activation in this process
	}
	if p := s.problem(); p != "" {
		s.setNote(d.ID, p)
		return
	}
	sub := filepath.Join(s.dir, d.ID)
	if err := os.Mkdir(sub, 0o700); err != nil && !os.IsExist(err) {
		s.setNote(d.ID, "the Delivery's spool folder could not be created")
		return
	}
	var got []spooled
	var notes []string
	for i, key := range d.Images {
		data, err := a.Download(ctx, d.MessageID, key, max)
		if err != nil {
			notes = append(notes, fmt.Sprintf("image %d: %s", i+1, describeErr(err)))
			continue
		}
		mt := http.DetectContentType(data)
		if !strings.HasPrefix(mt, "image/") {
			notes = append(notes, fmt.Sprintf("image %d: not an image (%s)", i+1, mt))
			continue
		}
		p := filepath.Join(sub, fmt.Sprintf("%d%s", i+1, extOf(mt)))
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			notes = append(notes, fmt.Sprintf("image %d: could not be written to the spool", i+1))
			continue
		}
		_, werr := f.Write(data)
		cerr := f.Close()
		if werr != nil || cerr != nil {
			_ = os.Remove(p)
			notes = append(notes, fmt.Sprintf("image %d: could not be written to the spool", i+1))
			continue
		}
		got = append(got, spooled{Index: i + 1, Path: p, MediaType: mt, Size: int64(len(data))})
	}
	s.mu.Lock()
	s.files[d.ID] = got
	if len(notes) > 0 {
		s.notes[d.ID] = strings.Join(notes, "; ")
	}
	s.mu.Unlock()
}

func (s *spool) setNote(id, note string) {
	s.mu.Lock()
	s.notes[id] = note
	s.mu.Unlock()
}

// get returns d's spooled images and the note about missing ones.
func (s *spool) get(id string) ([]spooled, string) {
	if s.st != nil {
		return s.getShared(id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]spooled(nil), s.files[id]...), s.notes[id]
}

// remove deletes d's images; it runs before the Delivery settles.
func (s *spool) remove(id string) error {
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

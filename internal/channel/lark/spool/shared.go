package spool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pixie-dev/pixie/internal/store"
)

// The spool over a shared store:
//
//	lark-spool/<delivery>            spoolIndex: the images fetched (index, media type, size) and the note
//	lark-spool-body/<delivery>/<n>   an image's bytes (raw)
//
// all written in one transaction once the downloads are done, with the Delivery's longest
// possible life as TTL (a replica that dies before settling leaves nothing for ever), and
// deleted when the Delivery settles.

var spoolIndexes = store.NewCollection[spoolIndex]("lark-spool")

type spoolIndex struct {
	Files []File `json:"files"`
	Note  string `json:"note,omitempty"`
}

func spoolBodyKey(id string, n int) string { return fmt.Sprintf("lark-spool-body/%s/%d", id, n) }

func (s *Spool) readIndex(ctx context.Context, id string) (spoolIndex, bool, error) {
	var ix spoolIndex
	err := s.st.View(ctx, func(tx *store.Tx) (err error) {
		ix, err = spoolIndexes.Get(tx, id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return spoolIndex{}, false, nil
	}
	return ix, err == nil, err
}

func (s *Spool) fetchShared(ctx context.Context, id string, keys []string, download Download) {
	if _, ok, err := s.readIndex(ctx, id); err == nil && ok {
		return // fetched already, by this replica or another
	}
	var ix spoolIndex
	var bodies [][]byte
	notes := eachImage(ctx, keys, download, func(n int, mt string, data []byte) string {
		ix.Files = append(ix.Files, File{Index: n, MediaType: mt, Size: int64(len(data))})
		bodies = append(bodies, data)
		return ""
	})
	ix.Note = strings.Join(notes, "; ")
	err := s.st.Update(ctx, func(tx *store.Tx) error {
		for i, f := range ix.Files {
			if err := tx.SetRaw(spoolBodyKey(id, f.Index), bodies[i], s.ttl); err != nil {
				return err
			}
		}
		return spoolIndexes.PutTTL(tx, id, ix, s.ttl)
	})
	if err != nil {
		s.log.Warn("lark: could not keep the images in the store", "delivery", id, "err", err.Error())
	}
}

// getShared reads the index and gives each image a path in this replica's spool directory,
// copying it there first when it is not (when the directory is unusable, paths are empty and
// only the image route serves the bytes).
func (s *Spool) getShared(id string) ([]File, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ix, ok, err := s.readIndex(ctx, id)
	if err != nil {
		return nil, "the images could not be read from the store"
	}
	if !ok {
		return nil, ""
	}
	usable := s.Problem() == "" && id != "" && !strings.ContainsAny(id, `/\`) && id != "." && id != ".."
	out := make([]File, 0, len(ix.Files))
	for _, f := range ix.Files {
		f.Path = ""
		if usable {
			f.Path = s.materialize(ctx, id, f)
		}
		out = append(out, f)
	}
	return out, ix.Note
}

func (s *Spool) materialize(ctx context.Context, id string, f File) string {
	sub := filepath.Join(s.dir, id)
	p := filepath.Join(sub, fmt.Sprintf("%d%s", f.Index, extOf(f.MediaType)))
	if st, err := os.Lstat(p); err == nil && st.Mode().IsRegular() && st.Size() == f.Size {
		return p
	}
	data, err := s.Body(ctx, id, f.Index)
	if err != nil {
		return ""
	}
	if err := os.Mkdir(sub, 0o700); err != nil && !os.IsExist(err) {
		return ""
	}
	tmp, err := os.CreateTemp(sub, ".img-*")
	if err != nil {
		return ""
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), p) != nil {
		_ = os.Remove(tmp.Name())
		return ""
	}
	return p
}

// Body reads image n of Delivery id from the store (Shared spools only).
func (s *Spool) Body(ctx context.Context, id string, n int) ([]byte, error) {
	var b []byte
	err := s.st.View(ctx, func(tx *store.Tx) (err error) {
		b, err = tx.GetRaw(spoolBodyKey(id, n))
		return err
	})
	return b, err
}

func (s *Spool) removeShared(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := s.st.Update(ctx, func(tx *store.Tx) error {
		ix, err := spoolIndexes.Get(tx, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		for _, f := range ix.Files {
			if err := tx.DeleteRaw(spoolBodyKey(id, f.Index)); err != nil {
				return err
			}
		}
		return spoolIndexes.Delete(tx, id)
	})
	if err != nil {
		s.log.Warn("lark: could not remove spooled images", "delivery", id, "err", err.Error())
	}
}

// RemoveLocal deletes this replica's copies of a Delivery's images (another replica settled
// it).
func (s *Spool) RemoveLocal(id string) {
	if s.dir == "" || id == "" || strings.ContainsAny(id, `/\`) || id == "." || id == ".." {
		return
	}
	_ = os.RemoveAll(filepath.Join(s.dir, id))
}

package spool

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// png is the start of a PNG file: enough for http.DetectContentType.
var png = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

func TestProblem(t *testing.T) {
	root := t.TempDir()
	private := filepath.Join(root, "private")
	open := filepath.Join(root, "open")
	file := filepath.Join(root, "file")
	link := filepath.Join(root, "link")
	for _, err := range []error{os.Mkdir(private, 0o700), os.Mkdir(open, 0o755), os.WriteFile(file, nil, 0o600), os.Symlink(private, link)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, dir, want string
	}{
		{"private directory", private, ""},
		{"none configured", "", "no spool directory is configured"},
		{"missing", filepath.Join(root, "missing"), "does not exist"},
		{"a symlink to a private directory", link, "is a symlink"},
		{"a file", file, "is not a directory"},
		{"mode 0755", open, "has mode 755, not 0700"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Spool{dir: tt.dir}
			got := s.Problem()
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("Problem() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestFetch keeps the images that download and are images, notes the others in order, fetches
// once per Delivery, and removes what Remove names.
func TestFetch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	s := New(dir, quiet, nil, 0)
	calls := 0
	download := func(_ context.Context, key string) ([]byte, error) {
		calls++
		switch key {
		case "broken":
			return nil, errors.New("Lark refused the image download")
		case "text":
			return []byte("plain text"), nil
		}
		return png, nil
	}
	s.Fetch(context.Background(), "loc-1", []string{"broken", "text", "good"}, download)
	files, note := s.Get("loc-1")
	if len(files) != 1 || files[0].Index != 3 || files[0].MediaType != "image/png" || files[0].Size != int64(len(png)) {
		t.Fatalf("files %+v", files)
	}
	if want := "image 1: Lark refused the image download; image 2: not an image (text/plain; charset=utf-8)"; note != want {
		t.Fatalf("note %q, want %q", note, want)
	}
	if b, err := os.ReadFile(files[0].Path); err != nil || string(b) != string(png) {
		t.Fatalf("spooled file: %q, %v", b, err)
	}
	if st, err := os.Stat(files[0].Path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("spooled file mode: %v, %v", st.Mode(), err)
	}
	s.Fetch(context.Background(), "loc-1", []string{"good"}, download)
	if calls != 3 {
		t.Fatalf("a second Fetch of one Delivery downloaded again (%d calls)", calls)
	}
	if err := s.Remove("loc-1"); err != nil {
		t.Fatal(err)
	}
	if files, note := s.Get("loc-1"); len(files) != 0 || note != "" {
		t.Fatalf("after Remove: %+v %q", files, note)
	}
	if _, err := os.Stat(filepath.Join(dir, "loc-1")); !os.IsNotExist(err) {
		t.Fatalf("the Delivery's folder is still there: %v", err)
	}
}

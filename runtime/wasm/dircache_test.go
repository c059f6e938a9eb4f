package wasm

import (
	"io/fs"
	"os"
	"testing"
	"time"
)

// fakeInfo is a stat result for dirCache's tests.
type fakeInfo struct {
	fs.FileInfo
	dir bool
}

func (f fakeInfo) IsDir() bool { return f.dir }

// dirStep is one step of a dirCache test: at offset at, the path's state on disk ("dir",
// "file" or "gone"), what isDir must answer, and the number of stat calls so far.
type dirStep struct {
	at    time.Duration
	state string
	want  bool
	stats int
}

func TestDirCache(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		steps []dirStep
	}{
		{"a directory is looked at once per TTL", []dirStep{{0, "dir", true, 1}, {dirCheckTTL / 2, "dir", true, 1}, {dirCheckTTL, "dir", true, 2}}},
		{"a directory removed within the TTL is still trusted, and not after", []dirStep{{0, "dir", true, 1}, {dirCheckTTL - time.Nanosecond, "gone", true, 1}, {dirCheckTTL, "gone", false, 2}}},
		{"a failure is not remembered", []dirStep{{0, "gone", false, 1}, {time.Millisecond, "dir", true, 2}, {2 * time.Millisecond, "dir", true, 2}}},
		{"a file is not a directory", []dirStep{{0, "file", false, 1}, {time.Millisecond, "file", false, 2}}},
		{"a clock that went back looks again", []dirStep{{time.Second, "dir", true, 1}, {0, "gone", false, 2}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var now time.Time
			state, stats := "", 0
			c := dirCache{now: func() time.Time { return now }, stat: func(string) (os.FileInfo, error) {
				stats++
				switch state {
				case "dir":
					return fakeInfo{dir: true}, nil
				case "file":
					return fakeInfo{}, nil
				}
				return nil, fs.ErrNotExist
			}}
			for i, s := range tc.steps {
				now, state = t0.Add(s.at), s.state
				if got := c.isDir("/work"); got != s.want || stats != s.stats {
					t.Fatalf("step %d: isDir %v after %d stats, want %v after %d", i, got, stats, s.want, s.stats)
				}
			}
		})
	}
}

// The real filesystem: a directory, then the same path after removal once the TTL is over.
func TestDirCacheReal(t *testing.T) {
	dir := t.TempDir()
	var c dirCache
	if !c.isDir(dir) {
		t.Fatal("a temp dir is not a directory")
	}
	if c.isDir(dir + "/missing") {
		t.Fatal("a missing path is a directory")
	}
}

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/testutil"
)

// The README's configuration table is what `pixie config --markdown` prints for the defaults:
// a setting added without regenerating it fails here. Regenerate with
// `bin/pixie config --home /tmp/empty --markdown` and paste it under the marker.
func TestReadmeConfigTableIsGenerated(t *testing.T) {
	var buf bytes.Buffer
	if err := printConfig(&buf, config.Defaults(t.TempDir()), true, nil); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(testutil.Root(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- generated with: bin/pixie config --home /tmp/empty --markdown -->\n"
	readme := string(raw)
	i := strings.Index(readme, marker)
	if i < 0 {
		t.Fatal("README.md lost the marker of the generated configuration table")
	}
	if !strings.HasPrefix(readme[i+len(marker):], buf.String()) {
		t.Fatalf("README.md's configuration table is not what `pixie config --markdown` prints; regenerate it:\n%s", buf.String())
	}
}

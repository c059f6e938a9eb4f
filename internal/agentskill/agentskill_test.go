package agentskill

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func embedded(t *testing.T, name string) string {
	t.Helper()
	b, err := Content(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// version is a set of skill files standing for another Pixie version.
func version(files map[string]string) fstest.MapFS {
	m := fstest.MapFS{}
	for k, v := range files {
		m[k] = &fstest.MapFile{Data: []byte(v), Mode: 0o644}
	}
	return m
}

func TestFiles(t *testing.T) {
	if got := Files(); !reflect.DeepEqual(got, []string{"SKILL.md", "guide.md"}) {
		t.Fatalf("Files() = %v", got)
	}
	skill := embedded(t, "SKILL.md")
	for _, want := range []string{"name: pixie-gate-guide", "description:", "exit", "10", "11", "pixie judge", "pixie ask", "wasmexport gate", "tool-before", "turn-end"} {
		if !strings.Contains(skill, want) {
			t.Errorf("SKILL.md does not mention %q", want)
		}
	}
	if !strings.HasPrefix(skill, "---\n") {
		t.Error("SKILL.md has no front matter")
	}
	guide := embedded(t, "guide.md")
	for _, want := range []string{"# Pixie Gate guide", "exit 11", "translate-check.sh", "claim-check.sh", "only-search-tools.sh", "measure-subtitle.sh", "list-changed-files.sh"} {
		if !strings.Contains(guide, want) {
			t.Errorf("guide.md does not mention %q", want)
		}
	}
}

func TestInstall(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".claude", "skills", Name)

	// First install writes everything.
	rep, err := Install(dir, "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep.Written, Files()) || len(rep.Updated)+len(rep.Kept)+len(rep.Unchanged) != 0 {
		t.Fatalf("first install: %+v", rep)
	}
	for _, f := range Files() {
		if read(t, filepath.Join(dir, f)) != embedded(t, f) {
			t.Errorf("%s differs from the embedded file", f)
		}
	}
	var m Manifest
	if err := json.Unmarshal([]byte(read(t, filepath.Join(dir, ManifestName))), &m); err != nil {
		t.Fatal(err)
	}
	if m.Version != "1.0.0" || m.Files["SKILL.md"] != sum([]byte(embedded(t, "SKILL.md"))) {
		t.Fatalf("manifest = %+v", m)
	}

	// Installing the same version again changes nothing.
	rep, err = Install(dir, "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep.Unchanged, Files()) {
		t.Fatalf("second install: %+v", rep)
	}

	// The user edits guide.md; Pixie is updated and both files change upstream.
	edited := "# my own notes\n"
	if err := os.WriteFile(filepath.Join(dir, "guide.md"), []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	next := map[string]string{"SKILL.md": embedded(t, "SKILL.md") + "\nv2 rule\n", "guide.md": embedded(t, "guide.md") + "\nv2 section\n"}
	rep, err = install(dir, "2.0.0", version(next))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep.Updated, []string{"SKILL.md"}) || !reflect.DeepEqual(rep.Kept, []string{"guide.md"}) {
		t.Fatalf("update with an edited file: %+v", rep)
	}
	if got := read(t, filepath.Join(dir, "SKILL.md")); !strings.HasSuffix(got, "v2 rule\n") {
		t.Error("unchanged SKILL.md was not updated to the new version")
	}
	if got := read(t, filepath.Join(dir, "guide.md")); got != edited {
		t.Errorf("edited guide.md was overwritten: %q", got)
	}

	// The edit stays an edit on every later install.
	next["guide.md"] += "v3\n"
	rep, err = install(dir, "3.0.0", version(next))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep.Kept, []string{"guide.md"}) || read(t, filepath.Join(dir, "guide.md")) != edited {
		t.Fatalf("edited file on a later install: %+v", rep)
	}

	// Deleting the edited file brings Pixie's version back.
	if err := os.Remove(filepath.Join(dir, "guide.md")); err != nil {
		t.Fatal(err)
	}
	rep, err = install(dir, "3.0.0", version(next))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep.Written, []string{"guide.md"}) || read(t, filepath.Join(dir, "guide.md")) != next["guide.md"] {
		t.Fatalf("deleted file was not restored: %+v", rep)
	}
	// …and it is Pixie's again: the next update replaces it.
	next["guide.md"] += "v4\n"
	rep, err = install(dir, "4.0.0", version(next))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep.Updated, []string{"guide.md"}) {
		t.Fatalf("restored file was not updated: %+v", rep)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("skill folder holds %d entries (temporary files left?)", len(entries))
	}
}

func TestInstallForeignFile(t *testing.T) {
	dir := t.TempDir()
	// A SKILL.md that Pixie never wrote (no manifest) is kept.
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("someone else's skill"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := Install(dir, "1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep.Kept, []string{"SKILL.md"}) || !reflect.DeepEqual(rep.Written, []string{"guide.md"}) {
		t.Fatalf("report = %+v", rep)
	}
	if read(t, filepath.Join(dir, "SKILL.md")) != "someone else's skill" {
		t.Fatal("foreign file overwritten")
	}
	// A damaged manifest never leads to overwriting an edit.
	if err := os.WriteFile(filepath.Join(dir, ManifestName), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "guide.md"), []byte("edited"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(dir, "1"); err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(dir, "guide.md")) != "edited" {
		t.Fatal("edited file overwritten after the manifest was damaged")
	}
}

func TestInstallErrors(t *testing.T) {
	if _, err := Install("", "1"); err == nil {
		t.Error("empty folder accepted")
	}
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(filepath.Join(blocker, "skill"), "1"); err == nil {
		t.Error("install under a regular file succeeded")
	}
}

func TestUpdateRecorded(t *testing.T) {
	home := t.TempDir()
	proj := t.TempDir()
	a, b := ProjectDir(proj), filepath.Join(t.TempDir(), Name)
	for _, d := range []string{a, b} {
		if _, err := Install(d, "1"); err != nil {
			t.Fatal(err)
		}
		if err := Record(home, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := Record(home, a); err != nil { // recorded once only
		t.Fatal(err)
	}
	dirs, err := Recorded(home)
	if err != nil || len(dirs) != 2 {
		t.Fatalf("Recorded = %v, %v", dirs, err)
	}
	// The user removes b entirely; it must stay removed.
	if err := os.RemoveAll(b); err != nil {
		t.Fatal(err)
	}
	reps, err := updateRecorded(home, "2", version(map[string]string{"SKILL.md": "new rules\n", "guide.md": embedded(t, "guide.md")}))
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 || reps[0].Dir != a || !reflect.DeepEqual(reps[0].Updated, []string{"SKILL.md"}) {
		t.Fatalf("UpdateRecorded = %+v", reps)
	}
	if read(t, filepath.Join(a, "SKILL.md")) != "new rules\n" {
		t.Error("recorded skill not updated")
	}
	if _, err := os.Stat(b); !os.IsNotExist(err) {
		t.Error("a removed skill folder was recreated")
	}
}

func ExampleInstall() {
	dir, _ := os.MkdirTemp("", "skill")
	defer os.RemoveAll(dir)
	rep, _ := Install(filepath.Join(dir, Name), "1.0.0")
	fmt.Println("written:", rep.Written)
	_ = os.WriteFile(filepath.Join(dir, Name, "guide.md"), []byte("my notes"), 0o644)
	rep, _ = Install(filepath.Join(dir, Name), "1.0.1")
	fmt.Println("unchanged:", rep.Unchanged, "kept:", rep.Kept)
	// Output:
	// written: [SKILL.md guide.md]
	// unchanged: [SKILL.md] kept: [guide.md]
}

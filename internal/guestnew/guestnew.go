// Package guestnew scaffolds a guest project outside Pixie's repository, in Go or in
// AssemblyScript: the logic behind `pixie guest new DIR`. A project holds a rule, a host-side
// test with the SDK's fake, a README with the build, test and upload commands, and the
// dependency on the SDK. The SDK is not published yet, so the project depends on the SDK of a
// Pixie checkout (a go.mod replace, an npm file: dependency), which the README explains.
package guestnew

import (
	"bufio"
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/pixie-dev/pixie/internal/guestbuild"
	"github.com/pixie-dev/pixie/runtime/modules"
)

//go:embed templates
var templates embed.FS

// SDKModule is the Go SDK's module path.
const SDKModule = "github.com/pixie-dev/pixie/sdk"

// ASVersion is the AssemblyScript compiler a new AssemblyScript project pins: the SDK's.
const ASVersion = "0.28.20"

// Options configure New. The zero value scaffolds a Go guest named after its folder.
type Options struct {
	// Lang is guestbuild.Go (the default) or guestbuild.AssemblyScript.
	Lang guestbuild.Language
	// Name is the guest's module name (kebab-case); empty means the folder's name.
	Name string
	// Module is the Go module path; empty means example.com/<name>.
	Module string
	// SDK is the Go SDK's folder in a Pixie checkout (its go.mod is SDKModule's; the
	// AssemblyScript SDK is its assemblyscript/ folder); empty means FindSDK's.
	SDK string
}

// New writes a new guest project into dir, which must not exist or be empty, and returns the
// files it wrote (relative to dir). The project is written into a temporary folder beside dir
// and renamed into place, so a failure leaves nothing behind.
func New(dir string, o Options) ([]string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if o.Lang == "" {
		o.Lang = guestbuild.Go
	}
	if o.Lang != guestbuild.Go && o.Lang != guestbuild.AssemblyScript {
		return nil, fmt.Errorf("guest new: unknown language %q (go or assemblyscript)", o.Lang)
	}
	if o.Name == "" {
		o.Name = filepath.Base(abs)
	}
	if err := modules.ValidName(o.Name); err != nil {
		return nil, fmt.Errorf("guest new: %w (name the folder so, or pass a name)", err)
	}
	if o.Module == "" {
		o.Module = "example.com/" + o.Name
	}
	if o.SDK == "" {
		if o.SDK, err = FindSDK(); err != nil {
			return nil, err
		}
	}
	if o.SDK, err = filepath.Abs(o.SDK); err != nil {
		return nil, err
	}
	data, err := sdkData(o)
	if err != nil {
		return nil, err
	}
	if ents, err := os.ReadDir(abs); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("guest new: %s exists and is not empty", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("guest new: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, fmt.Errorf("guest new: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(abs), "."+filepath.Base(abs)+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("guest new: %w", err)
	}
	defer os.RemoveAll(tmp)
	files, err := render(tmp, string(o.Lang), data)
	if err != nil {
		return nil, err
	}
	if o.Lang == guestbuild.Go {
		// go-pdk's checksum, from the SDK's go.sum, so that the first build needs no network.
		if err := os.WriteFile(filepath.Join(tmp, "go.sum"), data.GoSum, 0o644); err != nil {
			return nil, fmt.Errorf("guest new: %w", err)
		}
		files = append(files, "go.sum")
	}
	_ = os.Remove(abs) // an empty folder is replaced
	if err := os.Rename(tmp, abs); err != nil {
		return nil, fmt.Errorf("guest new: %w", err)
	}
	return files, nil
}

// data is what the templates see.
type data struct {
	Name, Module string
	SDK, ASSDK   string
	GoVersion    string
	ASVersion    string
	GoSum        []byte
	// Indirect are the SDK's requirements ("path version"), which the project's go.mod lists
	// as indirect (module graph pruning).
	Indirect []string
}

// sdkData checks that o.SDK is the SDK of a Pixie checkout, and reads what the project needs
// from it.
func sdkData(o Options) (data, error) {
	d := data{Name: o.Name, Module: o.Module, SDK: o.SDK, ASSDK: filepath.Join(o.SDK, "assemblyscript"), ASVersion: ASVersion}
	mod, err := os.ReadFile(filepath.Join(o.SDK, "go.mod"))
	if err != nil {
		return d, fmt.Errorf("guest new: %s is not the SDK of a Pixie checkout (the sdk folder): %w", o.SDK, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(mod))
	inRequire := false
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "//")
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "module" && f[1] != SDKModule:
			return d, fmt.Errorf("guest new: %s/go.mod is module %s, not %s", o.SDK, f[1], SDKModule)
		case len(f) == 2 && f[0] == "go":
			d.GoVersion = f[1]
		case len(f) == 2 && f[0] == "require" && f[1] == "(":
			inRequire = true
		case len(f) == 1 && f[0] == ")":
			inRequire = false
		case len(f) == 3 && f[0] == "require":
			d.Indirect = append(d.Indirect, f[1]+" "+f[2])
		case len(f) == 2 && inRequire:
			d.Indirect = append(d.Indirect, f[0]+" "+f[1])
		}
	}
	if d.GoVersion == "" {
		return d, fmt.Errorf("guest new: %s/go.mod is not the SDK's", o.SDK)
	}
	if d.GoSum, err = os.ReadFile(filepath.Join(o.SDK, "go.sum")); err != nil {
		return d, fmt.Errorf("guest new: %w", err)
	}
	if o.Lang == guestbuild.AssemblyScript {
		b, err := os.ReadFile(filepath.Join(d.ASSDK, "package.json"))
		if err != nil {
			return d, fmt.Errorf("guest new: the AssemblyScript SDK is missing from %s: %w", o.SDK, err)
		}
		var pkg struct{ Name string }
		if json.Unmarshal(b, &pkg) != nil || pkg.Name != guestbuild.SDKPackage {
			return d, fmt.Errorf("guest new: %s is not the %s package", d.ASSDK, guestbuild.SDKPackage)
		}
	}
	return d, nil
}

// render executes every template of lang into dir: name.tmpl becomes name, gitignore
// .gitignore.
func render(dir, lang string, d data) ([]string, error) {
	var files []string
	root := path.Join("templates", lang)
	err := fs.WalkDir(templates, root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		raw, err := templates.ReadFile(p)
		if err != nil {
			return err
		}
		t, err := template.New(p).Option("missingkey=error").Parse(string(raw))
		if err != nil {
			return err
		}
		var out bytes.Buffer
		if err := t.Execute(&out, d); err != nil {
			return err
		}
		rel := strings.TrimSuffix(strings.TrimPrefix(p, root+"/"), ".tmpl")
		if path.Base(rel) == "gitignore" {
			rel = path.Join(path.Dir(rel), ".gitignore")
		}
		dst := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		files = append(files, rel)
		return os.WriteFile(dst, out.Bytes(), 0o644)
	})
	if err != nil {
		return nil, fmt.Errorf("guest new: %w", err)
	}
	return files, nil
}

// FindSDK returns the SDK folder of the Pixie checkout this program runs from: $PIXIE_SDK
// when set, else the sdk folder of the checkout holding the executable (bin/pixie after
// `make build`), else of the checkout holding the current directory.
func FindSDK() (string, error) {
	if p := os.Getenv("PIXIE_SDK"); p != "" {
		return p, nil
	}
	var starts []string
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			starts = append(starts, filepath.Dir(exe))
		}
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, d := range starts {
		for {
			if isSDK(filepath.Join(d, "sdk")) {
				return filepath.Join(d, "sdk"), nil
			}
			parent := filepath.Dir(d)
			if parent == d {
				break
			}
			d = parent
		}
	}
	return "", errors.New("guest new: the SDK is not published yet, and no Pixie checkout was found around this pixie binary or the current folder: pass --sdk PATH (the sdk folder of a Pixie checkout) or set PIXIE_SDK")
}

func isSDK(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	return err == nil && bytes.HasPrefix(b, []byte("module "+SDKModule+"\n"))
}

package wasmit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime/modules"
)

// Hand-assembled modules that break one validation rule each.
var (
	wasmHeader = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	// gate() -> i64.
	gateI64 = cat(wasmHeader,
		[]byte{0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7e},
		[]byte{0x03, 0x02, 0x01, 0x00},
		[]byte{0x07, 0x08, 0x01, 0x04, 'g', 'a', 't', 'e', 0x00, 0x00},
		[]byte{0x0a, 0x06, 0x01, 0x04, 0x00, 0x42, 0x00, 0x0b})
	// imports env.launch, a function the host does not provide.
	importsLaunch = cat(wasmHeader,
		[]byte{0x01, 0x08, 0x02, 0x60, 0x00, 0x00, 0x60, 0x00, 0x01, 0x7f},
		[]byte{0x02, 0x0e, 0x01, 0x03, 'e', 'n', 'v', 0x06, 'l', 'a', 'u', 'n', 'c', 'h', 0x00, 0x00},
		[]byte{0x03, 0x02, 0x01, 0x01},
		[]byte{0x07, 0x08, 0x01, 0x04, 'g', 'a', 't', 'e', 0x00, 0x01},
		[]byte{0x0a, 0x06, 0x01, 0x04, 0x00, 0x41, 0x00, 0x0b})
	// imports a memory.
	importsMemory = cat(wasmHeader,
		[]byte{0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7f},
		[]byte{0x02, 0x0f, 0x01, 0x03, 'e', 'n', 'v', 0x06, 'm', 'e', 'm', 'o', 'r', 'y', 0x02, 0x00, 0x01},
		[]byte{0x03, 0x02, 0x01, 0x00},
		[]byte{0x07, 0x08, 0x01, 0x04, 'g', 'a', 't', 'e', 0x00, 0x00},
		[]byte{0x0a, 0x06, 0x01, 0x04, 0x00, 0x41, 0x00, 0x0b})
)

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// form builds a multipart body from (field, value) pairs; the field "module" is a file.
func form(t *testing.T, fields ...[2]string) (string, *bytes.Buffer) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for _, f := range fields {
		var (
			pw  io.Writer
			err error
		)
		if f[0] == "module" {
			pw, err = w.CreateFormFile("module", "guest.wasm")
		} else {
			pw, err = w.CreateFormField(f[0])
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pw.Write([]byte(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.FormDataContentType(), &b
}

// noLength hides a body's length, so the client sends it chunked.
type noLength struct{ io.Reader }

func TestModuleUpload(t *testing.T) {
	echo := testutil.Guest(t, "testdata/echo")
	s := newStack(t, stackOptions{maxModuleSize: int64(len(echo))})

	// A module of exactly the cap is accepted, raw.
	var m modules.Module
	st, eb := s.request(t, http.MethodPost, "/v1/modules?name=echo", "application/wasm", bytes.NewReader(echo), &m)
	sum := sha256.Sum256(echo)
	if st != http.StatusCreated || m.Name != "echo" || m.SHA256 != hex.EncodeToString(sum[:]) || m.Size != int64(len(echo)) ||
		!containsStr(m.Exports, "gate") || m.UploadedAt.IsZero() {
		t.Fatalf("upload: %d %+v %+v", st, eb, m)
	}
	if got, err := os.ReadFile(filepath.Join(s.blobs, m.SHA256+".wasm")); err != nil || !bytes.Equal(got, echo) {
		t.Fatalf("the body is not stored content-addressed: %v", err)
	}
	// Shown by name and by sha256, listed.
	for _, ref := range []string{"echo", m.SHA256} {
		var got modules.Module
		if st, eb := s.call(t, http.MethodGet, "/v1/modules/"+ref, nil, &got); st != 200 || got.SHA256 != m.SHA256 || got.Name != "echo" {
			t.Fatalf("show %s: %d %+v %+v", ref, st, eb, got)
		}
	}
	// Multipart, with the name in the form or in the query; the same body is stored once.
	ct, body := form(t, [2]string{"name", "echo-form"}, [2]string{"module", string(echo)})
	if st, eb := s.request(t, http.MethodPost, "/v1/modules", ct, body, &m); st != http.StatusCreated || m.Name != "echo-form" {
		t.Fatalf("multipart: %d %+v", st, eb)
	}
	ct, body = form(t, [2]string{"module", string(echo)})
	if st, eb := s.request(t, http.MethodPost, "/v1/modules?name=echo-query", ct, body, &m); st != http.StatusCreated || m.Name != "echo-query" {
		t.Fatalf("multipart, name in the query: %d %+v", st, eb)
	}
	// curl --data-binary sends application/x-www-form-urlencoded: still the raw module.
	if st, eb := s.request(t, http.MethodPost, "/v1/modules?name=echo-curl", "application/x-www-form-urlencoded", bytes.NewReader(echo), &m); st != http.StatusCreated {
		t.Fatalf("curl's default content type: %d %+v", st, eb)
	}
	listed := s.moduleList(t)
	files := s.blobFiles(t)
	if len(listed) != 4 || len(files) != 1 {
		t.Fatalf("%d modules, blob files %v", len(listed), files)
	}

	over := append(append([]byte{}, echo...), 0)
	trunc := echo[:len(echo)/2]
	noEntry := testutil.Guest(t, "testdata/fault-noentry")
	for _, tc := range []struct {
		name   string
		path   string
		ct     string
		body   func() io.Reader
		status int
		msg    string // in the message
	}{
		{"no name", "/v1/modules", "application/wasm", func() io.Reader { return bytes.NewReader(echo) }, 400, "name is required"},
		{"a bad name", "/v1/modules?name=Echo_1", "application/wasm", func() io.Reader { return bytes.NewReader(echo) }, 400, "kebab-case"},
		{"a JSON body", "/v1/modules?name=j", "application/json", func() io.Reader { return strings.NewReader(`{"wasm":"AGFzbQ=="}`) }, 400, "application/wasm"},
		{"an empty body", "/v1/modules?name=e", "application/wasm", func() io.Reader { return bytes.NewReader(nil) }, 400, "empty"},
		{"one byte over the cap", "/v1/modules?name=big", "application/wasm", func() io.Reader { return bytes.NewReader(over) }, 413, "limit"},
		{"over the cap, chunked", "/v1/modules?name=big", "application/octet-stream", func() io.Reader { return noLength{bytes.NewReader(over)} }, 413, "limit"},
		{"over the cap, multipart", "/v1/modules?name=big", "", nil, 413, "limit"},
		{"multipart without the module", "/v1/modules?name=m", "", nil, 400, "no field \"module\""},
		{"multipart with an unknown field", "/v1/modules?name=m", "", nil, 400, "unknown multipart field"},
		{"multipart names differ", "/v1/modules?name=one", "", nil, 400, "differs"},
		{"not WebAssembly", "/v1/modules?name=junk", "application/wasm", func() io.Reader { return strings.NewReader("#!/bin/bash\nexit 11\n") }, 422, "does not compile"},
		{"a truncated module", "/v1/modules?name=trunc", "application/wasm", func() io.Reader { return bytes.NewReader(trunc) }, 422, "does not compile"},
		{"no entry point", "/v1/modules?name=noentry", "application/wasm", func() io.Reader { return bytes.NewReader(noEntry) }, 422, `does not export the entry point "gate"`},
		{"an entry point returning i64", "/v1/modules?name=i64", "application/wasm", func() io.Reader { return bytes.NewReader(gateI64) }, 422, "return i32"},
		{"an import the host does not provide", "/v1/modules?name=launch", "application/wasm", func() io.Reader { return bytes.NewReader(importsLaunch) }, 422, "env.launch"},
		{"an imported memory", "/v1/modules?name=mem", "application/wasm", func() io.Reader { return bytes.NewReader(importsMemory) }, 422, "memory env.memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct, body := tc.ct, io.Reader(nil)
			switch tc.name {
			case "over the cap, multipart":
				ct, body = formReader(t, [2]string{"module", string(over)})
			case "multipart without the module":
				ct, body = formReader(t, [2]string{"name", "m"})
			case "multipart with an unknown field":
				ct, body = formReader(t, [2]string{"module", string(echo)}, [2]string{"entry", "run"})
			case "multipart names differ":
				ct, body = formReader(t, [2]string{"name", "two"}, [2]string{"module", string(echo)})
			default:
				body = tc.body()
			}
			st, eb := s.request(t, http.MethodPost, tc.path, ct, body, nil)
			if st != tc.status || !strings.Contains(eb.Error.Message, tc.msg) {
				t.Fatalf("%d %+v; want %d with %q", st, eb, tc.status, tc.msg)
			}
			// Nothing is stored, not even half-way.
			if got := s.moduleList(t); !reflect.DeepEqual(got, listed) {
				t.Fatalf("the modules changed: %+v", got)
			}
			if got := s.blobFiles(t); !reflect.DeepEqual(got, files) {
				t.Fatalf("the blob directory changed: %v", got)
			}
		})
	}
	// Unknown references.
	if st, eb := s.call(t, http.MethodGet, "/v1/modules/nope", nil, nil); st != 404 || eb.Error.Code != "not_found" {
		t.Fatalf("%d %+v", st, eb)
	}
	if st, _ := s.call(t, http.MethodGet, "/v1/modules/Bad_Name", nil, nil); st != 400 {
		t.Fatalf("a bad reference: %d", st)
	}
}

func formReader(t *testing.T, fields ...[2]string) (string, io.Reader) {
	ct, b := form(t, fields...)
	return ct, b
}

func containsStr(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestModuleDelete(t *testing.T) {
	s := newStack(t, stackOptions{})
	m := s.push(t, "testdata/echo", "echo-rule")
	g := gateWith("uses-echo", "user-message", "", moduleRule("echo-rule"), "", 0)
	s.save(t, onePreset("dev", g))

	st, eb := s.call(t, http.MethodDelete, "/v1/modules/echo-rule", nil, nil)
	if st != http.StatusConflict || !strings.Contains(eb.Error.Message, "used by a saved gate") {
		t.Fatalf("deleting a module in use: %d %+v", st, eb)
	}
	if len(s.moduleList(t)) != 1 {
		t.Fatal("a module in use was deleted")
	}
	s.save(t, gate.Set{Gates: []gate.Gate{}, Presets: []gate.Preset{}})
	if st, eb := s.call(t, http.MethodDelete, "/v1/modules/echo-rule", nil, nil); st != http.StatusNoContent {
		t.Fatalf("delete: %d %+v", st, eb)
	}
	if len(s.moduleList(t)) != 0 || len(s.blobFiles(t)) != 0 {
		t.Fatalf("left behind: %v", s.blobFiles(t))
	}
	if st, _ := s.call(t, http.MethodGet, "/v1/modules/"+m.SHA256, nil, nil); st != 404 {
		t.Fatalf("the body is still served: %d", st)
	}
	if st, _ := s.call(t, http.MethodDelete, "/v1/modules/echo-rule", nil, nil); st != 404 {
		t.Fatalf("deleting twice: %d", st)
	}
	if st, _ := s.call(t, http.MethodDelete, "/v1/modules/Bad_Name", nil, nil); st != 400 {
		t.Fatalf("a bad name: %d", st)
	}
	// A gate cannot be saved with a module that does not exist.
	if st, eb := s.call(t, http.MethodPut, "/v1/gates", onePreset("dev", g), nil); st != 400 || !strings.Contains(eb.Error.Message+string(mustJSON(eb.Error.Details)), "does not exist") {
		t.Fatalf("a gate naming a deleted module: %d %+v", st, eb)
	}
}

// TestDeleteAndSaveNeverBothCommit races a module delete and a gate save on the real
// registry, gate service and store, at the one moment each could miss the other: between the
// check and the commit.
func TestDeleteAndSaveNeverBothCommit(t *testing.T) {
	ctx := context.Background()
	t.Run("a save lands inside the delete", func(t *testing.T) {
		s := newStack(t, stackOptions{})
		s.push(t, "testdata/echo", "echo-rule")
		calls := 0
		inUse := func(ctx context.Context, tx *store.Tx, name string) (bool, error) {
			calls++
			used, err := s.gates.ModuleInUse(ctx, tx, name)
			if calls == 1 && err == nil && !used {
				// The save checks the module (still there) and commits before the delete does.
				if _, err := s.gates.SaveGate(ctx, gateWith("late", "user-message", "", moduleRule(name), "", 0)); err != nil {
					t.Errorf("the concurrent save: %v", err)
				}
			}
			return used, err
		}
		if err := s.reg.Delete(ctx, "echo-rule", inUse); !errs.Is(err, errs.Conflict) {
			t.Fatalf("the delete missed the gate saved meanwhile: %v (checked %d times)", err, calls)
		}
		if _, err := s.gates.Gate(ctx, "late"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.reg.Resolve(ctx, "echo-rule"); err != nil {
			t.Fatalf("the module a saved gate uses is gone: %v", err)
		}
	})
	t.Run("a delete lands inside the save", func(t *testing.T) {
		s := newStack(t, stackOptions{})
		s.push(t, "testdata/echo", "echo-rule")
		var svc *gate.Service
		checker := &racingChecker{reg: s.reg, beforeFirst: func() {
			if err := s.reg.Delete(ctx, "echo-rule", svc.ModuleInUse); err != nil {
				t.Errorf("the concurrent delete: %v", err)
			}
		}}
		var err error
		if svc, err = gate.New(ctx, gate.Config{Store: s.st, Home: s.home, Modules: checker}); err != nil {
			t.Fatal(err)
		}
		_, err = svc.SaveGate(ctx, gateWith("late", "user-message", "", moduleRule("echo-rule"), "", 0))
		if !errs.Is(err, errs.Invalid) || !strings.Contains(string(mustJSON(errDetails(err))), "does not exist") {
			t.Fatalf("a gate naming the module deleted meanwhile: %v", err)
		}
		if checker.calls < 2 {
			t.Fatalf("the save did not retry (%d checks)", checker.calls)
		}
		if _, err := svc.Gate(ctx, "late"); err == nil {
			t.Fatal("the gate was saved")
		}
	})
}

// racingChecker is the registry as the gate's module checker, running beforeFirst inside the
// save's transaction before its first check.
type racingChecker struct {
	reg         *modules.Registry
	beforeFirst func()
	calls       int
}

func (c *racingChecker) ModuleExists(ctx context.Context, name string) (bool, error) {
	return c.reg.ModuleExists(ctx, name)
}

func (c *racingChecker) ModuleExistsTx(ctx context.Context, tx *store.Tx, name string) (bool, error) {
	c.calls++
	if c.calls == 1 {
		c.beforeFirst()
	}
	return c.reg.ModuleExistsTx(ctx, tx, name)
}

var _ gate.TxModuleChecker = (*racingChecker)(nil)

package gate

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/internal/testutil/fakechat"
	"github.com/pixie-dev/pixie/runtime"
)

// The test model server (internal/testutil/fakechat), under the names these tests use.
type (
	chatCall  = fakechat.Call
	llmServer = fakechat.Server
)

var (
	newLLM = fakechat.New
	answer = fakechat.Answer
)

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// openStore opens a real Badger store in a temp dir.
func openStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// testEnv is a Service over a real store, a real OpenAI-provider model talking to a test
// model server, and a script folder.
type testEnv struct {
	st      *store.Store
	svc     *Service
	llm     *llmServer
	home    string
	scripts string
}

type envOptions struct {
	exec    runtime.Executor
	noModel bool
	modules ModuleChecker
	records RecordRetention
}

func newEnv(t testing.TB, o envOptions) *testEnv {
	t.Helper()
	e := &testEnv{st: openStore(t), home: t.TempDir()}
	e.scripts = filepath.Join(e.home, "commands")
	if err := os.Mkdir(e.scripts, 0o755); err != nil {
		t.Fatal(err)
	}
	var m model.Model
	if o.noModel {
		var err error
		if m, err = model.New(model.Config{}); err != nil {
			t.Fatal(err)
		}
	} else {
		e.llm = newLLM(t, answer(`{"verdict":"pass"}`))
		var err error
		m, err = model.New(model.Config{Provider: "openai", BaseURL: e.llm.URL, Model: "pixie-test", APIKey: "sk-test-secret"})
		if err != nil {
			t.Fatal(err)
		}
	}
	svc, err := New(context.Background(), Config{Store: e.st, Exec: o.exec, Model: m, Home: e.home, Modules: o.modules, Records: o.records})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	return e
}

// writeScript writes an executable script into the script folder.
func (e *testEnv) writeScript(t testing.TB, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(e.scripts, name), []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// saveGates saves gates attached (switched on) to the preset "dev".
func (e *testEnv) saveGates(t testing.TB, gates ...Gate) {
	t.Helper()
	p := Preset{Name: "dev"}
	for _, g := range gates {
		p.Gates = append(p.Gates, Attachment{Gate: g.Name, Enabled: true})
	}
	if _, err := e.svc.Save(context.Background(), Set{Gates: gates, Presets: []Preset{p}}); err != nil {
		t.Fatal(err)
	}
}

// gate returns a gate with the defaults of a decoded definition.
func gateAt(name, point, task string) Gate {
	g := defaultGate()
	g.Name, g.Point, g.Task = name, point, task
	return g
}

// evalReq is an evaluation in session s1, preset dev.
func evalReq(point, target string) EvalRequest {
	r := EvalRequest{Point: point, Session: Session{ID: "s1", Preset: "dev"}, Turn: 1, Target: target}
	if point == "tool-before" || point == "tool-after" {
		r.Tool = &Tool{Name: "grep", Args: json.RawMessage(`{"pattern":"x"}`), CallID: "call_1"}
	}
	return r
}

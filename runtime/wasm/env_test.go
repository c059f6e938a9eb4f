package wasm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/modules"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// testEnv is a server-like setup: a real Badger store, the registry with the real validator,
// and one executor that every test shares (so a fault in one test must leave it serving the
// next).
type testEnv struct {
	st  *store.Store
	reg *modules.Registry
	x   *Executor
	dir string
}

var (
	sharedOnce sync.Once
	shared     *testEnv
	sharedErr  error
	sharedDir  string
	pushMu     sync.Mutex
	pushed     = map[string]bool{}
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.close()
	}
	if fresh != nil {
		fresh.close()
		os.RemoveAll(freshDir)
	}
	if sharedDir != "" {
		os.RemoveAll(sharedDir)
	}
	os.Exit(code)
}

func newEnv(ctx context.Context, dir string, cfg Config) (*testEnv, error) {
	st, err := badgerstore.Open(ctx, badgerstore.Options{Dir: dir + "/db", GCInterval: -1})
	if err != nil {
		return nil, err
	}
	v, err := NewValidator(ctx, cfg)
	if err != nil {
		return nil, err
	}
	reg, err := modules.New(context.Background(), modules.Config{Store: st, Dir: dir + "/blobs", Validator: v, MaxSize: cfg.MaxModuleSize})
	if err != nil {
		return nil, err
	}
	cfg.Source = reg
	x, err := New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &testEnv{st: st, reg: reg, x: x, dir: dir}, nil
}

func (e *testEnv) close() {
	e.x.Close(context.Background())
	e.st.Close()
}

// env returns the shared environment.
func env(t testing.TB) *testEnv {
	t.Helper()
	sharedOnce.Do(func() {
		sharedDir, sharedErr = os.MkdirTemp("", "pixie-wasm-test-")
		if sharedErr != nil {
			return
		}
		shared, sharedErr = newEnv(context.Background(), sharedDir, Config{CacheDir: testutil.WasmCacheDir(t)})
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// push uploads the guest called name (a folder under guests/) as module mod, once.
func (e *testEnv) push(t testing.TB, guest, mod string) {
	t.Helper()
	pushMu.Lock()
	defer pushMu.Unlock()
	key := fmt.Sprintf("%p/%s", e, mod)
	if pushed[key] {
		return
	}
	entry := abi.EntryGate
	if _, err := e.reg.Put(context.Background(), mod, testutil.Guest(t, guest), entry); err != nil {
		t.Fatalf("push %s: %v", guest, err)
	}
	pushed[key] = true
}

// run runs module mod with target and vars.
func (e *testEnv) run(t testing.TB, req runtime.Request) (runtime.Result, error) {
	t.Helper()
	req.Kind = runtime.KindModule
	return e.x.Run(context.Background(), req)
}

// alive checks that the executor still runs a module correctly.
func (e *testEnv) alive(t *testing.T) {
	t.Helper()
	e.push(t, "testdata/echo", "echo")
	res, err := e.run(t, runtime.Request{Ref: "echo", Target: "still here"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("the executor stopped serving: %+v %v", res, err)
	}
	var out struct{ Target string }
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil || out.Target != "still here" {
		t.Fatalf("echo answered %q (%v)", res.Stdout, err)
	}
}

// helper is a real, budget-enforcing Helper whose model answers come from functions: the host
// side of our own code, with the remote model replaced by the test's answers.
type helper struct {
	mu     sync.Mutex
	calls  int
	ask    func(abi.AskRequest) (string, error)
	judge  func(abi.JudgeRequest) (abi.JudgeResponse, error)
	asks   []abi.AskRequest
	judges []abi.JudgeRequest
	logs   []string
}

var _ runtime.Helper = (*helper)(nil)

func (h *helper) budget(req any) error {
	b, _ := json.Marshal(req)
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(b) > abi.MaxHelperRequestSize {
		return errs.New(errs.TooLarge, "request is %d bytes; the limit is %d", len(b), abi.MaxHelperRequestSize)
	}
	if h.calls >= abi.MaxHelperCalls {
		return errs.New(errs.RateLimited, "the run used its %d helper calls", abi.MaxHelperCalls)
	}
	h.calls++
	return nil
}

func (h *helper) Ask(ctx context.Context, req abi.AskRequest) (abi.AskResponse, error) {
	if err := h.budget(req); err != nil {
		return abi.AskResponse{}, err
	}
	h.mu.Lock()
	h.asks = append(h.asks, req)
	h.mu.Unlock()
	if h.ask == nil {
		return abi.AskResponse{}, errs.New(errs.Unavailable, "no model is configured")
	}
	text, err := h.ask(req)
	return abi.AskResponse{Text: text}, err
}

func (h *helper) Judge(ctx context.Context, req abi.JudgeRequest) (abi.JudgeResponse, error) {
	if err := h.budget(req); err != nil {
		return abi.JudgeResponse{}, err
	}
	h.mu.Lock()
	h.judges = append(h.judges, req)
	h.mu.Unlock()
	if h.judge == nil {
		return abi.JudgeResponse{}, errs.New(errs.Unavailable, "no decision engine is configured")
	}
	return h.judge(req)
}

func (h *helper) Log(level, message string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logs = append(h.logs, level+": "+message)
}

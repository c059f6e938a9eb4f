package hooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/gate"
	"github.com/pixie-dev/pixie/internal/hint"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/runtime/modules"
	"github.com/pixie-dev/pixie/runtime/wasm"
	"github.com/pixie-dev/pixie/sdk/abi"
)

// stack is the real adapter stack: Badger, the hint queue, the gate service with the WASM
// executor, and the Pixie model through the real OpenAI SDK against an OpenAI-compatible test
// server whose answer each test sets.
type stack struct {
	st    *store.Store
	hints *hint.Queue
	gates *gate.Service
	svc   *Service
	model *openAIServer
	// dir is an existing directory, used as the sessions' cwd.
	dir string
}

// openAIServer speaks the chat completions wire format; it answers every call with the gate
// output JSON set by answer.
type openAIServer struct {
	mu    sync.Mutex
	reply string
	calls int
	srv   *httptest.Server
}

func (o *openAIServer) answer(out abi.GateOutput) {
	raw, _ := json.Marshal(out)
	o.mu.Lock()
	o.reply = string(raw)
	o.mu.Unlock()
}

func (o *openAIServer) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.calls
}

func (o *openAIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	o.mu.Lock()
	o.calls++
	reply := o.reply
	o.mu.Unlock()
	content, _ := json.Marshal(reply)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1717000000,"model":"test-model",
		"choices":[{"index":0,"finish_reason":"stop","logprobs":null,"message":{"role":"assistant","content":%s}}],
		"usage":{"prompt_tokens":30,"completion_tokens":10,"total_tokens":40}}`, content)
}

// The gates of the test preset "p": one per point. tool-before is concluded by the real
// block-risky-commands guest; the others ask the model.
var testGates = []gate.Gate{
	{Name: "msg", Enabled: true, Point: abi.PointUserMessage, Task: "Check the instruction.",
		Advanced: gate.Options{ShowInChat: true, OnError: gate.OnErrorContinue, TimeoutSeconds: 30}},
	{Name: "agentmsg", Enabled: true, Point: abi.PointAgentMessage, Task: "Check the message.",
		Advanced: gate.Options{ShowInChat: true, OnError: gate.OnErrorContinue, Targets: gate.TargetsAll, TimeoutSeconds: 30}},
	{Name: "block-risky-commands", Enabled: true, Point: abi.PointToolBefore,
		Rule:     &gate.Rule{Kind: runtime.KindModule, Name: "block-risky-commands"},
		Advanced: gate.Options{ShowInChat: true, OnError: gate.OnErrorContinue, Targets: gate.TargetsAll, TimeoutSeconds: 30}},
	{Name: "result", Enabled: true, Point: abi.PointToolAfter, Task: "Check the tool result.",
		Advanced: gate.Options{ShowInChat: true, OnError: gate.OnErrorContinue, TimeoutSeconds: 30}},
	{Name: "answer", Enabled: true, Point: abi.PointTurnEnd, Task: "Check the answer.",
		Advanced: gate.Options{ShowInChat: true, OnError: gate.OnErrorContinue, Targets: gate.TargetsAll, TimeoutSeconds: 30, RedoLimit: 1}},
}

// quietGates are the preset "quiet": gates with "Show the result in the chat" off.
var quietGates = []gate.Gate{
	{Name: "msg-quiet", Enabled: true, Point: abi.PointUserMessage, Task: "Check the instruction.",
		Advanced: gate.Options{ShowInChat: false, OnError: gate.OnErrorContinue, TimeoutSeconds: 30}},
	{Name: "result-quiet", Enabled: true, Point: abi.PointToolAfter, Task: "Check the tool result.",
		Advanced: gate.Options{ShowInChat: false, OnError: gate.OnErrorContinue, TimeoutSeconds: 30}},
}

var (
	sharedOnce    sync.Once
	sharedStack   *stack
	sharedErr     error
	sharedCleanup []func()
)

// TestMain releases the shared stack.
func TestMain(m *testing.M) {
	code := m.Run()
	for i := len(sharedCleanup) - 1; i >= 0; i-- {
		sharedCleanup[i]()
	}
	os.Exit(code)
}

// newStack returns the package's shared stack (compiling the WASM guest takes seconds, so all
// tests share one; they keep apart by session id). Tests using it must not run in parallel:
// the model's answer is shared.
func newStack(t testing.TB) *stack {
	t.Helper()
	wasmPath := testutil.GuestPath(t, "block-risky-commands")
	sharedOnce.Do(func() { sharedStack, sharedErr = buildStack(wasmPath) })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	sharedStack.model.answer(abi.GateOutput{})
	return sharedStack
}

func buildStack(wasmPath string) (*stack, error) {
	ctx := context.Background()
	cleanup := func(f func()) { sharedCleanup = append(sharedCleanup, f) }
	dir, err := os.MkdirTemp("", "pixie-hooks-test-")
	if err != nil {
		return nil, err
	}
	cleanup(func() { os.RemoveAll(dir) })
	st, err := badgerstore.Open(ctx, badgerstore.Options{Dir: filepath.Join(dir, "db"), GCInterval: -1})
	if err != nil {
		return nil, err
	}
	cleanup(func() { st.Close() })
	// A pending cap above what any test queues, so no hint is evicted.
	q, err := hint.New(context.Background(), hint.Config{Store: st, MaxPendingPerSession: 200})
	if err != nil {
		return nil, err
	}
	cleanup(func() { q.Close(context.Background()) })

	cacheDir, err := testutil.WasmCachePath()
	if err != nil {
		return nil, err
	}
	wcfg := wasm.Config{CacheDir: cacheDir}
	val, err := wasm.NewValidator(ctx, wcfg)
	if err != nil {
		return nil, err
	}
	cleanup(func() { val.Close(ctx) })
	reg, err := modules.New(context.Background(), modules.Config{Store: st, Dir: filepath.Join(dir, "blobs"), Validator: val})
	if err != nil {
		return nil, err
	}
	body, err := os.ReadFile(wasmPath)
	if err != nil {
		return nil, err
	}
	if _, err := reg.Put(ctx, "block-risky-commands", body, ""); err != nil {
		return nil, err
	}
	wcfg.Source = reg
	x, err := wasm.New(ctx, wcfg)
	if err != nil {
		return nil, err
	}
	cleanup(func() { x.Close(ctx) })

	o := &openAIServer{reply: "{}"}
	o.srv = httptest.NewServer(o)
	cleanup(o.srv.Close)
	m, err := model.New(model.Config{Provider: "openai", BaseURL: o.srv.URL + "/v1", Model: "test-model", APIKey: "test"})
	if err != nil {
		return nil, err
	}
	gs, err := gate.New(ctx, gate.Config{Store: st, Exec: runtime.Dispatcher{runtime.KindModule: x}, Model: m,
		Home: dir,
		Modules: gate.ModuleCheckerFunc(func(ctx context.Context, name string) (bool, error) {
			_, err := reg.Get(ctx, name)
			if errs.Is(err, errs.NotFound) {
				return false, nil
			}
			return err == nil, err
		}),
	})
	if err != nil {
		return nil, err
	}
	set := gate.Set{Gates: append(append([]gate.Gate{}, testGates...), quietGates...), Presets: []gate.Preset{{Name: "p"}, {Name: "quiet"}}}
	for _, g := range testGates {
		set.Presets[0].Gates = append(set.Presets[0].Gates, gate.Attachment{Gate: g.Name, Enabled: true})
	}
	for _, g := range quietGates {
		set.Presets[1].Gates = append(set.Presets[1].Gates, gate.Attachment{Gate: g.Name, Enabled: true})
	}
	if _, err := gs.Save(ctx, set); err != nil {
		return nil, err
	}
	svc, err := New(ctx, Config{Store: st, Gates: gs, Hints: q, DefaultPreset: "p"})
	if err != nil {
		return nil, err
	}
	return &stack{st: st, hints: q, gates: gs, svc: svc, model: o, dir: dir}, nil
}

// handle runs one hook call and returns the output JSON.
func (s *stack) handle(t testing.TB, preset string, input []byte) Output {
	t.Helper()
	var out Output
	err := s.svc.Handle(context.Background(), Call{Preset: preset}, input, func(o Output) error { out = o; return nil })
	if err != nil {
		t.Fatal(err)
	}
	return out
}

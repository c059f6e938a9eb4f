package extismx

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
)

// TestFieldsPinned pins every unexported field this package reads to extism/go-sdk v1.7.1.
func TestFieldsPinned(t *testing.T) {
	if err := Check(); err != nil {
		t.Fatal(err)
	}
}

// TestKernelIsExtisms checks that Kernel is the kernel Extism embeds, byte for byte.
func TestKernelIsExtisms(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/extism/go-sdk").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	want, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "extism-runtime.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(Kernel(), want) {
		t.Fatal("kernel.wasm differs from the go-sdk module's extism-runtime.wasm: copy it again")
	}
}

// guest is a minimal module: one memory, and gate () -> i32 returning 10.
var guest = []byte("\x00asm\x01\x00\x00\x00" +
	"\x01\x05\x01\x60\x00\x01\x7f" + // type 0: () -> i32
	"\x03\x02\x01\x00" + // function 0: type 0
	"\x05\x03\x01\x00\x01" + // memory: 1 page
	"\x07\x08\x01\x04gate\x00\x00" + // export gate
	"\x0a\x06\x01\x04\x00\x41\x0a\x0b") // body: i32.const 10

// TestReach compiles a plug-in, swaps its kernel for a marked copy (one more export) and checks
// that an instance's kernel is the copy, that its guest module is reachable, and that the
// runtime is the one the plug-in instantiates in.
func TestReach(t *testing.T) {
	ctx := context.Background()
	cp, err := extism.NewCompiledPlugin(ctx, extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: guest}}},
		extism.PluginConfig{RuntimeConfig: wazero.NewRuntimeConfigInterpreter()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close(ctx)
	rt, err := Runtime(cp)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel with its memory exported a second time, as "marked": an export section
	// entry appended.
	marked := appendExport(t, Kernel(), "marked")
	cm, err := rt.CompileModule(ctx, marked)
	if err != nil {
		t.Fatal(err)
	}
	if err := SetKernel(cp, cm); err != nil {
		t.Fatal(err)
	}
	p, err := cp.Instance(ctx, extism.PluginInstanceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	k, err := KernelModule(p)
	if err != nil {
		t.Fatal(err)
	}
	if k.ExportedMemory("marked") == nil {
		t.Fatal("the instance's kernel is not the one set")
	}
	if p.Memory() != k.Memory() {
		t.Fatal("Plugin.Memory is not the kernel's memory")
	}
	g, err := MainModule(p)
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.ExportedFunction("gate").Call(ctx)
	if err != nil || res[0] != 10 {
		t.Fatalf("gate: %v %v", res, err)
	}
	if rt.Module(g.Name()) != g {
		t.Fatal("the guest module is not in the runtime Runtime returned")
	}
}

// appendExport returns wasm with its export section's count incremented and an export of
// memory 0 named name appended (the kernel's export section is small enough for one-byte
// lengths).
func appendExport(t *testing.T, wasm []byte, name string) []byte {
	out := append([]byte(nil), wasm[:8]...)
	r := wasm[8:]
	for len(r) > 0 {
		id := r[0]
		size, n := uleb(r[1:])
		payload := r[1+n : 1+n+int(size)]
		r = r[1+n+int(size):]
		if id == 7 {
			cnt, m := uleb(payload)
			p := append(appendU(nil, cnt+1), payload[m:]...)
			p = append(append(append(p, byte(len(name))), name...), 0x02, 0x00)
			payload = p
		}
		out = append(append(append(out, id), appendU(nil, uint64(len(payload)))...), payload...)
	}
	return out
}

func uleb(b []byte) (uint64, int) {
	var v uint64
	for i, c := range b {
		v |= uint64(c&0x7F) << (7 * i)
		if c&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}

func appendU(b []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

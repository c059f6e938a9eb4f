package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/runtime"
	"github.com/pixie-dev/pixie/sdk/abi"
)

func TestFaults(t *testing.T) {
	e := env(t)
	tests := []struct {
		name    string
		guest   string
		req     runtime.Request
		wantErr error
		errText string
		check   func(t *testing.T, res runtime.Result, h *helper)
	}{
		{name: "infinite loop", guest: "fault-loop", req: runtime.Request{Timeout: 300 * time.Millisecond},
			wantErr: runtime.ErrTimeout, errText: "timed out"},
		{name: "memory bomb", guest: "fault-membomb", wantErr: runtime.ErrTrap, errText: "out of memory"},
		{name: "trap", guest: "fault-trap", wantErr: runtime.ErrTrap, errText: "assignment to entry in nil map"},
		{name: "output over the cap", guest: "fault-output", wantErr: runtime.ErrOutputTooLarge, errText: "300000 bytes"},
		{name: "output at the cap", guest: "fault-output", req: runtime.Request{Vars: map[string]string{"SIZE": "262144"}},
			check: func(t *testing.T, res runtime.Result, _ *helper) {
				if res.ExitCode != 0 || len(res.Stdout) != abi.MaxOutputSize {
					t.Fatalf("exit %d, %d bytes", res.ExitCode, len(res.Stdout))
				}
			}},
		{name: "output one over the cap", guest: "fault-output", req: runtime.Request{Vars: map[string]string{"SIZE": "262145"}},
			wantErr: runtime.ErrOutputTooLarge},
		{name: "21st host call", guest: "fault-calls",
			check: func(t *testing.T, res runtime.Result, h *helper) {
				if res.ExitCode != 1 || !strings.Contains(res.Stderr, "call 21: pixie_ask: rate_limited") {
					t.Fatalf("exit %d, stderr %q", res.ExitCode, res.Stderr)
				}
				if len(h.asks) != 20 {
					t.Fatalf("the helper answered %d asks", len(h.asks))
				}
			}},
		{name: "20 host calls", guest: "fault-calls", req: runtime.Request{Vars: map[string]string{"CALLS": "20"}},
			check: func(t *testing.T, res runtime.Result, h *helper) {
				if res.ExitCode != 0 || res.Stdout != "20 calls answered" {
					t.Fatalf("exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
				}
			}},
		{name: "exit 11 with bad JSON", guest: "fault-badjson",
			check: func(t *testing.T, res runtime.Result, _ *helper) {
				if res.ExitCode != abi.ExitConclude || res.Stdout != "verdict: stop" {
					t.Fatalf("exit %d, stdout %q", res.ExitCode, res.Stdout)
				}
				var out abi.GateOutput
				if err := json.Unmarshal([]byte(res.Stdout), &out); err == nil {
					t.Fatal("the output decodes as gate output")
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.push(t, "testdata/"+tc.guest, tc.guest)
			h := &helper{ask: func(abi.AskRequest) (string, error) { return "ok", nil }}
			req := tc.req
			req.Ref = tc.guest
			req.Helper = h
			start := time.Now()
			res, err := e.run(t, req)
			t.Logf("%s: %v after %s", tc.name, err, time.Since(start).Round(time.Millisecond))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.errText) {
					t.Fatalf("error %v, want %v containing %q (stderr %q)", err, tc.wantErr, tc.errText, res.Stderr)
				}
			} else if err != nil {
				t.Fatalf("error %v (stderr %q)", err, res.Stderr)
			}
			if tc.check != nil {
				tc.check(t, res, h)
			}
			e.alive(t)
		})
	}
}

func TestRefusedModules(t *testing.T) {
	e := env(t)
	noEntry := testutil.Guest(t, "testdata/fault-noentry")
	good := testutil.Guest(t, "testdata/echo")
	tests := []struct {
		name  string
		wasm  []byte
		entry string
		code  errs.Code
		text  string
	}{
		{"no entry point", noEntry, abi.EntryGate, errs.Unprocessable, `does not export the entry point "gate"`},
		{"truncated module", good[:len(good)/2], abi.EntryGate, errs.Unprocessable, "does not compile"},
		{"not wasm", []byte("#!/bin/bash\nexit 0\n"), abi.EntryGate, errs.Unprocessable, "does not compile"},
		{"empty", nil, abi.EntryGate, errs.Unprocessable, "empty"},
		{"foreign import", foreignImport, abi.EntryGate, errs.Unprocessable, "env.launch_missiles"},
		{"wrong entry signature", entryI64, abi.EntryGate, errs.Unprocessable, "must take no parameters and return i32"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := os.ReadDir(e.dir + "/blobs")
			_, err := e.reg.Put(context.Background(), "refused", tc.wasm, tc.entry)
			if errs.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("error %v (%s), want %s containing %q", err, errs.CodeOf(err), tc.code, tc.text)
			}
			after, _ := os.ReadDir(e.dir + "/blobs")
			if len(after) != len(before) {
				t.Fatalf("blobs went from %d to %d files", len(before), len(after))
			}
			if _, err := e.reg.Get(context.Background(), "refused"); !errs.Is(err, errs.NotFound) {
				t.Fatalf("metadata was stored: %v", err)
			}
			e.alive(t)
		})
	}
	t.Run("a Pet skill exporting run is accepted for run", func(t *testing.T) {
		if _, err := e.reg.Put(context.Background(), "skill-run", noEntry, abi.EntryRun); err != nil {
			t.Fatal(err)
		}
		res, err := e.run(t, runtime.Request{Ref: "skill-run", Entry: abi.EntryRun})
		if err != nil || res.ExitCode != abi.ExitSkip {
			t.Fatalf("%+v %v", res, err)
		}
		if _, err := e.run(t, runtime.Request{Ref: "skill-run"}); !errors.Is(err, runtime.ErrNotFound) {
			t.Fatalf("running gate on a run-only module: %v", err)
		}
	})
}

// Hand-assembled modules (the binary format, section by section).
var (
	// (module (import "env" "launch_missiles" (func)) (func (export "gate") (result i32) i32.const 0))
	foreignImport = []byte{
		0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
		0x01, 0x08, 0x02, 0x60, 0x00, 0x00, 0x60, 0x00, 0x01, 0x7f, // types: ()->(), ()->i32
		0x02, 0x17, 0x01, 0x03, 'e', 'n', 'v', 0x0f, 'l', 'a', 'u', 'n', 'c', 'h', '_', 'm', 'i', 's', 's', 'i', 'l', 'e', 's', 0x00, 0x00,
		0x03, 0x02, 0x01, 0x01, // func 1: type 1
		0x07, 0x08, 0x01, 0x04, 'g', 'a', 't', 'e', 0x00, 0x01, // export gate = func 1
		0x0a, 0x06, 0x01, 0x04, 0x00, 0x41, 0x00, 0x0b, // body: i32.const 0
	}
	// (module (func (export "gate") (result i64) i64.const 0))
	entryI64 = []byte{
		0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
		0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7e,
		0x03, 0x02, 0x01, 0x00,
		0x07, 0x08, 0x01, 0x04, 'g', 'a', 't', 'e', 0x00, 0x00,
		0x0a, 0x06, 0x01, 0x04, 0x00, 0x42, 0x00, 0x0b,
	}
	// (module (func (export "gate") (result i32) unreachable))
	unreachable = []byte{
		0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
		0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7f,
		0x03, 0x02, 0x01, 0x00,
		0x07, 0x08, 0x01, 0x04, 'g', 'a', 't', 'e', 0x00, 0x00,
		0x0a, 0x05, 0x01, 0x03, 0x00, 0x00, 0x0b,
	}
)

func TestWasmTrap(t *testing.T) {
	e := env(t)
	if _, err := e.reg.Put(context.Background(), "unreachable", unreachable, ""); err != nil {
		t.Fatal(err)
	}
	_, err := e.run(t, runtime.Request{Ref: "unreachable"})
	if !errors.Is(err, runtime.ErrTrap) || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("error %v", err)
	}
	e.alive(t)
}

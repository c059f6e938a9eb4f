package wasm

import (
	"bytes"
	"context"
	"testing"

	"github.com/pixie-dev/pixie/hostfuncs"
	"github.com/pixie-dev/pixie/sdk/abi"
)

func TestZZResetExact(t *testing.T) {
	e := env(t)
	for _, tracked := range []bool{true, false} {
	e.push(t, "block-risky-commands", "block-risky-commands")
	ctx := context.Background()
	sha, _ := e.x.resolve(ctx, "block-risky-commands")
	m, err := e.x.module(ctx, sha)
	if err != nil { t.Fatal(err) }
	inst, err := m.newInstance(ctx)
	if err != nil { t.Fatal(err) }
	s := m.snap.Load()
	t.Logf("tracked %v %v, reuse %v", inst.gmem.tracked, inst.kmemory.tracked, m.reuse.Load())
	_ = tracked
	for r := 0; r < 3; r++ {
		run := hostfuncs.NewRun(nil, nil, hostfuncs.Limits{})
		vars := map[string]string{abi.VarPoint: abi.PointToolBefore, abi.VarToolName: "Bash"}
		run.SetContext(riskyTarget, vars)
		rc, out, err := inst.call(hostfuncs.WithRun(ctx, run), "gate", []byte(riskyTarget))
		t.Logf("rc=%d out=%q err=%v", rc, out, err)
		if err := inst.reset(); err != nil { t.Fatal(err) }
		g := inst.gmem.buf[:inst.gmem.len]
		if !bytes.Equal(g, s.guest) {
			n := 0
			for p := 0; p < len(s.guest); p += 4096 { if !bytes.Equal(g[p:p+4096], s.guest[p:p+4096]) { n++ } }
			t.Errorf("guest memory differs after reset: %d pages", n)
		}
		if !bytes.Equal(inst.kmemory.buf[:inst.kmemory.len], s.kernel) { t.Errorf("kernel memory differs") }
		for k, gl := range inst.globals { if gl.Get() != s.globals[k] { t.Errorf("global %d differs", k) } }
	}
	inst.close()
	m.release()
	break
	}
}

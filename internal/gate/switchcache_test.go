package gate

import (
	"context"
	"testing"
	"time"
)

func TestSwitchCache(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	ttl := time.Hour
	tests := []struct {
		name string
		run  func(c *switchCache) (off, known bool)
		off  bool
		know bool
	}{
		{"empty: unknown", func(c *switchCache) (bool, bool) {
			off, known, _ := c.get("s/g", t0)
			return off, known
		}, false, false},
		{"a read is remembered", func(c *switchCache) (bool, bool) {
			_, _, gen := c.get("s/g", t0)
			c.put("s/g", sessionSwitch{}, ttl, gen)
			off, known, _ := c.get("s/g", t0)
			return off, known
		}, false, true},
		{"an off switch is remembered until its TTL ends", func(c *switchCache) (bool, bool) {
			_, _, gen := c.get("s/g", t0)
			c.put("s/g", sessionSwitch{Off: true, At: t0}, ttl, gen)
			if off, known, _ := c.get("s/g", t0.Add(ttl-time.Nanosecond)); !off || !known {
				t.Error("forgotten before the TTL ended")
			}
			off, known, _ := c.get("s/g", t0.Add(ttl))
			return off, known
		}, true, false},
		{"a write forgets the key", func(c *switchCache) (bool, bool) {
			_, _, gen := c.get("s/g", t0)
			c.put("s/g", sessionSwitch{}, ttl, gen)
			c.forget("s/g")
			off, known, _ := c.get("s/g", t0)
			return off, known
		}, false, false},
		{"a read that raced with a write is not remembered", func(c *switchCache) (bool, bool) {
			_, _, gen := c.get("s/g", t0) // the evaluation starts
			c.forget("s/g")               // the switch is written meanwhile
			c.put("s/g", sessionSwitch{}, ttl, gen)
			off, known, _ := c.get("s/g", t0)
			return off, known
		}, false, false},
		{"other keys stay", func(c *switchCache) (bool, bool) {
			_, _, gen := c.get("s/a", t0)
			c.put("s/a", sessionSwitch{Off: true, At: t0}, ttl, gen)
			c.forget("s/b")
			off, known, _ := c.get("s/a", t0)
			return off, known
		}, true, true},
		{"a full cache starts over", func(c *switchCache) (bool, bool) {
			for i := range maxSwitchCache + 1 {
				_, _, gen := c.get("k", t0)
				c.put(string(rune('a'+i%26))+time.Duration(i).String(), sessionSwitch{}, ttl, gen)
			}
			if len(c.m) > maxSwitchCache {
				t.Errorf("%d entries", len(c.m))
			}
			return false, len(c.m) == 1
		}, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c switchCache
			off, known := tc.run(&c)
			if off != tc.off || known != tc.know {
				t.Fatalf("off %v known %v, want %v %v", off, known, tc.off, tc.know)
			}
		})
	}
}

// Through the service: a session evaluated while its gate was on (so the cache holds "on")
// sees the switch turned off at its next evaluation, and on again after that.
func TestSessionSwitchAfterCachedEvaluation(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	e.saveGates(t, gateAt("fmt", "user-message", "Check."))
	for i, step := range []struct {
		set  func() error
		skip string
	}{
		{nil, ""},
		{func() error { return e.svc.SetSessionSwitch(ctx, "s1", "fmt", false) }, SkipSwitchedOff},
		{nil, SkipSwitchedOff},
		{func() error { return e.svc.SetSessionSwitch(ctx, "s1", "fmt", true) }, ""},
		{nil, ""},
	} {
		if step.set != nil {
			if err := step.set(); err != nil {
				t.Fatal(err)
			}
		}
		res, err := e.svc.Evaluate(ctx, evalReq("user-message", "x"))
		if err != nil || res.Skipped != step.skip {
			t.Fatalf("step %d: %+v %v, want skipped %q", i, res, err, step.skip)
		}
	}
}

package gate

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/later"
	"github.com/pixie-dev/pixie/internal/store"
)

// clock is a settable clock for Config.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// missingEnv is a Service over a real store with a settable clock and the preset "dev".
func missingEnv(t *testing.T) (*Service, *store.Store, *clock) {
	t.Helper()
	st := openStore(t)
	clk := &clock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	svc, err := New(context.Background(), Config{Store: st, Home: t.TempDir(), Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Save(context.Background(), Set{Gates: []Gate{gateAt("g", "user-message", "Check.")},
		Presets: []Preset{{Name: "dev", Gates: []Attachment{{Gate: "g", Enabled: true}}}}}); err != nil {
		t.Fatal(err)
	}
	return svc, st, clk
}

func askFor(t *testing.T, svc *Service, preset, session, point, host string, after *later.Queue) {
	t.Helper()
	r := evalReq(point, "x")
	r.Session.Preset, r.Session.ID, r.Host, r.After = preset, session, host, after
	res, err := svc.Evaluate(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if want := SkipNoPreset; preset != "dev" && res.Skipped != want {
		t.Fatalf("evaluate %q: skipped %q, want %q", preset, res.Skipped, want)
	}
}

// storedMissing reads gate-missing straight from the store (no flush).
func storedMissing(t *testing.T, st *store.Store) map[string]MissingPreset {
	t.Helper()
	out := map[string]MissingPreset{}
	err := st.View(context.Background(), func(tx *store.Tx) error {
		return missingCol.Each(tx, "", store.ScanOptions{}, func(id string, p MissingPreset) error { out[id] = p; return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func writesOf(svc *Service) int {
	svc.missing.mu.Lock()
	defer svc.missing.mu.Unlock()
	return svc.missing.writes
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestMissingPresetsListed: the presets evaluations ask for that do not exist are listed, most
// recent first, with their count and last sighting; existing presets and names no preset can
// have are not; saving a set that has the preset clears its entry, also for a sighting counted
// before the save and written after it.
func TestMissingPresetsListed(t *testing.T) {
	svc, st, clk := missingEnv(t)
	ctx := context.Background()
	t0 := clk.now()
	if l, err := svc.MissingPresets(ctx); err != nil || l == nil || len(l) != 0 {
		t.Fatalf("empty list: %#v %v", l, err)
	}
	askFor(t, svc, "typo", "s1", "user-message", "claude-code", nil)
	clk.set(t0.Add(time.Minute))
	askFor(t, svc, "default", "s2", "turn-end", "", nil)
	clk.set(t0.Add(2 * time.Minute))
	askFor(t, svc, "typo", "s3", "tool-before", "codex", nil)
	askFor(t, svc, "dev", "s4", "user-message", "", nil)
	askFor(t, svc, "not a name", "s5", "user-message", "", nil)
	askFor(t, svc, strings.Repeat("a", 65), "s5", "user-message", "", nil)

	l, err := svc.MissingPresets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 2 || l[0].Name != "typo" || l[1].Name != "default" {
		t.Fatalf("list %+v", l)
	}
	want := MissingPreset{Name: "typo", Count: 2, FirstSeen: t0, LastSeen: t0.Add(2 * time.Minute), LastSession: "s3", LastPoint: "tool-before", LastHost: "codex"}
	if l[0] != want {
		t.Errorf("typo: %+v, want %+v", l[0], want)
	}
	if d := l[1]; d.Count != 1 || d.LastSession != "s2" || d.LastPoint != "turn-end" || d.LastHost != "" || !d.FirstSeen.Equal(t0.Add(time.Minute)) {
		t.Errorf("default: %+v", d)
	}
	// Counts add up across writes.
	askFor(t, svc, "typo", "s6", "user-message", "", nil)
	if l, _ := svc.MissingPresets(ctx); l[0].Count != 3 || !l[0].FirstSeen.Equal(t0) || l[0].LastSession != "s6" {
		t.Errorf("after a third ask: %+v", l[0])
	}

	// A sighting counted before the save, written after it, does not bring the entry back.
	askFor(t, svc, "typo", "s7", "user-message", "", nil)
	if _, err := svc.SavePreset(ctx, Preset{Name: "typo"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := storedMissing(t, st)["typo"]; ok {
		t.Fatal("saving the preset left its entry in the store")
	}
	l, err = svc.MissingPresets(ctx)
	if err != nil || len(l) != 1 || l[0].Name != "default" {
		t.Fatalf("after creating typo: %+v %v", l, err)
	}
	if _, ok := storedMissing(t, st)["typo"]; ok {
		t.Fatal("the sighting counted before the save was written after it")
	}
	// Deleting the preset again: the next ask lists it afresh.
	if _, err := svc.DeletePreset(ctx, "typo"); err != nil {
		t.Fatal(err)
	}
	askFor(t, svc, "typo", "s8", "user-message", "", nil)
	if l, _ := svc.MissingPresets(ctx); len(l) != 2 || l[0].Name != "typo" || l[0].Count != 1 {
		t.Fatalf("after deleting typo and asking again: %+v", l)
	}
}

// TestMissingPresetsTTL: an entry is listed until MissingPresetTTL after its last sighting,
// and not at that instant.
func TestMissingPresetsTTL(t *testing.T) {
	svc, st, clk := missingEnv(t)
	ctx := context.Background()
	t0 := clk.now()
	askFor(t, svc, "old", "s1", "user-message", "", nil)
	clk.set(t0.Add(time.Hour))
	askFor(t, svc, "newer", "s1", "user-message", "", nil)
	for _, tc := range []struct {
		name string
		at   time.Duration
		want []string
	}{
		{"just before the TTL", MissingPresetTTL - time.Nanosecond, []string{"newer", "old"}},
		{"at the TTL", MissingPresetTTL, []string{"newer"}},
		{"at the newer one's TTL", time.Hour + MissingPresetTTL, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk.set(t0.Add(tc.at))
			l, err := svc.MissingPresets(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range l {
				got = append(got, p.Name)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("listed %v, want %v", got, tc.want)
			}
		})
	}
	// The next write drops the expired entries from the store, and an expired name asked for
	// again starts afresh.
	askFor(t, svc, "old", "s2", "user-message", "", nil)
	svc.missing.flush()
	got := storedMissing(t, st)
	if _, ok := got["newer"]; ok || len(got) != 1 || got["old"].Count != 1 || !got["old"].FirstSeen.Equal(clk.now()) {
		t.Fatalf("stored after the TTL: %+v", got)
	}
}

// TestMissingPresetsBounded: random preset names cannot grow the list past MaxMissingPresets,
// in the store or in memory between writes; a full list replaces the name asked for least, so
// a preset hooks keep asking for stays listed.
func TestMissingPresetsBounded(t *testing.T) {
	svc, st, clk := missingEnv(t)
	ctx := context.Background()
	t0 := clk.now()
	svc.missing.every = time.Hour // only reads write, so the pending map fills
	svc.missing.lastWrite = time.Now()
	for range 3 {
		askFor(t, svc, "real-typo", "s", "user-message", "", nil)
	}
	for i := range MaxMissingPresets - 1 {
		clk.set(t0.Add(time.Duration(i+1) * time.Second))
		askFor(t, svc, fmt.Sprintf("rnd-%03d", i), "s", "user-message", "", nil)
	}
	// Exactly full: every name kept.
	l, err := svc.MissingPresets(ctx)
	if err != nil || len(l) != MaxMissingPresets {
		t.Fatalf("at the bound: %d listed (%v)", len(l), err)
	}
	// One more: the least asked, seen longest ago (rnd-000) makes room.
	clk.set(t0.Add(time.Hour))
	askFor(t, svc, "one-more", "s", "user-message", "", nil)
	l, _ = svc.MissingPresets(ctx)
	got := storedMissing(t, st)
	if len(got) != MaxMissingPresets || len(l) != MaxMissingPresets {
		t.Fatalf("one past the bound: %d stored, %d listed", len(got), len(l))
	}
	if _, ok := got["rnd-000"]; ok {
		t.Error("the least asked name was kept")
	}
	if got["one-more"].Count != 1 || got["real-typo"].Count != 3 {
		t.Errorf("one-more %+v, real-typo %+v", got["one-more"], got["real-typo"])
	}
	// A flood of new names, more than the bound between two writes: memory holds at most the
	// bound, the store still at most the bound, and the name asked for more than once survives.
	for i := range 3 * MaxMissingPresets {
		askFor(t, svc, fmt.Sprintf("flood-%04d", i), "s", "user-message", "", nil)
	}
	svc.missing.mu.Lock()
	pending := len(svc.missing.pending)
	svc.missing.mu.Unlock()
	if pending != MaxMissingPresets {
		t.Fatalf("%d names counted in memory, want the bound %d", pending, MaxMissingPresets)
	}
	l, _ = svc.MissingPresets(ctx)
	got = storedMissing(t, st)
	if len(got) != MaxMissingPresets || len(l) != MaxMissingPresets {
		t.Fatalf("after the flood: %d stored, %d listed", len(got), len(l))
	}
	if got["real-typo"].Count != 3 {
		t.Errorf("real-typo was not kept: %+v", got["real-typo"])
	}
}

// TestMissingPresetsThrottled: a storm of evaluations on a missing preset writes once per
// window, and only after the answers (later.Queue); a read writes what was counted.
func TestMissingPresetsThrottled(t *testing.T) {
	svc, st, _ := missingEnv(t)
	ctx := context.Background()
	svc.missing.every = time.Hour

	// Held by the answer: nothing is written, not even scheduled, until the queue is released.
	q := &later.Queue{}
	askFor(t, svc, "storm", "s0", "user-message", "", q)
	time.Sleep(5 * recordDelay)
	svc.missing.mu.Lock()
	scheduled := svc.missing.scheduled
	svc.missing.mu.Unlock()
	if scheduled || writesOf(svc) != 0 || len(storedMissing(t, st)) != 0 {
		t.Fatalf("written or scheduled before the answer (scheduled %v, writes %d)", scheduled, writesOf(svc))
	}
	q.Release()
	waitUntil(t, "the first write", func() bool { return writesOf(svc) == 1 })
	if c := storedMissing(t, st)["storm"].Count; c < 1 {
		t.Fatalf("stored count %d after the first write", c)
	}

	// The storm: 400 more evaluations, from 8 goroutines.
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				askFor(t, svc, "storm", fmt.Sprintf("s%d-%d", g, i), "user-message", "", nil)
			}
		}()
	}
	wg.Wait()
	time.Sleep(10 * recordDelay)
	if w := writesOf(svc); w != 1 {
		t.Fatalf("%d writes within one window, want 1", w)
	}
	l, err := svc.MissingPresets(ctx)
	if err != nil || len(l) != 1 || l[0].Count != 401 {
		t.Fatalf("after the storm: %+v %v", l, err)
	}
	if w := writesOf(svc); w != 2 {
		t.Fatalf("%d writes after the read, want 2", w)
	}
	// A second read with nothing counted writes nothing.
	if _, err := svc.MissingPresets(ctx); err != nil || writesOf(svc) != 2 {
		t.Fatalf("an idle read wrote (%d writes, %v)", writesOf(svc), err)
	}
	// Close writes what is counted.
	askFor(t, svc, "storm", "last", "user-message", "", nil)
	if err := svc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if c := storedMissing(t, st)["storm"].Count; c != 402 {
		t.Fatalf("stored count %d after Close, want 402", c)
	}
}

func TestEvalRequestHost(t *testing.T) {
	svc, _, _ := missingEnv(t)
	for _, tc := range []struct {
		name, host string
		ok         bool
	}{
		{"empty", "", true},
		{"claude-code", "claude-code", true},
		{"32 bytes", strings.Repeat("h", 32), true},
		{"33 bytes", strings.Repeat("h", 33), false},
		{"a slash", "a/b", false},
		{"a space", "a b", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := evalReq("user-message", "x")
			r.Session.Preset, r.Host = "nope", tc.host
			_, err := svc.Evaluate(context.Background(), r)
			if tc.ok != (err == nil) || (err != nil && !errs.Is(err, errs.Invalid)) {
				t.Fatalf("host %q: %v", tc.host, err)
			}
		})
	}
}

package gate

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/pgstore"
	"github.com/pixie-dev/pixie/internal/store/pgstore/pgtest"
)

// Two Services over one PostgreSQL database, as two replicas: what one saves or switches, the
// other's next evaluation sees, although both cache definitions and switches in memory.
// With the polling fallback (no LISTEN/NOTIFY) they see them within the poll interval.
func TestReplicasSeeEachOthersChanges(t *testing.T) {
	for _, poll := range []bool{false, true} {
		t.Run(fmt.Sprintf("poll=%v", poll), func(t *testing.T) { replicasSeeEachOthersChanges(t, poll) })
	}
}

func replicasSeeEachOthersChanges(t *testing.T, poll bool) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	m, err := model.New(model.Config{})
	if err != nil {
		t.Fatal(err)
	}
	newSvc := func() *Service {
		st, err := pgstore.Open(ctx, pgstore.Options{URL: url, MaxConns: 3, SweepInterval: -1, Poll: poll, PollInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(ctx, Config{Store: st, Model: m, Home: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(ctx); st.Close() })
		return s
	}
	a, b := newSvc(), newSvc()
	if a.helpers.Instance() == b.helpers.Instance() {
		t.Fatal("two replicas share an instance id")
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatal(what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	eval := func(s *Service) Result {
		t.Helper()
		res, err := s.Evaluate(ctx, evalReq("user-message", "hello"))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// b caches "no gate" for the preset.
	if res := eval(b); res.Skipped != SkipNoPreset {
		t.Fatalf("before: %+v", res)
	}
	g := gateAt("g1", "user-message", "check it")
	if _, err := a.Save(ctx, Set{Gates: []Gate{g}, Presets: []Preset{{Name: "dev", Gates: []Attachment{{Gate: "g1", Enabled: true}}}}}); err != nil {
		t.Fatal(err)
	}
	eventually("b's evaluation does not see the gate a saved", func() bool { return eval(b).Gate == "g1" })
	// b caches the switch as on; a switches it off.
	if res := eval(b); res.Skipped == SkipSwitchedOff {
		t.Fatalf("switched off too early: %+v", res)
	}
	if err := a.SetSessionSwitch(ctx, "s1", "g1", false); err != nil {
		t.Fatal(err)
	}
	eventually("b's evaluation ignores a's switch", func() bool { return eval(b).Skipped == SkipSwitchedOff })
	if err := b.SetSessionSwitch(ctx, "s1", "g1", true); err != nil {
		t.Fatal(err)
	}
	eventually("a's evaluation ignores b's switch", func() bool { return eval(a).Skipped != SkipSwitchedOff })
	// The script folder: b lists it, a moves it.
	l, err := b.Scripts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if _, err := a.SetScriptFolder(ctx, other); err != nil {
		t.Fatal(err)
	}
	eventually("b still lists the old script folder", func() bool {
		l2, err := b.Scripts(ctx)
		return err == nil && l2.Folder == other && l2.Folder != l.Folder
	})
	// A lost-notification mark makes b forget everything it holds.
	b.heard(store.Note{Lost: true})
	b.mu.Lock()
	snap, listing := b.snap, b.listing
	b.mu.Unlock()
	if snap != nil || listing != nil {
		t.Fatal("a lost mark left caches in place")
	}
}

package pet_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pixie-dev/pixie/internal/pet"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
)

// Example imports a Skill in two steps (inspect, then a confirmed register), sets an
// environment value, and shows the wheel. No model is configured, so the instruction Skill is
// on the wheel but unavailable, with the reason.
func Example() {
	ctx := context.Background()
	tmp, _ := os.MkdirTemp("", "pet-example-")
	defer os.RemoveAll(tmp)
	st, _ := badgerstore.Open(ctx, badgerstore.Options{Dir: filepath.Join(tmp, "data"), GCInterval: -1})
	defer st.Close()
	svc, _ := pet.New(context.Background(), pet.Config{Store: st, Workspace: filepath.Join(tmp, "workspace")})

	dir := filepath.Join(tmp, "review-mr")
	_ = os.MkdirAll(dir, 0o755)
	_ = os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("---\nname: review-mr\ndescription: Review a merge request.\n---\nReview the MR in the snapshot.\n"), 0o644)

	in, err := svc.Inspect(ctx, dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(in.Name, in.Kind, len(in.Files), "file(s)")
	_, err = svc.Register(ctx, pet.RegisterRequest{Path: dir, Confirm: true, Fingerprint: in.Fingerprint, Enabled: true, Shortcut: true})
	fmt.Println("registered:", err == nil)

	en, _ := svc.SetEnv(ctx, "", "CR_GROUP", "oc_123")
	fmt.Println(en.Var, en.Value)

	w, _ := svc.Wheel(ctx)
	for _, e := range w.Entries {
		fmt.Printf("ring %d slot %d: %s available=%v (%s)\n", e.Ring, e.Slot, e.Label, e.Available, e.Reason)
	}
	_, err = svc.Invoke(ctx, pet.InvokeRequest{Skill: "review-mr", Snapshot: pet.Snapshot{Scope: "session:abc", CapturedAt: time.Now()}})
	fmt.Println(err)
	// Output:
	// review-mr instructions 1 file(s)
	// registered: true
	// DSH_PET_CR_GROUP ********
	// ring 1 slot 0: review-mr available=false (Skill review-mr cannot run: no Pixie model is configured (instruction Skills need one))
	// Skill review-mr cannot run: no Pixie model is configured (instruction Skills need one)
}

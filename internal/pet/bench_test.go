package pet_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/pixie-dev/pixie/internal/pet"
)

// BenchmarkInvokeInstructions measures one Invocation end to end (validation of the Skill
// directory, the Task transaction, history, the model call to a local test server, the result
// transaction); the Task grows by one Invocation per iteration, up to the history cap.
func BenchmarkInvokeInstructions(b *testing.B) {
	_, m := newModelServer(b)
	e := newEnv(b, nil, m, pet.Config{})
	register(b, e.svc, skillDir(b, "a", "d", "body", nil))
	ctx := context.Background()
	snap := snapshot("session:s1")
	b.ResetTimer()
	for b.Loop() {
		if _, err := e.svc.Invoke(ctx, pet.InvokeRequest{Skill: "a", Snapshot: snap}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInspect measures the read-only inspection of a Skill of 50 small files (walk,
// validation, fingerprint).
func BenchmarkInspect(b *testing.B) {
	e := newEnv(b, nil, nil, pet.Config{})
	files := map[string]string{}
	for i := range 49 {
		files[fmt.Sprintf("dir%d/file%d.md", i%5, i)] = fmt.Sprintf("content %d\n", i)
	}
	dir := skillDir(b, "a", "d", "body", files)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if _, err := e.svc.Inspect(ctx, dir); err != nil {
			b.Fatal(err)
		}
	}
}

package rewrite_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/rewrite"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
)

func openStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newRules(t testing.TB, cfg rewrite.Config) *rewrite.Rules {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = openStore(t)
	}
	r, err := rewrite.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNewNeedsAStore(t *testing.T) {
	if _, err := rewrite.New(context.Background(), rewrite.Config{}); !errs.Is(err, errs.Invalid) {
		t.Fatalf("err = %v, want invalid", err)
	}
}

func TestValidation(t *testing.T) {
	r := newRules(t, rewrite.Config{})
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
		code errs.Code // "" means accepted
	}{
		{"message", func() error { return r.ReplaceMessage(ctx, "s1", "the prompt", "the replacement") }, ""},
		{"empty replacement", func() error { return r.ReplaceMessage(ctx, "s1", "the prompt", "") }, ""},
		{"no session", func() error { return r.ReplaceMessage(ctx, "", "a", "b") }, errs.Invalid},
		{"a slash in the session", func() error { return r.ReplaceMessage(ctx, "a/b", "a", "b") }, errs.Invalid},
		{"a control character in the session", func() error { return r.ReplaceMessage(ctx, "a\nb", "a", "b") }, errs.Invalid},
		{"a session over 256 bytes", func() error { return r.ReplaceMessage(ctx, strings.Repeat("s", 257), "a", "b") }, errs.Invalid},
		{"a session of 256 bytes", func() error { return r.ReplaceMessage(ctx, strings.Repeat("s", 256), "a", "b") }, ""},
		{"an empty original", func() error { return r.ReplaceMessage(ctx, "s1", "", "b") }, errs.Invalid},
		{"a replacement at the cap", func() error { return r.ReplaceMessage(ctx, "s1", "a", strings.Repeat("x", rewrite.MaxTextSize)) }, ""},
		{"a replacement over the cap", func() error { return r.ReplaceMessage(ctx, "s1", "a", strings.Repeat("x", rewrite.MaxTextSize+1)) }, errs.TooLarge},
		{"an original over the cap", func() error { return r.ReplaceMessage(ctx, "s1", strings.Repeat("x", rewrite.MaxTextSize+1), "b") }, errs.TooLarge},
		{"a replacement that is not UTF-8", func() error { return r.ReplaceMessage(ctx, "s1", "a", "\xff") }, errs.Invalid},
		{"a tool result", func() error { return r.ReplaceToolResult(ctx, "s1", "toolu_01", "digest") }, ""},
		{"no call id", func() error { return r.ReplaceToolResult(ctx, "s1", "", "digest") }, errs.Invalid},
		{"a slash in the call id", func() error { return r.ReplaceToolResult(ctx, "s1", "../x", "digest") }, errs.Invalid},
		{"a call id over 256 bytes", func() error { return r.ReplaceToolResult(ctx, "s1", strings.Repeat("c", 257), "d") }, errs.Invalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if tc.code == "" && err != nil || tc.code != "" && !errs.Is(err, tc.code) {
				t.Fatalf("err = %v, want %q", err, tc.code)
			}
		})
	}
}

// A session's rules are its own; a message rule matches its original exactly (not a prefix, not
// another text of the same length); a second rule for a call replaces the first.
func TestRulesOfASession(t *testing.T) {
	r := newRules(t, rewrite.Config{})
	ctx := context.Background()
	if err := r.ReplaceMessage(ctx, "s1", "delete the build dir", "delete ./build (generated)"); err != nil {
		t.Fatal(err)
	}
	if err := r.ReplaceToolResult(ctx, "s1", "toolu_1", "first digest"); err != nil {
		t.Fatal(err)
	}
	if err := r.ReplaceToolResult(ctx, "s1", "toolu_1", "second digest"); err != nil {
		t.Fatal(err)
	}
	rs, err := r.For(ctx, "s1")
	if err != nil || len(rs) != 2 {
		t.Fatalf("rules %+v %v", rs, err)
	}
	msg, tool := rs[0], rs[1]
	if msg.Kind != rewrite.KindMessage || msg.Bound || !msg.AppliedAt.IsZero() || msg.Text != "delete ./build (generated)" {
		t.Fatalf("message rule %+v", msg)
	}
	for text, want := range map[string]bool{"delete the build dir": true, "delete the build di": false, "delete the build dIr": false, "": false} {
		if msg.Matches(text) != want {
			t.Errorf("Matches(%q) = %v", text, !want)
		}
	}
	if tool.Kind != rewrite.KindToolResult || tool.CallID != "toolu_1" || tool.Text != "second digest" || tool.Matches("toolu_1") {
		t.Fatalf("tool rule %+v", tool)
	}
	if other, err := r.For(ctx, "s2"); err != nil || len(other) != 0 {
		t.Fatalf("another session sees %+v %v", other, err)
	}
	if other, err := r.For(ctx, "s"); err != nil || len(other) != 0 {
		t.Fatalf("a session whose id prefixes s1 sees %+v %v", other, err)
	}
}

// Applied binds a message rule to its first place, once: a later call does not move it.
func TestAppliedBindsOnce(t *testing.T) {
	r := newRules(t, rewrite.Config{})
	ctx := context.Background()
	if err := r.ReplaceMessage(ctx, "s1", "a", "b"); err != nil {
		t.Fatal(err)
	}
	rs, _ := r.For(ctx, "s1")
	if err := r.Applied(ctx, "s1", rs[0].ID, 3); err != nil {
		t.Fatal(err)
	}
	if err := r.Applied(ctx, "s1", rs[0].ID, 7); err != nil {
		t.Fatal(err)
	}
	rs, _ = r.For(ctx, "s1")
	if !rs[0].Bound || rs[0].Index != 3 || rs[0].AppliedAt.IsZero() {
		t.Fatalf("rule %+v, want bound at 3", rs[0])
	}
	if err := r.Applied(ctx, "s1", "m-nope", 0); !errs.Is(err, errs.NotFound) {
		t.Fatalf("an unknown rule: %v", err)
	}
	if err := r.Applied(ctx, "s2", rs[0].ID, 0); !errs.Is(err, errs.NotFound) {
		t.Fatalf("another session's rule: %v", err)
	}
}

// A session holds at most MaxPerSession rules: the next is refused, while a rule that replaces
// one of the same call still goes in.
func TestMaxPerSession(t *testing.T) {
	r := newRules(t, rewrite.Config{MaxPerSession: 3})
	ctx := context.Background()
	for i := range 3 {
		if err := r.ReplaceToolResult(ctx, "s1", fmt.Sprintf("call-%d", i), "d"); err != nil {
			t.Fatalf("rule %d: %v", i+1, err)
		}
	}
	if err := r.ReplaceMessage(ctx, "s1", "a", "b"); !errs.Is(err, errs.TooLarge) {
		t.Fatalf("rule 4: %v, want too_large", err)
	}
	if err := r.ReplaceToolResult(ctx, "s1", "call-0", "new"); err != nil {
		t.Fatalf("replacing a call's rule at the cap: %v", err)
	}
	if err := r.ReplaceMessage(ctx, "s2", "a", "b"); err != nil {
		t.Fatalf("another session's first rule: %v", err)
	}
}

// A pending rule expires after PendingTTL; an applied one is kept for KeepTTL.
func TestPendingRulesExpire(t *testing.T) {
	r := newRules(t, rewrite.Config{PendingTTL: time.Second, KeepTTL: time.Hour})
	ctx := context.Background()
	if err := r.ReplaceMessage(ctx, "s1", "never seen", "x"); err != nil {
		t.Fatal(err)
	}
	if err := r.ReplaceMessage(ctx, "s1", "applied", "y"); err != nil {
		t.Fatal(err)
	}
	rs, _ := r.For(ctx, "s1")
	if err := r.Applied(ctx, "s1", rs[1].ID, 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond) // the store's TTL counts whole seconds
	rs, err := r.For(ctx, "s1")
	if err != nil || len(rs) != 1 || rs[0].Text != "y" {
		t.Fatalf("after the pending TTL: %+v %v (want only the applied rule)", rs, err)
	}
}

func Example() {
	dir, _ := os.MkdirTemp("", "rewrite-example-")
	defer os.RemoveAll(dir)
	st, _ := badgerstore.Open(context.Background(), badgerstore.Options{Dir: dir, GCInterval: -1})
	defer st.Close()
	r, _ := rewrite.New(context.Background(), rewrite.Config{Store: st})
	ctx := context.Background()
	_ = r.ReplaceMessage(ctx, "session-1", "rm -rf build", "Remove ./build (it holds generated files only).")
	rs, _ := r.For(ctx, "session-1")
	fmt.Println(rs[0].Kind, rs[0].Bound, rs[0].Matches("rm -rf build"), rs[0].Text)
	// Output:
	// message false true Remove ./build (it holds generated files only).
}

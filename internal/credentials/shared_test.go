package credentials_test

import (
	"context"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/credentials"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/pgstore"
	"github.com/pixie-dev/pixie/internal/store/pgstore/pgtest"
)

// Over a shared store the credentials live in the database: the first replica brings its
// home's file, a later one's file does not overwrite them, and what one replica saves or
// deletes the other reads at once.
func TestSharedCredentials(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	open := func() *store.Store {
		st, err := pgstore.Open(ctx, pgstore.Options{URL: url, MaxConns: 2, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	homeA, homeB := t.TempDir(), t.TempDir()
	if err := credentials.Open(homeA).Set(ctx, "PIXIE_MODEL_API_KEY", "sk-from-a"); err != nil {
		t.Fatal(err)
	}
	if err := credentials.Open(homeB).Set(ctx, "PIXIE_MODEL_API_KEY", "sk-from-b"); err != nil {
		t.Fatal(err)
	}
	a, err := credentials.For(ctx, open(), homeA)
	if err != nil {
		t.Fatal(err)
	}
	b, err := credentials.For(ctx, open(), homeB)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]credentials.Secrets{"a": a, "b": b} {
		if v, ok, err := s.Get(ctx, "PIXIE_MODEL_API_KEY"); err != nil || !ok || v != "sk-from-a" {
			t.Fatalf("%s reads %q %v %v, want the first replica's key", name, v, ok, err)
		}
	}
	if err := b.Set(ctx, "LARK_APP_SECRET", "lark-s"); err != nil {
		t.Fatal(err)
	}
	if names, err := a.Names(ctx); err != nil || strings.Join(names, ",") != "LARK_APP_SECRET,PIXIE_MODEL_API_KEY" {
		t.Fatalf("names on a: %v %v", names, err)
	}
	if err := a.Delete(ctx, "LARK_APP_SECRET"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.Get(ctx, "LARK_APP_SECRET"); err != nil || ok {
		t.Fatalf("a deleted key is still on b: %v %v", ok, err)
	}
	// The limits are the file's.
	if err := a.Set(ctx, "K", strings.Repeat("x", credentials.MaxValueSize)); err != nil {
		t.Fatalf("a value at the limit: %v", err)
	}
	for _, c := range []struct {
		name, key, value string
		code             errs.Code
	}{
		{"empty value", "K", "", errs.Invalid},
		{"over the limit", "K", strings.Repeat("x", credentials.MaxValueSize+1), errs.TooLarge},
		{"bad name", "a/b", "v", errs.Invalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := a.Set(ctx, c.key, c.value)
			if !errs.Is(err, c.code) {
				t.Fatalf("got %v, want %s", err, c.code)
			}
			if err != nil && c.value != "" && strings.Contains(err.Error(), c.value) {
				t.Fatal("the error holds the value")
			}
		})
	}
}

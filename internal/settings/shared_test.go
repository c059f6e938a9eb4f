package settings

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/credentials"
	"github.com/pixie-dev/pixie/internal/judge"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/store/pgstore"
	"github.com/pixie-dev/pixie/internal/store/pgstore/pgtest"
)

// pgRig is one replica's settings over a shared PostgreSQL store, with the shared credentials.
func pgRig(t *testing.T, url string) *rig {
	t.Helper()
	ctx := context.Background()
	st, err := pgstore.Open(ctx, pgstore.Options{URL: url, MaxConns: 3, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r := &rig{t: t, home: t.TempDir(), env: env{}, logs: &bytes.Buffer{}, st: st, cfg: baseConfig(config.ModelConfig{})}
	secrets, err := credentials.For(ctx, st, r.home)
	if err != nil {
		t.Fatal(err)
	}
	r.model = model.NewSwappable(nil)
	log := slog.New(slog.NewJSONHandler(r.logs, nil))
	keys := judge.NewKeyStore(judge.KeyStoreOptions{Getenv: func(string) string { return "" }, Secrets: secrets})
	if r.judge, err = judge.New(ctx, judge.Config{Logger: log, PixieModel: r.model, Keys: keys}); err != nil {
		t.Fatal(err)
	}
	r.svc, err = New(ctx, Config{Config: r.cfg, Store: st, Secrets: secrets, Model: r.model, Judge: r.judge,
		LookupEnv: r.env.lookup, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.svc.Close(ctx) })
	return r
}

// The model saved on one replica (with its API key, in the shared credentials) is the model
// the other replica calls, without a restart; a reset on the other goes back on the first.
func TestSettingsReachEveryReplica(t *testing.T) {
	url := pgtest.NewDatabase(t)
	a, b := pgRig(t, url), pgRig(t, url)
	f := newFake(t, false, keyA, `{"yes": 0.9, "no": 0.1}`)
	ctx := context.Background()
	if _, err := a.svc.SetModel(ctx, ModelInput{Provider: ptr("openai"), BaseURL: ptr(f.baseURL()), Model: ptr("gpt-a"), APIKey: ptr(keyA)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for in := b.model.Info(); in.Model != "gpt-a" || !in.HasAPIKey; in = b.model.Info() {
		if time.Now().After(deadline) {
			t.Fatalf("the other replica's model: %+v", in)
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := b.ask(t)
	if err != nil || resp.Model != "gpt-a-answered" {
		t.Fatalf("a call through the other replica: %+v %v", resp, err)
	}
	if calls := f.requests(); len(calls) != 1 || calls[0].Auth != keyA {
		t.Fatalf("the fake saw %+v", calls)
	}
	if _, err := b.svc.ResetModel(ctx); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for a.model.Info().Model == "gpt-a" {
		if time.Now().After(deadline) {
			t.Fatalf("the first replica kept the model the other reset: %+v", a.model.Info())
		}
		time.Sleep(20 * time.Millisecond)
	}
	noSecret(t, "logs", a.logs.String()+b.logs.String())
}

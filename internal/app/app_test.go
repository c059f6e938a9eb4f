package app_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/app"
	"github.com/pixie-dev/pixie/internal/config"
)

func newConfig(t *testing.T, home string) app.Config {
	t.Helper()
	cfg, err := config.Load(home, func(string) string { return "" }, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return app.Config{Config: cfg, Version: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// TestNewAndClose builds the whole server over a fresh home, serves /v1/info with the admin
// token it took, and releases every component; a second start over the same home while the
// first holds it is refused with the reason, and releases what it made.
func TestNewAndClose(t *testing.T) {
	ctx := context.Background()
	home := filepath.Join(t.TempDir(), "home")
	a, err := app.New(ctx, newConfig(t, home))
	if err != nil {
		t.Fatal(err)
	}
	token, fresh := a.Token()
	if !fresh || token == "" {
		t.Fatalf("a fresh home's token: %q fresh=%v", token, fresh)
	}
	ts := httptest.NewServer(a.Server().Handler())
	defer ts.Close()
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/v1/info", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"driver":"badger"`) {
		t.Fatalf("/v1/info: %d %s", resp.StatusCode, body)
	}
	if err := a.Listening(ctx, ts.URL); err != nil {
		t.Fatal(err)
	}

	if b, err := app.New(ctx, newConfig(t, home)); err == nil || b != nil || !strings.Contains(err.Error(), "is using the home") {
		t.Fatalf("a second start over a held home: %v %v", b, err)
	}

	if err := a.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatalf("a second close: %v", err)
	}
	// Released: the home can be opened again, and its token is no longer fresh.
	b, err := app.New(ctx, newConfig(t, home))
	if err != nil {
		t.Fatal(err)
	}
	if again, fresh := b.Token(); again != token || fresh {
		t.Fatalf("token after a restart: fresh=%v same=%v", fresh, again == token)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

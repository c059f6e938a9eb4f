// Package e2e drives Studio, the web UI, in a real headless Chromium (Debian's chromium, through
// chromedp) against a real `pixie serve` process, and writes a screenshot of each page to
// bin/screenshots/ for review.
package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pixie-dev/pixie/internal/testutil"
)

// chromium finds the browser, or skips the test outside CI (CI installs it and must not skip).
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed; .ci/run must install it")
	}
	t.Skip("chromium is not installed")
	return ""
}

// Browser is one headless Chromium tab.
type Browser struct {
	Ctx    context.Context
	shots  string
	cancel func()
}

// NewBrowser starts Chromium with a fresh profile and a window of w×h.
func NewBrowser(t *testing.T, w, h int) *Browser {
	exe := chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		// Chromium puts scratch folders (org.chromium.Chromium.*) in $TMPDIR and leaves some
		// behind when it is stopped; in the test's own folder they go with the test.
		chromedp.Env("TMPDIR=" + t.TempDir()),
		chromedp.WindowSize(w, h),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, tcancel := context.WithTimeout(ctx, 3*time.Minute)
	b := &Browser{Ctx: ctx, cancel: func() { tcancel(); cancel(); acancel() }}
	b.shots = filepath.Join(testutil.Root(), "bin", "screenshots")
	if err := os.MkdirAll(b.shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return b
}

// Run runs actions, failing the test with a screenshot on error.
func (b *Browser) Run(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.Shot(t, "FAILED-"+sanitize(t.Name()+"-"+what))
		t.Fatalf("%s: %v", what, err)
	}
}

// Shot writes a full-page screenshot named name.png.
func (b *Browser) Shot(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 20*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	p := filepath.Join(b.shots, sanitize(t.Name()+"-"+name)+".png")
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		t.Logf("write %s: %v", p, err)
	}
}

func sanitize(s string) string {
	out := []rune{}
	for _, r := range s {
		if r == '/' || r == ' ' || r == ':' {
			r = '_'
		}
		out = append(out, r)
	}
	return string(out)
}

// Text returns the visible text of the first element matching the CSS selector.
func (b *Browser) Text(t *testing.T, css string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(css)))
	if err != nil {
		b.Shot(t, "FAILED-"+sanitize(t.Name()+"-text"))
		t.Fatalf("text of %s: %v", css, err)
	}
	return s
}

// Eval evaluates a JavaScript expression and returns its value as JSON-decoded into T.
func Eval[T any](t *testing.T, b *Browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("eval %s: %v", expr, err)
	}
	return v
}

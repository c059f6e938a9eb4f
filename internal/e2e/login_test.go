package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/pixie-dev/pixie/internal/testutil"
)

// login opens Studio, tries a wrong token, then logs in with the admin token.
func login(t *testing.T, b *Browser, p *testutil.Proc) {
	t.Helper()
	b.Run(t, "open", chromedp.Navigate(p.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#login-token")))
	shot(t, b, "login")
	b.Run(t, "wrong token", chromedp.SendKeys(chromedp.CSS("#login-token"), "not-the-token"),
		click(chromedp.CSS("#login-form button[type=submit]")), chromedp.WaitVisible(chromedp.CSS("#login-error")))
	if msg := b.Text(t, "#login-error"); !strings.Contains(msg, "not right") {
		t.Fatalf("wrong-token message: %q", msg)
	}
	b.Run(t, "log in", chromedp.SetValue(chromedp.CSS("#login-token"), p.Token(t)),
		click(chromedp.CSS("#login-form button[type=submit]")), chromedp.WaitVisible(chromedp.CSS("#app nav")))
}

func TestLogin(t *testing.T) {
	p := testutil.StartServer(t, t.TempDir(), nil)
	b := NewBrowser(t, 1280, 800)
	login(t, b, p)
	shot(t, b, "after-login")
}

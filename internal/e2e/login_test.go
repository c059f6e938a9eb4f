package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/pixie-dev/pixie/internal/testutil"
	"github.com/pixie-dev/pixie/server"
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

// TestLogoutEndsTheSessionOnTheServer logs in with Chromium, keeps a copy of the session
// cookie, and presses Log out: the UI's own logout request (same-origin, so it carries an
// allowed Origin) must end the session on the server, so that the copied cookie, replayed
// outside the browser, is refused.
func TestLogoutEndsTheSessionOnTheServer(t *testing.T) {
	p := testutil.StartServer(t, t.TempDir(), nil)
	b := NewBrowser(t, 1280, 800)
	login(t, b, p)
	res, err := chromedp.Call(b.Ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatal(err)
	}
	var session string
	for _, c := range res.Cookies {
		if c.Name == server.CookieName {
			session = c.Value
		}
	}
	if session == "" {
		t.Fatal("no session cookie after login")
	}
	info := func() int {
		r, _ := http.NewRequest("GET", p.URL+"/v1/info", nil)
		r.AddCookie(&http.Cookie{Name: server.CookieName, Value: session})
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := info(); st != 200 {
		t.Fatalf("the copied cookie before logout: %d", st)
	}
	b.Run(t, "log out", click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("#login-token")))
	if st := info(); st != 401 {
		t.Fatalf("the copied cookie after logout: %d, want 401", st)
	}
}

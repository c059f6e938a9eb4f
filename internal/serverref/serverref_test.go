package serverref

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
)

// TestResolve: the URL from --url, else $PIXIE_SERVER_URL, else the configured address; the
// token from --token, else the environment, else the home's file. Each says where it came from.
func TestResolve(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "token"), []byte("file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := func(string) (string, error) { return "127.0.0.1:7777", nil }
	tests := []struct {
		name                     string
		env                      map[string]string
		flags                    Flags
		base, urlFrom, tok, from string
		err                      string
	}{
		{name: "flags", flags: Flags{URL: "http://h:1/", Token: "flag", Home: home}, base: "http://h:1", urlFrom: "--url", tok: "flag", from: "--token"},
		{name: "environment", env: map[string]string{"PIXIE_SERVER_URL": "https://h:2", "PIXIE_TOKEN": "env"}, flags: Flags{Home: home, TokenEnv: []string{"PIXIE_TOKEN"}},
			base: "https://h:2", urlFrom: "$PIXIE_SERVER_URL", tok: "env", from: "$PIXIE_TOKEN"},
		{name: "home", flags: Flags{Home: home}, base: "http://127.0.0.1:7777", urlFrom: "the default address", tok: "file-token", from: filepath.Join(home, "token")},
		{name: "no scheme", flags: Flags{URL: "h:1", Home: home}, err: "has no scheme"},
		{name: "no token file", flags: Flags{URL: "http://h:1", Home: t.TempDir()}, err: "no admin token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"PIXIE_SERVER_URL", "PIXIE_ADMIN_TOKEN", "PIXIE_TOKEN", "PIXIE_ADDR"} {
				t.Setenv(k, tc.env[k])
			}
			r, err := Resolve(tc.flags, "v", addr)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Base != tc.base || r.URLFrom != tc.urlFrom || r.Token != tc.tok || r.TokenFrom != tc.from {
				t.Fatalf("got %+v", r)
			}
		})
	}
}

// TestErrors: an unreachable server's error names the URL and the cause; a refusal keeps the
// server's code and says where the token came from, never the token.
func TestErrors(t *testing.T) {
	r := Ref{Base: "http://h:1", URLFrom: "--url", Token: "sekrit", TokenFrom: "$PIXIE_TOKEN", Version: "v1"}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{name: "refused", err: r.Unreachable(errors.New("dial tcp 127.0.0.1:1: connect: connection refused")), want: "(URL from --url; is `pixie serve` running?): connection refused"},
		{name: "tls", err: r.Unreachable(errors.New("tls: failed to verify certificate: x509: certificate signed by unknown authority")), want: "running?): tls: failed to verify certificate: x509: certificate signed by unknown authority"},
		{name: "401", err: r.AnswerError(401, []byte(`{"error":{"code":"unauthorized","message":"bad token"}}`)), want: "HTTP 401: bad token (server http://h:1, URL from --url; the token came from $PIXIE_TOKEN"},
		{name: "404 without a body", err: r.AnswerError(404, nil), want: "as new as this CLI (v1)?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(tc.err.Error(), tc.want) || strings.Contains(tc.err.Error(), "sekrit") {
				t.Fatalf("%v\nwant %q", tc.err, tc.want)
			}
		})
	}
	if !errs.Is(r.AnswerError(401, nil), errs.Unauthorized) {
		t.Fatal("a bare 401 is not unauthorized")
	}
}

package lark

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pixie-dev/pixie/internal/errs"
)

func TestBinding(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	st := h.ch.Status(ctx)
	if !st.Available || st.BotOpenID != botOpenID || st.AppID != h.appID || st.BotName != "Pixie Test" {
		t.Fatalf("status after bind: %+v", st)
	}
	raw, _ := json.Marshal(st)
	for _, s := range []string{testSecret, testToken, testKey} {
		if strings.Contains(string(raw), s) {
			t.Fatalf("status reveals a secret: %s", raw)
		}
	}
	for name, want := range map[string]string{SecretAppID: h.appID, SecretAppSecret: testSecret,
		SecretVerificationToken: testToken, SecretEncryptKey: testKey} {
		if v, ok, _ := h.secrets.Get(ctx, name); !ok || v != want {
			t.Fatalf("credential %s not stored", name)
		}
	}
	// The binding survives a restart (secrets from the credentials, open_id from the store).
	h.restart()
	if st := h.ch.Status(ctx); !st.Available || st.BotOpenID != botOpenID {
		t.Fatalf("after restart: %+v", st)
	}
}

func TestBindRefusals(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	cases := []struct {
		name string
		req  BindRequest
		code errs.Code
	}{
		{"missing app id", BindRequest{AppSecret: "s", VerificationToken: "t"}, errs.Invalid},
		{"missing secret", BindRequest{AppID: "cli_x", VerificationToken: "t"}, errs.Invalid},
		{"missing token", BindRequest{AppID: "cli_x", AppSecret: "s"}, errs.Invalid},
		{"space in a secret", BindRequest{AppID: "cli_x", AppSecret: "s s", VerificationToken: "t"}, errs.Invalid},
		{"too long", BindRequest{AppID: "cli_x", AppSecret: strings.Repeat("s", 257), VerificationToken: "t"}, errs.Invalid},
		{"wrong secret", BindRequest{AppID: "cli_other1", AppSecret: "wrong", VerificationToken: "t"}, errs.Unprocessable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.ch.Bind(ctx, tc.req)
			if errs.CodeOf(err) != tc.code {
				t.Fatalf("err %v (code %s), want %s", err, errs.CodeOf(err), tc.code)
			}
			if strings.Contains(err.Error(), "wrong") && tc.name == "wrong secret" {
				t.Fatalf("the error repeats the secret: %v", err)
			}
			// Nothing changed: the earlier binding still works.
			if v, _, _ := h.secrets.Get(ctx, SecretAppSecret); v != testSecret {
				t.Fatal("a refused bind changed the stored secret")
			}
			if st := h.ch.Status(ctx); !st.Available || st.AppID != h.appID {
				t.Fatalf("a refused bind changed the binding: %+v", st)
			}
		})
	}
}

func TestBindUnreachableLark(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	cfg := h.cfg
	cfg.BaseURL = "http://127.0.0.1:1"
	cfg.Registerer = prometheus.NewRegistry()
	cfg.Store = h.st
	ch, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close(context.Background())
	_, err = ch.Bind(ctx, BindRequest{AppID: "cli_unreach", AppSecret: "s", VerificationToken: "t"})
	if c := errs.CodeOf(err); c != errs.Upstream && c != errs.Timeout {
		t.Fatalf("unreachable Lark: %v (%s)", err, c)
	}
}

package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/app"
	"github.com/pixie-dev/pixie/internal/config"
)

func TestLarkCLI(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	cfg := config.Defaults(home)
	cfg.Lark.Enabled = true
	cfg.Lark.DefaultWorkspace = "~/pixie-lark-test-ws"
	a, err := app.New(ctx, app.Config{Config: cfg, Version: version, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close(ctx) }()
	status := a.Lark().Status(ctx)
	uh, _ := os.UserHomeDir()
	if status.SpoolDir != filepath.Join(home, "spool", "lark") || status.DefaultWorkspace != filepath.Join(uh, "pixie-lark-test-ws") ||
		!status.Enabled || status.Available || status.Problem == "" {
		t.Fatalf("wired channel: %+v", status)
	}
	tok, _ := a.Token()
	ts := httptest.NewServer(a.Server().Handler())
	defer ts.Close()

	run := func(stdin string, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		args = append(args, "--url", ts.URL, "--token", tok, "--home", home)
		code := runLark(ctx, args, strings.NewReader(stdin), &out, &errb)
		return code, out.String(), errb.String()
	}
	cases := []struct {
		name    string
		stdin   string
		args    []string
		code    int
		out     string
		errText string
	}{
		{"status", "", []string{"status"}, 0, "unavailable: no Lark bot is bound", ""},
		{"pair needs a binding", "", []string{"pair"}, 1, "", "unavailable"},
		{"allow add", "", []string{"allow", "add", "ou_cli1", "--name", "Cli", "--owner"}, 0, `"owner": true`, ""},
		{"allow add bad", "", []string{"allow", "add", "someone"}, 1, "", "open_id"},
		{"allow ls", "", []string{"allow", "ls"}, 0, "ou_cli1", ""},
		{"session add", "", []string{"session", "add", "host-session-1", "--workspace", "/w"}, 0, `"shortId": "host-s"`, ""},
		{"sessions", "", []string{"sessions"}, 0, "host-session-1", ""},
		{"loci", "", []string{"loci"}, 0, "LOCUS", ""},
		{"bind needs two lines", "only-a-secret\n", []string{"bind", "--app-id", "cli_x"}, 1, "", "stdin must hold"},
		{"bind needs an app id", "", []string{"bind"}, 1, "", "--app-id"},
		{"finish needs one outcome", "", []string{"finish", "c1", "l1-1"}, 1, "", "exactly one"},
		{"unknown child", "", []string{"delivery", "cnobody"}, 1, "", "no such child"},
		{"unknown question", "", []string{"question", "qaaaaaaaaaaaaaaaaaaaa"}, 1, "", "no such question"},
		{"answer needs a session", "", []string{"answer", "qaaaaaaaaaaaaaaaaaaaa", "--answer", "x"}, 1, "", "--session"},
		{"answer to an unknown question", "", []string{"answer", "qaaaaaaaaaaaaaaaaaaaa", "--session", "host-session-1", "--answer", "x"}, 1, "", "no such question"},
		{"blank answer from stdin", "  \n", []string{"answer", "qaaaaaaaaaaaaaaaaaaaa", "--session", "host-session-1", "--answer", "-"}, 1, "", "answer is empty"},
		{"unknown subcommand", "", []string{"frobnicate"}, 2, "", "unknown subcommand"},
		{"missing argument", "", []string{"allow", "rm"}, 2, "", "want 1 argument"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errText := run(tc.stdin, tc.args...)
			if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errText, tc.errText) {
				t.Fatalf("exit %d (want %d)\nstdout: %s\nstderr: %s", code, tc.code, out, errText)
			}
		})
	}
}

package main

import (
	"context"
	"crypto/tls"
	"flag"
	"net"
	"os"

	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/hookcmd"
)

// `pixie hook claude|codex`: the command hook adapter (internal/hookcmd), the same code as the
// small pixie-hook program that pixie init prefers when it lies beside this binary. This binary
// brings the configuration and TLS itself (hookBinary).
func init() {
	register(&command{name: "hook", args: "claude|codex < hook-input.json", nargs: one, summary: "agent hook adapter for Claude Code and Codex (hook input JSON on stdin)",
		help: hookcmd.Help, flags: hookFlags, usageCode: hookcmd.ExitUsage})
}

// hookBinary is what pixie gives the adapter: config.Load and a TLS dialer.
var hookBinary = hookcmd.Binary{
	Settings: func(_ context.Context, home string) (hookcmd.Settings, error) {
		c, err := config.Load(home, os.Getenv, os.Environ(), nil)
		if err != nil {
			return hookcmd.Settings{}, err
		}
		return hookcmd.Settings{Addr: c.Addr, FailOpen: c.Hooks.FailOpen, Timeout: c.Hooks.Timeout}, nil
	},
	DialTLS: func(ctx context.Context, network, addr, serverName string) (net.Conn, error) {
		d := tls.Dialer{Config: &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}}
		return d.DialContext(ctx, network, addr)
	},
}

func hookFlags(fs *flag.FlagSet) runFunc {
	var a hookcmd.Args
	a.Define(fs)
	return func(ctx context.Context, io cmdIO, pos []string) error {
		host, err := hookcmd.Host(pos[0])
		if err != nil {
			return usagef("%s", err.Error())
		}
		if code := hookcmd.Run(ctx, a, host, io.stdin, io.stdout, io.stderr, version, hookBinary); code != 0 {
			return exitCode(code)
		}
		return nil
	}
}

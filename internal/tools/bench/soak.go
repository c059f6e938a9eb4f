package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pixie-dev/pixie/internal/loadbench"
)

// setFlags collects repeated -set key=value flags.
type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, ",") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

// soakMain is `make soak` (`go run ./internal/tools/bench soak [flags]`): the soak of
// internal/loadbench against bin/pixie, a line per interval and the verdict (docs/bench.md). It
// exits 1 when a target is missed.
func soakMain(args []string) {
	fs := flag.NewFlagSet("soak", flag.ExitOnError)
	dur := fs.Duration("duration", 10*time.Minute, "the whole soak")
	every := fs.Duration("every", time.Minute, "the interval of a line")
	conns := fs.Int("conns", 8, "connections, back to back")
	pixieBin := fs.String("pixie", "bin/pixie", "the pixie binary (make soak builds it)")
	profiles := fs.String("profiles", "", "save the server's heap profile after each line, and a CPU profile of the last interval, in this folder")
	serverCPUs := fs.String("server-cpus", "", "pin the server to these CPUs (taskset -c list)")
	driverCPUs := fs.String("driver-cpus", "", "pin the load driver to these CPUs")
	var set setFlags
	fs.Var(&set, "set", "a setting of the server, key=value (repeatable), e.g. -set records.maxBytes=64MiB")
	_ = fs.Parse(args)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := os.Getwd()
	if err != nil {
		fail(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		fail(fmt.Errorf("run the soak from the repository root (make soak): %w", err))
	}
	bin, err := filepath.Abs(*pixieBin)
	if err != nil {
		fail(err)
	}
	if _, err := os.Stat(bin); err != nil {
		fail(fmt.Errorf("the soak needs the pixie binary (make build): %w", err))
	}
	if *driverCPUs != "" {
		if err := loadbench.PinDriver(*driverCPUs); err != nil {
			fail(err)
		}
	}
	e, err := loadbench.NewEnv(root, bin, os.Stderr)
	if err != nil {
		fail(err)
	}
	e.ServerCPUs = *serverCPUs
	rep, err := loadbench.Soak(ctx, e, loadbench.SoakOptions{Duration: *dur, Every: *every, Conns: *conns, Set: set,
		Profiles: *profiles, Log: os.Stderr})
	e.Close()
	if rep != nil {
		if !rep.Print(os.Stdout, loadbench.DefaultSoakTargets) && err == nil {
			os.Exit(1)
		}
	}
	if err != nil {
		fail(err)
	}
}

package badgerstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, dir string) *store.Store {
		s, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: dir, GCInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestLazyUpdateSurvivesKill: a lazy commit survives SIGKILL of the process that made it (the
// logs are shared mappings the kernel keeps), and so does a durable one; the next process that
// opens the directory reads both.
func TestLazyUpdateSurvivesKill(t *testing.T) {
	ctx := context.Background()
	if dir := os.Getenv("BADGERSTORE_KILL_DIR"); dir != "" {
		s, err := badgerstore.Open(ctx, badgerstore.Options{Dir: dir, GCInterval: -1})
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(3)
		}
		if err := s.Update(ctx, func(tx *store.Tx) error { return tx.SetRaw("k/durable", []byte("d"), 0) }); err != nil {
			os.Exit(4)
		}
		for i := range 100 {
			if err := s.UpdateLazy(ctx, func(tx *store.Tx) error {
				return tx.SetRaw(fmt.Sprintf("k/lazy-%03d", i), []byte("l"), 0)
			}); err != nil {
				os.Exit(5)
			}
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestLazyUpdateSurvivesKill$")
	cmd.Env = append(os.Environ(), "BADGERSTORE_KILL_DIR="+dir)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the writer was not killed: %v\n%s", err, out)
	}
	s, err := badgerstore.Open(ctx, badgerstore.Options{Dir: dir, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	if err := s.View(ctx, func(tx *store.Tx) error {
		return tx.ScanRaw("k/", store.ScanOptions{}, func(string, []byte) error { n++; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	if n != 101 {
		t.Fatalf("%d of 101 commits survived the kill", n)
	}
}

package lark

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/pgstore/pgtest"
)

// Two replicas with spool folders of their own: the image the leader fetched is in the
// database, so either replica's view names a file in its own folder holding the image's bytes
// and either serves it; once the Delivery settles, both local copies are gone.
func TestImagesAcrossReplicas(t *testing.T) {
	url := pgtest.NewDatabase(t)
	harnessStore = func(t testing.TB) *store.Store { return openPG(t, url) }
	h := newHarness(t)
	harnessStore = nil
	cfg := h.cfg
	cfg.Registerer = prometheus.NewRegistry()
	cfg.SpoolDir = filepath.Join(t.TempDir(), "spool-b")
	stB := openPG(t, url)
	t.Cleanup(func() { _ = stB.Close() })
	cfgB := cfg
	cfgB.Store = stB
	b, err := New(context.Background(), cfgB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	a := h.ch
	waitFor(t, "one leader", func() bool { return a.leads() != b.leads() })
	h.allow(alice)
	h.fake.images["img_ok"] = pngBytes
	e := h.post(alice, "oc_img", "what is this?", "img_ok")
	h.send(e)
	v := h.waitCurrent("oc_img", e.messageID)
	ctx := context.Background()
	for name, c := range map[string]struct {
		ch    *Channel
		spool string
	}{"a": {a, h.cfg.SpoolDir}, "b": {b, cfg.SpoolDir}} {
		cv, err := c.ch.Current(ctx, v.ChildID)
		if err != nil || cv.ID != v.ID || len(cv.Images) != 1 {
			t.Fatalf("%s: current %+v %v", name, cv, err)
		}
		p := cv.Images[0].Path
		if !strings.HasPrefix(p, c.spool+string(filepath.Separator)) {
			t.Fatalf("%s names %s, outside its own spool %s", name, p, c.spool)
		}
		if raw, err := os.ReadFile(p); err != nil || !bytes.Equal(raw, pngBytes) {
			t.Fatalf("%s's copy %s: %v", name, p, err)
		}
		data, mt, err := c.ch.Image(ctx, v.ChildID, v.ID, 1)
		if err != nil || mt != "image/png" || !bytes.Equal(data, pngBytes) {
			t.Fatalf("%s's image route: %v %s", name, err, mt)
		}
	}
	if _, err := b.Finish(ctx, v.ChildID, FinishRequest{DeliveryID: v.ID, Reply: "a PNG"}); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{h.cfg.SpoolDir, cfg.SpoolDir} {
		waitFor(t, "the local copies removed from "+dir, func() bool {
			entries, err := os.ReadDir(dir)
			return (err == nil || os.IsNotExist(err)) && len(entries) == 0
		})
	}
	for _, ch := range []*Channel{a, b} {
		if _, _, err := ch.Image(ctx, v.ChildID, v.ID, 1); err == nil {
			t.Fatal("an image still served after settlement")
		}
	}
}

package lark

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/testutil/fakechat"
)

// pngBytes is a real PNG header (enough for content sniffing) plus a body.
var pngBytes = append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), make([]byte, 64)...)

// post builds a rich-text message mentioning the bot, with text and images.
func (h *harness) post(sender, chatID, text string, imageKeys ...string) ev {
	e := h.text(sender, chatID, larkapi.ChatGroup, "", true)
	lines := [][]map[string]string{{{"tag": "at", "user_id": "@_user_1", "user_name": "Pixie Test"}, {"tag": "text", "text": " " + text}}}
	for _, k := range imageKeys {
		lines = append(lines, []map[string]string{{"tag": "img", "image_key": k}})
	}
	c, _ := json.Marshal(map[string]any{"title": "", "content": lines})
	e.msgType, e.content = "post", string(c)
	return e
}

func TestImageSpool(t *testing.T) {
	h := newHarness(t)
	h.allow(alice)
	h.fake.images["img_ok"] = pngBytes
	h.fake.images["img_text"] = []byte("just some text, not an image")
	e := h.post(alice, "oc_img", "what is this?", "img_ok", "img_missing", "img_text")
	h.send(e)
	v := h.waitCurrent("oc_img", e.messageID)
	if v.Text != "what is this?" || v.ImageCount != 3 || len(v.Images) != 1 {
		t.Fatalf("delivery: %+v", v)
	}
	img := v.Images[0]
	if img.MediaType != "image/png" || img.Index != 1 || img.Size != int64(len(pngBytes)) {
		t.Fatalf("image: %+v", img)
	}
	if !strings.Contains(v.ImagesUnavailable, "image 2") || !strings.Contains(v.ImagesUnavailable, "image 3") {
		t.Fatalf("unavailable note: %q", v.ImagesUnavailable)
	}
	dir := filepath.Dir(img.Path)
	for p, mode := range map[string]os.FileMode{h.cfg.SpoolDir: 0o700, dir: 0o700, img.Path: 0o600} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != mode {
			t.Fatalf("%s: %v mode %v, want %o", p, err, st.Mode().Perm(), mode)
		}
	}
	data, mt, err := h.ch.Image(context.Background(), v.ChildID, v.ID, 1)
	if err != nil || mt != "image/png" || !reflect.DeepEqual(data, pngBytes) {
		t.Fatalf("image route: %v %s", err, mt)
	}
	if _, _, err := h.ch.Image(context.Background(), v.ChildID, v.ID, 2); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("missing image: %v", err)
	}
	h.finish(v.ChildID, v.ID, "a PNG")
	// Deleted before the Delivery settled: gone by the time Finish returned.
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("spool folder left behind: %v", err)
	}
	if _, _, err := h.ch.Image(context.Background(), v.ChildID, v.ID, 1); err == nil {
		t.Fatal("image still served after settlement")
	}

	// A timeout cleans up too.
	e2 := h.post(alice, "oc_img", "and this?", "img_ok")
	h.send(e2)
	v2 := h.waitCurrent("oc_img", e2.messageID)
	if len(v2.Images) != 1 {
		t.Fatalf("second delivery: %+v", v2)
	}
	h.clock.Add(time.Hour + time.Second)
	h.ch.sweep(context.Background())
	if _, err := os.Stat(filepath.Dir(v2.Images[0].Path)); !os.IsNotExist(err) {
		t.Fatalf("spool folder left after a timeout: %v", err)
	}
	entries, _ := os.ReadDir(h.cfg.SpoolDir)
	if len(entries) != 0 {
		t.Fatalf("spool not empty: %v", entries)
	}
}

func TestSpoolThatCannotBeProven(t *testing.T) {
	target := t.TempDir()
	link := filepath.Join(t.TempDir(), "spool")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, withConfig(func(c *Config) { c.SpoolDir = link }))
	h.allow(alice)
	h.fake.images["img_ok"] = pngBytes
	e := h.post(alice, "oc_sym", "look", "img_ok")
	h.send(e)
	v := h.waitCurrent("oc_sym", e.messageID)
	if len(v.Images) != 0 || !strings.Contains(v.ImagesUnavailable, "symlink") || v.Text != "look" {
		t.Fatalf("only the image part should be unavailable: %+v", v)
	}
	if st := h.ch.Status(context.Background()); st.ImagesOK || !st.Available {
		t.Fatalf("status: %+v", st)
	}
	entries, _ := os.ReadDir(target)
	if len(entries) != 0 {
		t.Fatal("an image was written through the symlink")
	}
}

func TestSpoolModeIsRepaired(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, withConfig(func(c *Config) { c.SpoolDir = dir }))
	if st := h.ch.Status(context.Background()); !st.ImagesOK {
		t.Fatalf("a spool Pixie owns should be made private: %+v", st.Warnings)
	}
}

func TestBuiltinExecutor(t *testing.T) {
	srv := fakechat.NewScript(t, func(c fakechat.Call) fakechat.Turn {
		last := c.Messages[len(c.Messages)-1].Text
		switch {
		case strings.Contains(last, "fail please"):
			return fakechat.Turn{Status: 500}
		case strings.Contains(last, "silence"):
			return fakechat.Turn{Text: "   "}
		}
		return fakechat.Turn{Text: "The build runs make check. Ask @Bob."}
	})
	m, err := model.New(model.Config{Provider: "openai", BaseURL: srv.URL, Model: "m", APIKey: "sk-test", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, withConfig(func(c *Config) { c.Executor, c.Model = ExecutorBuiltin, m }))
	h.allow(alice)
	h.fake.members["oc_b"] = []larkapi.Member{{OpenID: alice, Name: "Alice"}, {OpenID: bob, Name: "Bob"}}
	h.fake.images["img_ok"] = pngBytes

	e1 := h.post(alice, "oc_b", "what does the build do?", "img_ok")
	h.send(e1)
	waitFor(t, "reply", func() bool { return len(h.fake.replyList()) == 1 })
	rep := h.fake.replyList()[0]
	if rep.MessageID != e1.messageID || rep.Text != `The build runs make check. Ask <at user_id="ou_bob">Bob</at>.` {
		t.Fatalf("reply: %+v", rep)
	}
	waitFor(t, "done reaction", func() bool { return len(h.callsFor(e1.messageID)) == 4 })
	if got := h.callsFor(e1.messageID); got[3] != "react "+e1.messageID+" DONE" {
		t.Fatalf("calls %v", got)
	}
	first := srv.Calls()[0]
	if q := first.User; !strings.Contains(q, "From Alice:") || !strings.Contains(q, "what does the build do?") || len(first.Images) != 1 {
		t.Fatalf("prompt: %q, %d images", q, len(first.Images))
	}
	if first.Messages[0].Role != "system" || !strings.Contains(first.System, "child session") {
		t.Fatalf("no child identity in the system prompt: %+v", first.Messages[0])
	}
	entries, _ := os.ReadDir(h.cfg.SpoolDir)
	if len(entries) != 0 {
		t.Fatalf("spool not empty after the built-in finish: %v", entries)
	}

	// The child keeps its own short history.
	h.ask(alice, "oc_b", "and the tests?")
	waitFor(t, "second reply", func() bool { return len(h.fake.replyList()) == 2 })
	second := srv.Calls()[1]
	if len(second.Messages) != 4 || second.Messages[1].Text == "" || second.Messages[2].Role != "assistant" {
		t.Fatalf("history not passed: %+v", second.Messages)
	}

	// A model failure fails the Delivery: failed reaction, no reply.
	e3 := h.ask(alice, "oc_b", "fail please")
	waitFor(t, "failed reaction", func() bool { return len(h.callsFor(e3.messageID)) == 3 })
	if got := h.callsFor(e3.messageID); got[2] != "react "+e3.messageID+" CrossMark" {
		t.Fatalf("calls %v", got)
	}
	// An empty answer is a no-reply finish.
	e4 := h.ask(alice, "oc_b", "silence")
	waitFor(t, "done reaction", func() bool { return len(h.callsFor(e4.messageID)) == 3 })
	if got := h.callsFor(e4.messageID); got[2] != "react "+e4.messageID+" DONE" {
		t.Fatalf("calls %v", got)
	}
	if n := len(h.fake.replyList()); n != 2 {
		t.Fatalf("%d replies", n)
	}
	d, _ := h.ch.GetLocus(context.Background(), h.locusOf("oc_b").ID)
	states := []string{}
	for _, dv := range d.Deliveries {
		states = append(states, dv.State)
	}
	if !reflect.DeepEqual(states, []string{DeliveryDone, DeliveryDone, DeliveryFailed, DeliveryDone}) {
		t.Fatalf("states %v", states)
	}
	if d.Deliveries[2].FailReason == "" || d.Deliveries[3].NoReplyReason == "" {
		t.Fatalf("reasons missing: %+v", d.Deliveries)
	}
	if a := d.Deliveries[2].Agent; a == nil || !strings.Contains(a.Error, "the Pixie model failed") {
		t.Fatalf("the failed run's record: %+v", a)
	}
}

func TestBuiltinWithoutModel(t *testing.T) {
	h := newHarness(t, withConfig(func(c *Config) { c.Executor = ExecutorBuiltin }))
	h.allow(alice)
	if st := h.ch.Status(context.Background()); len(st.Warnings) == 0 || st.ModelConfigured {
		t.Fatalf("status should warn about the missing model: %+v", st)
	}
	e := h.ask(alice, "oc_nm", "hello?")
	waitFor(t, "failed reaction", func() bool { return len(h.callsFor(e.messageID)) == 3 })
	if got := h.callsFor(e.messageID); got[2] != "react "+e.messageID+" CrossMark" {
		t.Fatalf("calls %v", got)
	}
}

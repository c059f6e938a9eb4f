package lark

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
	"github.com/pixie-dev/pixie/internal/errs"
)

// ask sends a mention from sender in chat and returns the event.
func (h *harness) ask(sender, chatID, text string) ev {
	h.t.Helper()
	e := h.text(sender, chatID, larkapi.ChatGroup, text, true)
	if resp := h.send(e); resp.Status != 200 {
		h.t.Fatalf("event refused: %d %s", resp.Status, resp.Body)
	}
	return e
}

func (h *harness) finish(childID, deliveryID, reply string) DeliveryView {
	h.t.Helper()
	v, err := h.ch.Finish(context.Background(), childID, FinishRequest{DeliveryID: deliveryID, Reply: reply})
	if err != nil {
		h.t.Fatalf("finish %s: %v", deliveryID, err)
	}
	return v
}

// callsFor lists the fake's calls about one message, in order.
func (h *harness) callsFor(messageID string) []string {
	var out []string
	for _, c := range h.fake.calls() {
		if strings.Contains(c, " "+messageID) {
			out = append(out, c)
		}
	}
	return out
}

func TestFIFOAcrossRestart(t *testing.T) {
	h := newHarness(t)
	h.allow(alice)
	var msgs []ev
	for i := 1; i <= 3; i++ {
		msgs = append(msgs, h.ask(alice, "oc_fifo", fmt.Sprintf("question %d", i)))
	}
	v := h.waitCurrent("oc_fifo", msgs[0].messageID)
	waitFor(t, "two queued", func() bool { return h.locusOf("oc_fifo").Queued == 2 })
	child := h.locusOf("oc_fifo").ChildID

	h.restart()
	// The same Delivery is still current, its reaction is not added twice.
	v2 := h.waitCurrent("oc_fifo", msgs[0].messageID)
	if v2.ID != v.ID {
		t.Fatalf("current changed across restart: %s → %s", v.ID, v2.ID)
	}
	h.finish(child, v.ID, "one")
	v = h.waitCurrent("oc_fifo", msgs[1].messageID)
	if v.Text != "question 2" || v.ChildID != child {
		t.Fatalf("second delivery: %+v", v)
	}
	h.restart()
	h.finish(child, h.waitCurrent("oc_fifo", msgs[1].messageID).ID, "two")
	v = h.waitCurrent("oc_fifo", msgs[2].messageID)
	h.finish(child, v.ID, "three")
	waitFor(t, "idle", func() bool { return h.locusOf("oc_fifo").Current == "" })

	var order []string
	for _, r := range h.fake.replyList() {
		order = append(order, r.MessageID+"="+r.Text)
	}
	want := []string{msgs[0].messageID + "=one", msgs[1].messageID + "=two", msgs[2].messageID + "=three"}
	if !reflect.DeepEqual(order, want) {
		t.Fatalf("replies %v, want %v", order, want)
	}
	working := 0
	for _, c := range h.callsFor(msgs[0].messageID) {
		if c == "react "+msgs[0].messageID+" "+ReactionWorking {
			working++
		}
	}
	if working != 1 {
		t.Fatalf("the working reaction was added %d times across a restart", working)
	}
}

func TestFinishAndReactionSequence(t *testing.T) {
	h := newHarness(t)
	h.allow(alice)
	e1 := h.ask(alice, "oc_fin", "first")
	e2 := h.ask(alice, "oc_fin", "second")
	v := h.waitCurrent("oc_fin", e1.messageID)
	child := v.ChildID
	ctx := context.Background()
	// Events are processed by a worker after the webhook answers: wait until the second one is
	// queued behind the first before using its id below.
	waitFor(t, "second delivery queued", func() bool {
		l, ok, err := h.ch.q.EntryLocus(ctx, "oc_fin")
		return err == nil && ok && l.Queued == 1
	})

	// Validation.
	for _, tc := range []struct {
		name string
		req  FinishRequest
		code errs.Code
	}{
		{"empty", FinishRequest{DeliveryID: v.ID}, errs.Invalid},
		{"both", FinishRequest{DeliveryID: v.ID, Reply: "x", NoReply: true, Reason: "y"}, errs.Invalid},
		{"no reason", FinishRequest{DeliveryID: v.ID, NoReply: true}, errs.Invalid},
		{"reply too long", FinishRequest{DeliveryID: v.ID, Reply: strings.Repeat("é", DefaultMaxReplyChars+1)}, errs.TooLarge},
		{"reason too long", FinishRequest{DeliveryID: v.ID, NoReply: true, Reason: strings.Repeat("r", MaxReasonChars+1)}, errs.TooLarge},
		{"malformed id", FinishRequest{DeliveryID: "nope", Reply: "x"}, errs.Invalid},
		{"queued delivery", FinishRequest{DeliveryID: strings.Replace(v.ID, "-1", "-2", 1), Reply: "x"}, errs.Conflict},
	} {
		if _, err := h.ch.Finish(ctx, child, tc.req); errs.CodeOf(err) != tc.code {
			t.Fatalf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	if _, err := h.ch.Finish(ctx, "cwrongchild", FinishRequest{DeliveryID: v.ID, Reply: "x"}); errs.CodeOf(err) != errs.Forbidden {
		t.Fatalf("unknown child: %v", err)
	}

	// A reply of exactly the maximum length is accepted.
	long := strings.Repeat("é", DefaultMaxReplyChars)
	got := h.finish(child, v.ID, long)
	if got.State != DeliveryDone || !got.Replied {
		t.Fatalf("settled: %+v", got)
	}
	if _, err := h.ch.Finish(ctx, child, FinishRequest{DeliveryID: v.ID, Reply: "again"}); errs.CodeOf(err) != errs.Conflict {
		t.Fatalf("second finish: %v", err)
	}
	v2 := h.waitCurrent("oc_fin", e2.messageID)
	if v2.ChildID != child {
		t.Fatal("the next delivery went to another child")
	}
	waitFor(t, "done reaction", func() bool { return len(h.callsFor(e1.messageID)) == 4 })
	want := []string{"react " + e1.messageID + " OnIt", "reply " + e1.messageID, "unreact " + e1.messageID + " OnIt", "react " + e1.messageID + " DONE"}
	if got := h.callsFor(e1.messageID); !reflect.DeepEqual(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	reps := h.fake.replyList()
	if reps[0].MessageID != e1.messageID || reps[0].UUID != "reply-"+v.ID {
		t.Fatalf("the reply did not go to the triggering message: %+v", reps[0])
	}

	// No reply, with a reason: done, and no message.
	got, err := h.ch.Finish(ctx, child, FinishRequest{DeliveryID: v2.ID, NoReply: true, Reason: "not a question for me"})
	if err != nil || got.NoReplyReason != "not a question for me" || got.Replied {
		t.Fatalf("no-reply finish: %+v %v", got, err)
	}
	waitFor(t, "done on the second", func() bool { return len(h.callsFor(e2.messageID)) == 3 })
	want = []string{"react " + e2.messageID + " OnIt", "unreact " + e2.messageID + " OnIt", "react " + e2.messageID + " DONE"}
	if got := h.callsFor(e2.messageID); !reflect.DeepEqual(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
}

func TestFinishFailsWhenTheReplyFails(t *testing.T) {
	h := newHarness(t)
	h.allow(alice)
	e := h.ask(alice, "oc_rf", "q")
	v := h.waitCurrent("oc_rf", e.messageID)
	h.fake.mu.Lock()
	h.fake.failReplies = 1
	h.fake.mu.Unlock()
	if _, err := h.ch.Finish(context.Background(), v.ChildID, FinishRequest{DeliveryID: v.ID, Reply: "a"}); errs.CodeOf(err) != errs.Upstream {
		t.Fatalf("failed reply: %v", err)
	}
	// Still current: the executor can try again.
	if cur, err := h.ch.Current(context.Background(), v.ChildID); err != nil || cur.ID != v.ID {
		t.Fatalf("after a failed reply: %+v %v", cur, err)
	}
	h.finish(v.ChildID, v.ID, "a")
}

func TestExecutorMismatch(t *testing.T) {
	h := newHarness(t)
	h.allow(alice)
	e := h.ask(alice, "oc_mm", "q")
	v := h.waitCurrent("oc_mm", e.messageID)
	if _, err := h.ch.UpdateLocus(context.Background(), v.LocusID, LocusUpdate{Executor: ExecutorBuiltin}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ch.Finish(context.Background(), v.ChildID, FinishRequest{DeliveryID: v.ID, Reply: "x"}); errs.CodeOf(err) != errs.Conflict {
		t.Fatalf("external finish on a built-in Locus: %v", err)
	}
}

func TestWaitAndTimeout(t *testing.T) {
	h := newHarness(t)
	h.allow(alice)
	ctx := context.Background()
	e1 := h.ask(alice, "oc_wait", "slow one")
	e2 := h.ask(alice, "oc_wait", "next one")
	v := h.waitCurrent("oc_wait", e1.messageID)
	accepted := *v.AcceptedAt
	if !v.Deadline.Equal(accepted.Add(time.Hour)) {
		t.Fatalf("initial deadline %s, want acceptance + 1h", v.Deadline.Sub(accepted))
	}
	// Bounds of extendSeconds.
	for _, n := range []int64{-1, 24*3600 + 1} {
		if _, err := h.ch.Wait(ctx, v.ChildID, WaitRequest{DeliveryID: v.ID, ExtendSeconds: n}); errs.CodeOf(err) != errs.Invalid {
			t.Fatalf("extendSeconds %d: %v", n, err)
		}
	}
	if _, err := h.ch.Wait(ctx, "cnobody", WaitRequest{DeliveryID: v.ID}); err == nil {
		t.Fatal("a stranger extended the deadline")
	}
	// The default extension is one hour from now.
	h.clock.Add(30 * time.Minute)
	r, err := h.ch.Wait(ctx, v.ChildID, WaitRequest{DeliveryID: v.ID})
	if err != nil || !r.Deadline.Equal(h.clock.Now().Add(time.Hour)) || r.Capped {
		t.Fatalf("wait: %+v %v", r, err)
	}
	// A shorter extension never shortens the deadline.
	r2, err := h.ch.Wait(ctx, v.ChildID, WaitRequest{DeliveryID: v.ID, ExtendSeconds: 60})
	if err != nil || !r2.Deadline.Equal(r.Deadline) {
		t.Fatalf("a shorter wait moved the deadline: %+v %v", r2, err)
	}
	// Never beyond 24 hours from acceptance.
	h.clock.Add(20 * time.Hour)
	h.ch.sweep(ctx)
	if _, err := h.ch.Current(ctx, v.ChildID); err != nil {
		// the deadline (1h30 after acceptance) has passed: the sweep timed it out.
	}
	t.Run("cap", func(t *testing.T) {
		h := newHarness(t)
		h.allow(alice)
		e := h.ask(alice, "oc_cap", "q")
		v := h.waitCurrent("oc_cap", e.messageID)
		for i := 0; i < 23; i++ {
			h.clock.Add(59 * time.Minute)
			if _, err := h.ch.Wait(ctx, v.ChildID, WaitRequest{DeliveryID: v.ID}); err != nil {
				t.Fatalf("wait %d: %v", i, err)
			}
		}
		r, err := h.ch.Wait(ctx, v.ChildID, WaitRequest{DeliveryID: v.ID, ExtendSeconds: 24 * 3600})
		if err != nil || !r.Capped || !r.Deadline.Equal(v.AcceptedAt.Add(24*time.Hour)) {
			t.Fatalf("capped wait: %+v %v", r, err)
		}
		if _, err := h.ch.Wait(ctx, v.ChildID, WaitRequest{DeliveryID: v.ID}); errs.CodeOf(err) != errs.Conflict {
			t.Fatalf("wait at the cap: %v", err)
		}
		// At the deadline exactly the Delivery is still current; a second later it times out.
		h.clock.Add(r.Deadline.Sub(h.clock.Now()))
		h.ch.sweep(ctx)
		if cur, err := h.ch.Current(ctx, v.ChildID); err != nil || cur.ID != v.ID {
			t.Fatalf("timed out at the deadline itself: %v", err)
		}
		h.clock.Add(time.Second)
		h.ch.sweep(ctx)
		if _, err := h.ch.Current(ctx, v.ChildID); errs.CodeOf(err) != errs.NotFound {
			t.Fatalf("not timed out after the deadline: %v", err)
		}
	})

	// The first Delivery timed out in the sweep above: failed reaction, the next one started on
	// the same child.
	v2 := h.waitCurrent("oc_wait", e2.messageID)
	if v2.ChildID != v.ChildID {
		t.Fatal("the next delivery after a timeout went to another child")
	}
	waitFor(t, "failed reaction", func() bool { return len(h.callsFor(e1.messageID)) == 3 })
	want := []string{"react " + e1.messageID + " OnIt", "unreact " + e1.messageID + " OnIt", "react " + e1.messageID + " CrossMark"}
	if got := h.callsFor(e1.messageID); !reflect.DeepEqual(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	d, err := h.ch.GetLocus(ctx, v.LocusID)
	if err != nil || d.Deliveries[0].State != DeliveryTimedOut || d.Deliveries[0].FailReason == "" {
		t.Fatalf("locus detail: %+v %v", d, err)
	}
	if _, err := h.ch.Finish(ctx, v.ChildID, FinishRequest{DeliveryID: v.ID, Reply: "late"}); errs.CodeOf(err) != errs.Conflict {
		t.Fatalf("finish after timeout: %v", err)
	}
}

func TestQueueCap(t *testing.T) {
	h := newHarness(t, withConfig(func(c *Config) { c.MaxQueue = 2 }))
	h.allow(alice)
	e := h.ask(alice, "oc_cap", "current")
	h.waitCurrent("oc_cap", e.messageID)
	h.ask(alice, "oc_cap", "q1")
	h.ask(alice, "oc_cap", "q2")
	waitFor(t, "two queued", func() bool { return h.locusOf("oc_cap").Queued == 2 })
	h.ask(alice, "oc_cap", "q3")
	waitFor(t, "queue_full", func() bool { return h.drops(reasonQueueFull) == 1 })
	if q := h.locusOf("oc_cap").Queued; q != 2 {
		t.Fatalf("queued %d", q)
	}
}

func TestCancelAndArchive(t *testing.T) {
	h := newHarness(t)
	h.allow(alice)
	ctx := context.Background()
	e1 := h.ask(alice, "oc_cx", "one")
	e2 := h.ask(alice, "oc_cx", "two")
	e3 := h.ask(alice, "oc_cx", "three")
	v := h.waitCurrent("oc_cx", e1.messageID)
	if _, err := h.ch.Cancel(ctx, v.LocusID, "not now"); err != nil {
		t.Fatal(err)
	}
	h.waitCurrent("oc_cx", e2.messageID)
	if _, err := h.ch.ArchiveLocus(ctx, v.LocusID, ""); err != nil {
		t.Fatal(err)
	}
	d, _ := h.ch.GetLocus(ctx, v.LocusID)
	if d.State != LocusArchived || d.Child == nil || !d.Child.Archived {
		t.Fatalf("archived locus: %+v", d)
	}
	for i, dv := range d.Deliveries {
		if dv.State != DeliveryFailed {
			t.Fatalf("delivery %d is %s after archiving", i, dv.State)
		}
	}
	for _, m := range []string{e1.messageID, e2.messageID, e3.messageID} {
		waitFor(t, "failed reaction on "+m, func() bool {
			for _, r := range h.fake.reactionsOn(m) {
				if r == ReactionFailed {
					return true
				}
			}
			return false
		})
		for _, r := range h.fake.reactionsOn(m) {
			if r == ReactionWorking {
				t.Fatalf("%s kept its working reaction", m)
			}
		}
	}
	if _, ok, _ := h.ch.q.EntryLocus(ctx, "oc_cx"); ok {
		t.Fatal("the entry still has an active Locus")
	}
	// The next mention starts afresh, in the chat's same main session.
	e4 := h.ask(alice, "oc_cx", "again")
	v4 := h.waitCurrent("oc_cx", e4.messageID)
	if v4.LocusID == v.LocusID || v4.MainSessionID != v.MainSessionID {
		t.Fatalf("after unbind: %+v", v4)
	}
}

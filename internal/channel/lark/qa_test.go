package lark

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/pet"
)

func TestQAGroupAction(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	action := h.ch.QAAction()
	if action.ID() != QAActionID || action.Label() == "" {
		t.Fatal("action identity")
	}
	// Without a person's open_id the action is shown disabled, with the reason.
	ok, why := action.Availability(ctx)
	if ok || !strings.Contains(why, "open_id") {
		t.Fatalf("availability without an owner: %v %q", ok, why)
	}
	// Pairing makes the first person the owner.
	pc := h.mint()
	h.send(h.text(alice, "oc_dm_alice", larkapi.ChatP2P, pc.Command, false))
	if ok, why := action.Availability(ctx); !ok {
		t.Fatalf("availability with an owner: %q", why)
	}

	snap := pet.Snapshot{Scope: pet.ScopeSession, SessionID: "9f8e7d6c-session", Cwd: "/home/dev/project", CapturedAt: time.Now()}
	out, err := action.Invoke(ctx, snap)
	if err != nil || !strings.Contains(out, "9f8e7d") {
		t.Fatalf("invoke: %q %v", out, err)
	}
	chats := h.fake.chatList()
	if len(chats) != 1 || len(chats[0].Users) != 1 || chats[0].Users[0] != alice || !strings.Contains(chats[0].Name, "9f8e7d") {
		t.Fatalf("created chats: %+v", chats)
	}
	// The group is bound as the session's Locus.
	l := h.locusOf(chats[0].ID)
	if l.MainSessionID != "9f8e7d6c-session" || !l.QA || l.Executor != ExecutorExternal {
		t.Fatalf("locus: %+v", l)
	}
	ss, _ := h.ch.Sessions(ctx)
	if len(ss) != 1 || ss[0].Workspace != "/home/dev/project" || ss[0].QAChatID != chats[0].ID {
		t.Fatalf("sessions: %+v", ss)
	}

	// A second request returns the same group; concurrent requests still make one.
	var wg sync.WaitGroup
	results := make([]QAGroup, 5)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := h.ch.OpenQAGroup(ctx, QASource{SessionID: "9f8e7d6c-session"})
			if err != nil {
				t.Error(err)
			}
			results[i] = g
		}()
	}
	wg.Wait()
	for _, g := range results {
		if g.Created || g.ChatID != chats[0].ID || g.LocusID != l.ID {
			t.Fatalf("second request: %+v", g)
		}
	}
	if out, err := action.Invoke(ctx, snap); err != nil || !strings.Contains(out, "already") {
		t.Fatalf("second invoke: %q %v", out, err)
	}
	if n := len(h.fake.chatList()); n != 1 {
		t.Fatalf("%d groups created", n)
	}

	// Members of the group may ask there (an allowlisted person set it up).
	e := h.ask(bob, chats[0].ID, "how does this session build?")
	h.waitCurrent(chats[0].ID, e.messageID)

	// After the group is unbound, the action opens a new one.
	if _, err := h.ch.ArchiveLocus(ctx, l.ID, ""); err != nil {
		t.Fatal(err)
	}
	g, err := h.ch.OpenQAGroup(ctx, QASource{SessionID: "9f8e7d6c-session"})
	if err != nil || !g.Created || g.ChatID == chats[0].ID {
		t.Fatalf("after unbind: %+v %v", g, err)
	}

	// Refusals.
	if _, err := action.Invoke(ctx, pet.Snapshot{Scope: pet.ScopeIndependent}); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("independent scope: %v", err)
	}
	if _, err := h.ch.OpenQAGroup(ctx, QASource{SessionID: "bad id!"}); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("bad session id: %v", err)
	}
	if _, err := h.ch.OpenQAGroup(ctx, QASource{SessionID: "9f8e7d6c-session", OpenID: "nope"}); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("bad open_id: %v", err)
	}
}

func TestQAGroupThroughPet(t *testing.T) {
	h := newHarness(t)
	h.allow(alice)
	ctx := context.Background()
	if _, err := h.ch.SetOwner(ctx, alice); err != nil {
		t.Fatal(err)
	}
	svc, err := pet.New(context.Background(), pet.Config{Store: h.st, Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.RegisterBuiltin(h.ch.QAAction()); err != nil {
		t.Fatal(err)
	}
	res, err := svc.InvokeBuiltin(ctx, QAActionID, pet.Snapshot{Scope: "session:abcdef123456", CapturedAt: time.Now()})
	if err != nil || !strings.Contains(res.Output, "abcdef") {
		t.Fatalf("%+v %v", res, err)
	}
	// Unbinding the bot makes the action unavailable, with the reason.
	if _, err := h.ch.Unbind(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.InvokeBuiltin(ctx, QAActionID, pet.Snapshot{Scope: "session:abcdef123456", CapturedAt: time.Now()}); errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("unbound: %v", err)
	}
}

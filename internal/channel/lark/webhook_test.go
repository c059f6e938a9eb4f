package lark

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
	"github.com/pixie-dev/pixie/internal/store"
)

func challengeBody(token string) []byte {
	b, _ := json.Marshal(map[string]string{"challenge": "ch-4242", "token": token, "type": "url_verification"})
	return b
}

func TestChallenge(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []harnessOpt
	}{
		{"encrypted", nil},
		{"plain", []harnessOpt{plain}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.opts...)
			body, hdr := h.wire(challengeBody(testToken))
			resp := h.ch.HandleEvent(context.Background(), hdr, body)
			if resp.Status != http.StatusOK || string(resp.Body) != `{"challenge":"ch-4242"}` {
				t.Fatalf("challenge: %d %s", resp.Status, resp.Body)
			}
			body, hdr = h.wire(challengeBody("wrong-token"))
			resp = h.ch.HandleEvent(context.Background(), hdr, body)
			if resp.Status != http.StatusUnauthorized || h.drops(reasonToken) != 1 {
				t.Fatalf("wrong token: %d %s, token drops %d", resp.Status, resp.Body, h.drops(reasonToken))
			}
		})
	}
}

func TestEncryptedAndPlainEvents(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []harnessOpt
	}{
		{"encrypted", nil},
		{"plain", []harnessOpt{plain}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.opts...)
			h.allow(alice)
			e := h.text(alice, "oc_group1", larkapi.ChatGroup, "what does the build do?", true)
			if resp := h.send(e); resp.Status != http.StatusOK {
				t.Fatalf("event: %d %s", resp.Status, resp.Body)
			}
			v := h.waitCurrent("oc_group1", e.messageID)
			if v.Text != "what does the build do?" || v.SenderOpenID != alice || v.State != DeliveryCurrent {
				t.Fatalf("delivery: %+v", v)
			}
			if h.ch.Status(context.Background()).Encrypted != (tc.name == "encrypted") {
				t.Fatal("status does not say whether events are encrypted")
			}
		})
	}
}

func TestAuthenticationRefusals(t *testing.T) {
	h := newHarness(t)
	h.allow(alice)
	good := func() (ev, []byte, http.Header) {
		e := h.text(alice, "oc_g", larkapi.ChatGroup, "hi", true)
		body, hdr := h.wire(e.body())
		return e, body, hdr
	}
	cases := []struct {
		name   string
		reason string
		mutate func(e *ev, body *[]byte, hdr http.Header)
	}{
		{"bad signature", reasonSignature, func(_ *ev, _ *[]byte, hdr http.Header) {
			hdr.Set(HeaderSignature, sign("1", "2", testKey, []byte("other")))
		}},
		{"missing signature", reasonSignature, func(_ *ev, _ *[]byte, hdr http.Header) { hdr.Del(HeaderSignature) }},
		{"signature over another nonce", reasonSignature, func(_ *ev, _ *[]byte, hdr http.Header) { hdr.Set(HeaderNonce, "other") }},
		{"wrong token", reasonToken, func(e *ev, body *[]byte, hdr http.Header) {
			e.token = "not-the-token"
			*body, _ = h.wire(e.body())
			resign(h, *body, hdr)
		}},
		{"empty token", reasonToken, func(e *ev, body *[]byte, hdr http.Header) {
			e.token = ""
			*body, _ = h.wire(e.body())
			resign(h, *body, hdr)
		}},
		{"other app", reasonApp, func(e *ev, body *[]byte, hdr http.Header) {
			e.appID = "cli_someone_else"
			*body, _ = h.wire(e.body())
			resign(h, *body, hdr)
		}},
		{"stale timestamp", reasonStale, func(_ *ev, body *[]byte, hdr http.Header) {
			ts := strconv.FormatInt(h.clock.Now().Add(-DefaultReplayWindow-time.Second).Unix(), 10)
			hdr.Set(HeaderTimestamp, ts)
			hdr.Set(HeaderSignature, sign(ts, hdr.Get(HeaderNonce), testKey, *body))
		}},
		{"future timestamp", reasonStale, func(_ *ev, body *[]byte, hdr http.Header) {
			ts := strconv.FormatInt(h.clock.Now().Add(DefaultReplayWindow+time.Second).Unix(), 10)
			hdr.Set(HeaderTimestamp, ts)
			hdr.Set(HeaderSignature, sign(ts, hdr.Get(HeaderNonce), testKey, *body))
		}},
		{"plaintext under an encrypt key", reasonPlaintext, func(e *ev, body *[]byte, hdr http.Header) {
			*body = e.body()
			resign(h, *body, hdr)
		}},
		{"garbage ciphertext", reasonDecrypt, func(_ *ev, body *[]byte, hdr http.Header) {
			*body = []byte(`{"encrypt":"bm90IGEgY2lwaGVydGV4dCBhdCBhbGwh"}`)
			resign(h, *body, hdr)
		}},
		{"not JSON", reasonBadRequest, func(_ *ev, body *[]byte, hdr http.Header) { *body = []byte("<xml/>") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := h.drops(tc.reason)
			e, body, hdr := good()
			tc.mutate(&e, &body, hdr)
			resp := h.ch.HandleEvent(context.Background(), hdr, body)
			if resp.Status != http.StatusUnauthorized {
				t.Fatalf("status %d %s, want 401", resp.Status, resp.Body)
			}
			if got := h.drops(tc.reason); got != before+1 {
				t.Fatalf("%s drops %d → %d", tc.reason, before, got)
			}
		})
	}
	// Nothing was queued, no Locus exists, Lark was not called.
	var n int
	_ = h.st.View(context.Background(), func(tx *store.Tx) error {
		es, _ := colInbound.List(tx, "", store.ScanOptions{})
		ls, _ := colLocus.List(tx, "", store.ScanOptions{})
		n = len(es) + len(ls)
		return nil
	})
	if n != 0 || len(h.fake.calls()) != 0 {
		t.Fatalf("refused events left traces: %d records, calls %v", n, h.fake.calls())
	}
}

// resign signs body again with the harness's headers (for cases that change the body).
func resign(h *harness, body []byte, hdr http.Header) {
	hdr.Set(HeaderSignature, sign(hdr.Get(HeaderTimestamp), hdr.Get(HeaderNonce), h.ekey, body))
}

func TestReplayWindowEdge(t *testing.T) {
	h := newHarness(t)
	h.allow(alice)
	for _, tc := range []struct {
		age  time.Duration
		want int
	}{
		{DefaultReplayWindow, http.StatusOK},
		{DefaultReplayWindow + time.Second, http.StatusUnauthorized},
	} {
		e := h.text(alice, "oc_edge", larkapi.ChatGroup, "hi", true)
		body, hdr := h.wire(e.body())
		ts := strconv.FormatInt(h.clock.Now().Add(-tc.age).Unix(), 10)
		hdr.Set(HeaderTimestamp, ts)
		resign(h, body, hdr)
		if resp := h.ch.HandleEvent(context.Background(), hdr, body); resp.Status != tc.want {
			t.Fatalf("age %s: status %d, want %d", tc.age, resp.Status, tc.want)
		}
	}
}

func TestPlainModeUsesEventTimeForTheWindow(t *testing.T) {
	h := newHarness(t, plain)
	h.allow(alice)
	e := h.text(alice, "oc_p", larkapi.ChatGroup, "hi", true)
	e.created = h.clock.Now().Add(-DefaultReplayWindow - time.Minute)
	if resp := h.send(e); resp.Status != http.StatusUnauthorized || h.drops(reasonStale) != 1 {
		t.Fatalf("stale plain event: %d, stale drops %d", resp.Status, h.drops(reasonStale))
	}
}

func TestDeduplication(t *testing.T) {
	h := newHarness(t)
	h.allow(alice)
	e := h.text(alice, "oc_dup", larkapi.ChatGroup, "first", true)
	if resp := h.send(e); resp.Status != http.StatusOK {
		t.Fatal(resp.Status)
	}
	// Lark's retry: the same event id.
	if resp := h.send(e); resp.Status != http.StatusOK || h.drops(reasonDupEvent) != 1 {
		t.Fatalf("duplicate event id: %d, drops %d", resp.Status, h.drops(reasonDupEvent))
	}
	// The same message under a new event id.
	e2 := e
	e2.eventID = e.eventID + "-again"
	if resp := h.send(e2); resp.Status != http.StatusOK || h.drops(reasonDupMessage) != 1 {
		t.Fatalf("duplicate message id: %d, drops %d", resp.Status, h.drops(reasonDupMessage))
	}
	h.waitCurrent("oc_dup", e.messageID)
	// The keys persist with an expiry: after a restart the same ids are still refused.
	h.restart()
	e.created = h.clock.Now() // past the new watermark
	if resp := h.send(e); resp.Status != http.StatusOK || h.drops(reasonDupEvent) != 1 {
		t.Fatalf("duplicate after restart: %d, drops %d", resp.Status, h.drops(reasonDupEvent))
	}
	l := h.locusOf("oc_dup")
	if l.NextSeq != 2 || l.Queued != 0 {
		t.Fatalf("duplicates were queued: %+v", l)
	}
}

func TestDedupKeysExpire(t *testing.T) {
	h := newHarness(t, withConfig(func(c *Config) { c.DedupTTL = time.Second }))
	h.allow(alice)
	e := h.text(alice, "oc_ttl", larkapi.ChatGroup, "q", true)
	h.send(e)
	var raw []byte
	_ = h.st.View(context.Background(), func(tx *store.Tx) error {
		raw, _ = tx.GetRaw(colDedup.Key("m/" + e.messageID))
		return nil
	})
	if raw == nil {
		t.Fatal("no message dedup key")
	}
	time.Sleep(1100 * time.Millisecond)
	_ = h.st.View(context.Background(), func(tx *store.Tx) error {
		_, err := tx.GetRaw(colDedup.Key("m/" + e.messageID))
		if err == nil {
			t.Error("the dedup key did not expire")
		}
		return nil
	})
}

func TestAdmissionDrops(t *testing.T) {
	h := newHarness(t)
	h.allow(alice)
	cases := []struct {
		name   string
		reason string
		make   func() ev
	}{
		{"mention of someone else", reasonNotMentioned, func() ev {
			e := h.text(alice, "oc_a", larkapi.ChatGroup, "@_user_1 hello", false)
			e.mentions = []map[string]any{{"key": "@_user_1", "name": "Bob", "id": map[string]string{"open_id": bob}}}
			return e
		}},
		{"no mention at all", reasonNotMentioned, func() ev { return h.text(alice, "oc_a", larkapi.ChatGroup, "hello", false) }},
		{"direct message without a mention", reasonNotMentioned, func() ev { return h.text(alice, "oc_dm", larkapi.ChatP2P, "hello", false) }},
		{"@all", reasonNotMentioned, func() ev {
			e := h.text(alice, "oc_a", larkapi.ChatGroup, "@_all hello", false)
			e.mentions = []map[string]any{{"key": "@_all", "name": "所有人", "id": map[string]string{}}}
			return e
		}},
		{"bot sender", reasonSender, func() ev {
			e := h.text(alice, "oc_a", larkapi.ChatGroup, "hello", true)
			e.senderType = "app"
			return e
		}},
		{"sender without open_id", reasonSender, func() ev { return h.text("", "oc_a", larkapi.ChatGroup, "hello", true) }},
		{"unsupported type", reasonMessageType, func() ev {
			e := h.text(alice, "oc_a", larkapi.ChatGroup, "", true)
			e.msgType, e.content = "file", `{"file_key":"f1","file_name":"a.zip"}`
			return e
		}},
		{"sticker", reasonMessageType, func() ev {
			e := h.text(alice, "oc_a", larkapi.ChatGroup, "", true)
			e.msgType, e.content = "sticker", `{"file_key":"s1"}`
			return e
		}},
		{"only the mention", reasonEmpty, func() ev { return h.text(alice, "oc_a", larkapi.ChatGroup, "", true) }},
		{"before the watermark", reasonWatermark, func() ev {
			e := h.text(alice, "oc_a", larkapi.ChatGroup, "old", true)
			e.created = h.ch.started.Add(-DefaultStartSkew - time.Second)
			return e
		}},
		{"another event type", reasonEventType, func() ev {
			e := h.text(alice, "oc_a", larkapi.ChatGroup, "x", true)
			e.eventType = "im.chat.member.bot.added_v1"
			return e
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := h.drops(tc.reason)
			if resp := h.send(tc.make()); resp.Status != http.StatusOK {
				t.Fatalf("status %d: a refused event must look like an accepted one", resp.Status)
			}
			if got := h.drops(tc.reason); got != before+1 {
				t.Fatalf("%s drops %d → %d", tc.reason, before, got)
			}
		})
	}
	// Just at the watermark is accepted.
	e := h.text(alice, "oc_w", larkapi.ChatGroup, "at the mark", true)
	e.created = h.ch.started.Add(-DefaultStartSkew)
	h.send(e)
	h.waitCurrent("oc_w", e.messageID)
	if calls := h.fake.calls(); len(calls) != 1 || calls[0] != "react "+e.messageID+" "+ReactionWorking {
		t.Fatalf("refused events caused Lark calls: %v", calls)
	}
}

func TestWhoMayAsk(t *testing.T) {
	h := newHarness(t)
	h.allow(alice)
	ctx := context.Background()

	// Bob cannot bootstrap a group.
	h.send(h.text(bob, "oc_team", larkapi.ChatGroup, "anyone?", true))
	waitFor(t, "not_allowed drop", func() bool { return h.drops(reasonNotAllowed) == 1 })

	// Alice can; then Bob may ask there.
	ea := h.text(alice, "oc_team", larkapi.ChatGroup, "set up", true)
	h.send(ea)
	h.waitCurrent("oc_team", ea.messageID)
	eb := h.text(bob, "oc_team", larkapi.ChatGroup, "my question", true)
	h.send(eb)
	waitFor(t, "bob queued", func() bool { return h.locusOf("oc_team").Queued == 1 })

	// Direct messages are allowlist-only.
	h.send(h.text(bob, "oc_dm_bob", larkapi.ChatP2P, "psst", true))
	waitFor(t, "dm drop", func() bool { return h.drops(reasonDMNotAllowed) == 1 })
	ed := h.text(alice, "oc_dm_alice", larkapi.ChatP2P, "hello", true)
	h.send(ed)
	h.waitCurrent("oc_dm_alice", ed.messageID)

	// A shell-tier entry takes allowlisted senders only.
	l := h.locusOf("oc_team")
	if _, err := h.ch.UpdateLocus(ctx, l.ID, LocusUpdate{ToolTier: TierShell}); err != nil {
		t.Fatal(err)
	}
	h.send(h.text(bob, "oc_team", larkapi.ChatGroup, "again", true))
	waitFor(t, "shell-tier drop", func() bool { return h.drops(reasonShellTier) == 1 })
	h.send(h.text(alice, "oc_team", larkapi.ChatGroup, "me again", true))
	waitFor(t, "alice queued in the shell-tier entry", func() bool { return h.locusOf("oc_team").Queued == 2 })

	// Bob's control command is dropped, not forwarded.
	h.send(h.text(bob, "oc_team", larkapi.ChatGroup, "/unbind", true))
	waitFor(t, "command drop", func() bool { return h.drops(reasonCommand) == 1 })
	if q := h.locusOf("oc_team").Queued; q != 2 {
		t.Fatalf("bob's command was queued as a question: queued %d", q)
	}
	for _, r := range h.fake.replyList() {
		t.Fatalf("a refusal caused a reply: %+v", r)
	}
}

func TestTopicIsItsOwnEntry(t *testing.T) {
	h := newHarness(t)
	h.allow(alice)
	e := h.text(alice, "oc_topics", larkapi.ChatTopicGroup, "in a topic", true)
	e.threadID = "omt_1"
	h.send(e)
	h.waitCurrent("oc_topics#omt_1", e.messageID)
	topic := h.locusOf("oc_topics#omt_1")
	group := h.locusOf("oc_topics")
	if topic.MainSessionID != group.MainSessionID || topic.ChildID == group.ChildID {
		t.Fatalf("topic and group children must be siblings under one main session: %+v / %+v", topic, group)
	}
	// A member who is not allowlisted cannot open a new topic entry.
	e2 := h.text(bob, "oc_topics", larkapi.ChatTopicGroup, "new topic", true)
	e2.threadID = "omt_2"
	h.send(e2)
	waitFor(t, "topic bootstrap refused", func() bool { return h.drops(reasonNotAllowed) == 1 })
}

func TestNoDefaultWorkspace(t *testing.T) {
	h := newHarness(t, withConfig(func(c *Config) { c.DefaultWorkspace = "/nonexistent/pixie-workspace" }))
	h.allow(alice)
	h.send(h.text(alice, "oc_nows", larkapi.ChatGroup, "hi", true))
	waitFor(t, "no_workspace drop", func() bool { return h.drops(reasonNoWorkspace) == 1 })
	st := h.ch.Status(context.Background())
	if st.WorkspaceOK || len(st.Warnings) == 0 || !st.Available {
		t.Fatalf("status should say why nothing is created, and stay available: %+v", st)
	}
	var n int
	_ = h.st.View(context.Background(), func(tx *store.Tx) error {
		ss, _ := colSession.List(tx, "", store.ScanOptions{})
		ls, _ := colLocus.List(tx, "", store.ScanOptions{})
		n = len(ss) + len(ls)
		return nil
	})
	if n != 0 {
		t.Fatalf("something was created without a workspace: %d records", n)
	}
}

func TestChannelUnavailable(t *testing.T) {
	ctx := context.Background()
	t.Run("turned off", func(t *testing.T) {
		h := newHarness(t, withConfig(func(c *Config) { c.Enabled = false }))
		h.allow(alice)
		resp := h.send(h.text(alice, "oc_x", larkapi.ChatGroup, "hi", true))
		if resp.Status != http.StatusServiceUnavailable || h.drops(reasonUnavailable) != 1 {
			t.Fatalf("off channel: %d, drops %d", resp.Status, h.drops(reasonUnavailable))
		}
		if st := h.ch.Status(ctx); st.Available || st.Problem == "" {
			t.Fatalf("status: %+v", st)
		}
		if _, err := h.ch.MintPairing(ctx); err == nil {
			t.Fatal("pairing minted on an unavailable channel")
		}
		if ok, why := h.ch.QAAvailability(ctx); ok || why == "" {
			t.Fatal("Q&A action available on an unavailable channel")
		}
	})
	t.Run("unbound", func(t *testing.T) {
		h := newHarness(t)
		if _, err := h.ch.Unbind(ctx); err != nil {
			t.Fatal(err)
		}
		body, hdr := h.wire(challengeBody(testToken))
		if resp := h.ch.HandleEvent(ctx, hdr, body); resp.Status != http.StatusServiceUnavailable {
			t.Fatalf("unbound challenge: %d", resp.Status)
		}
		if st := h.ch.Status(ctx); st.Bound || st.Available || st.Problem == "" {
			t.Fatalf("status: %+v", st)
		}
		if _, ok, _ := h.secrets.Get(ctx, SecretAppSecret); ok {
			t.Fatal("unbind left the secret behind")
		}
	})
	t.Run("credentials lost", func(t *testing.T) {
		h := newHarness(t)
		_ = h.secrets.Delete(ctx, SecretVerificationToken)
		h.restart()
		st := h.ch.Status(ctx)
		if st.Available || st.Problem == "" {
			t.Fatalf("a binding missing its token must be unavailable: %+v", st)
		}
		if resp := h.send(h.text(alice, "oc_x", larkapi.ChatGroup, "hi", true)); resp.Status != http.StatusServiceUnavailable {
			t.Fatalf("event on an incomplete binding: %d", resp.Status)
		}
	})
}

// TestChallengeWithAKeyNeedsTheSignature is the attack where url_verification answered with a
// bad signature although an encrypt key was set: the challenge is now refused like any
// unsigned event (401, counted as a signature drop), and answered when signed.
func TestChallengeWithAKeyNeedsTheSignature(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		name   string
		mutate func(body []byte, hdr http.Header)
	}{
		{"bad signature", func(_ []byte, hdr http.Header) { hdr.Set(HeaderSignature, sign("1", "2", testKey, []byte("other"))) }},
		{"no signature", func(_ []byte, hdr http.Header) { hdr.Del(HeaderSignature) }},
		{"no timestamp", func(_ []byte, hdr http.Header) { hdr.Del(HeaderTimestamp) }},
		{"signed with another key", func(body []byte, hdr http.Header) {
			hdr.Set(HeaderSignature, sign(hdr.Get(HeaderTimestamp), hdr.Get(HeaderNonce), "another-key", body))
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, hdr := h.wire(challengeBody(testToken))
			tc.mutate(body, hdr)
			resp := h.ch.HandleEvent(context.Background(), hdr, body)
			if resp.Status != http.StatusUnauthorized || strings.Contains(string(resp.Body), "ch-4242") {
				t.Fatalf("%d %s, want 401 without the challenge", resp.Status, resp.Body)
			}
			if got := h.drops(reasonSignature); got != uint64(i+1) {
				t.Fatalf("signature drops %d, want %d", got, i+1)
			}
		})
	}
	body, hdr := h.wire(challengeBody(testToken))
	if resp := h.ch.HandleEvent(context.Background(), hdr, body); resp.Status != http.StatusOK {
		t.Fatalf("signed challenge: %d %s", resp.Status, resp.Body)
	}
}

// TestReplayWindowWithoutAKeyIgnoresTheUnsignedHeader is the attack where, without an encrypt
// key, a replayed event passed the window by carrying a fresh X-Lark-Request-Timestamp header
// (which nothing signs): the window now reads the event's own create_time, at its edge, and
// the header neither admits a stale event nor refuses a fresh one.
func TestReplayWindowWithoutAKeyIgnoresTheUnsignedHeader(t *testing.T) {
	h := newHarness(t, plain)
	h.allow(alice)
	now := h.clock.Now()
	for _, tc := range []struct {
		name    string
		created time.Time
		header  time.Time
		want    int
	}{
		{"stale event, fresh header", now.Add(-DefaultReplayWindow - time.Second), now, http.StatusUnauthorized},
		{"stale event, no header", now.Add(-DefaultReplayWindow - time.Second), time.Time{}, http.StatusUnauthorized},
		{"future event, fresh header", now.Add(DefaultReplayWindow + time.Second), now, http.StatusUnauthorized},
		{"event at the window's edge, stale header", now.Add(-DefaultReplayWindow), now.Add(-time.Hour), http.StatusOK},
		{"fresh event, stale header", now, now.Add(-time.Hour), http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := h.text(alice, "oc_replay", larkapi.ChatGroup, "hi", true)
			e.created = tc.created
			body, hdr := h.wire(e.body())
			if !tc.header.IsZero() {
				hdr.Set(HeaderTimestamp, strconv.FormatInt(tc.header.Unix(), 10))
			}
			if resp := h.ch.HandleEvent(context.Background(), hdr, body); resp.Status != tc.want {
				t.Fatalf("status %d %s, want %d", resp.Status, resp.Body, tc.want)
			}
		})
	}
	if got := h.drops(reasonStale); got != 3 {
		t.Fatalf("stale drops %d, want 3", got)
	}
}

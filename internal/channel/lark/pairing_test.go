package lark

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
)

func (h *harness) allowed(openID string) bool {
	es, err := h.ch.Allowlist(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	for _, e := range es {
		if e.OpenID == openID {
			return true
		}
	}
	return false
}

func (h *harness) mint() PairingCode {
	h.t.Helper()
	pc, err := h.ch.MintPairing(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return pc
}

func TestPairingCodeShape(t *testing.T) {
	h := newHarness(t)
	seen := map[string]bool{}
	for i := 0; i < 50; i++ {
		pc := h.mint()
		if len(pc.Code) != 9 || pc.Code[4] != '-' || pc.Command != "/pair "+pc.Code {
			t.Fatalf("code %q / command %q", pc.Code, pc.Command)
		}
		for _, r := range strings.ReplaceAll(pc.Code, "-", "") {
			if !strings.ContainsRune(pairAlphabet, r) {
				t.Fatalf("ambiguous character %q in %q", r, pc.Code)
			}
		}
		if got := pc.ExpiresAt.Sub(h.clock.Now()); got != PairTTL {
			t.Fatalf("lifetime %s", got)
		}
		seen[pc.Code] = true
	}
	if len(seen) < 45 {
		t.Fatalf("codes repeat too often: %d distinct of 50", len(seen))
	}
	// The pending code is never shown again.
	raw, _ := json.Marshal(h.ch.Status(context.Background()))
	for c := range seen {
		if strings.Contains(string(raw), c) {
			t.Fatal("status reveals the pairing code")
		}
	}
}

func TestPairing(t *testing.T) {
	h := newHarness(t)
	pc := h.mint()
	// The exact command in a direct chat, without a mention, pairs the sender.
	e := h.text(alice, "oc_dm_alice", larkapi.ChatP2P, pc.Command, false)
	if resp := h.send(e); resp.Status != http.StatusOK {
		t.Fatal(resp.Status)
	}
	if !h.allowed(alice) {
		t.Fatal("alice was not added")
	}
	es, _ := h.ch.Allowlist(context.Background())
	if es[0].Via != "pairing" || !es[0].Owner {
		t.Fatalf("the first paired person is the owner: %+v", es[0])
	}
	waitFor(t, "pairing confirmation", func() bool { return len(h.fake.replyList()) == 1 })
	// Single use: the same code again, from someone else.
	h.send(h.text(bob, "oc_dm_bob", larkapi.ChatP2P, pc.Command, false))
	if h.allowed(bob) || h.drops(reasonPairCode) != 1 {
		t.Fatalf("a used code paired again (pair_code drops %d)", h.drops(reasonPairCode))
	}
	// Pairing never creates a Locus.
	if ls, _ := h.ch.Loci(context.Background()); len(ls) != 0 {
		t.Fatalf("pairing created a Locus: %+v", ls)
	}
	if st := h.ch.Status(context.Background()); st.Pairing.Pending {
		t.Fatal("a used code is still pending")
	}
}

func TestPairingRefusals(t *testing.T) {
	cases := []struct {
		name string
		run  func(h *harness) ev
	}{
		{"expired at five minutes", func(h *harness) ev {
			pc := h.mint()
			h.clock.Add(PairTTL)
			return h.text(bob, "oc_dm", larkapi.ChatP2P, pc.Command, false)
		}},
		{"cancelled", func(h *harness) ev {
			pc := h.mint()
			h.ch.CancelPairing()
			return h.text(bob, "oc_dm", larkapi.ChatP2P, pc.Command, false)
		}},
		{"replaced by a new code", func(h *harness) ev {
			pc := h.mint()
			h.mint()
			return h.text(bob, "oc_dm", larkapi.ChatP2P, pc.Command, false)
		}},
		{"restart", func(h *harness) ev {
			pc := h.mint()
			h.restart()
			return h.text(bob, "oc_dm", larkapi.ChatP2P, pc.Command, false)
		}},
		{"wrong code", func(h *harness) ev {
			h.mint()
			return h.text(bob, "oc_dm", larkapi.ChatP2P, "/pair abcd-efgh", false)
		}},
		{"no code pending", func(h *harness) ev { return h.text(bob, "oc_dm", larkapi.ChatP2P, "/pair abcd-efgh", false) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if tc.name == "restart" && h.st.Shared() {
				t.Skip("over a shared store the code outlives one replica's restart (its TTL and a cancel expire it)")
			}
			h.send(tc.run(h))
			if h.allowed(bob) || h.drops(reasonPairCode) != 1 {
				t.Fatalf("paired (pair_code drops %d)", h.drops(reasonPairCode))
			}
			if len(h.fake.calls()) != 0 {
				t.Fatalf("a refused pairing caused Lark calls: %v", h.fake.calls())
			}
		})
	}
	t.Run("just before expiry", func(t *testing.T) {
		h := newHarness(t)
		pc := h.mint()
		h.clock.Add(PairTTL - time.Second)
		h.send(h.text(bob, "oc_dm", larkapi.ChatP2P, pc.Command, false))
		if !h.allowed(bob) {
			t.Fatal("a live code did not pair")
		}
	})
	t.Run("in a group", func(t *testing.T) {
		h := newHarness(t)
		pc := h.mint()
		h.send(h.text(bob, "oc_group", larkapi.ChatGroup, pc.Command, true))
		waitFor(t, "refusal", func() bool { return h.drops(reasonNotAllowed) == 1 })
		if h.allowed(bob) {
			t.Fatal("a group message paired")
		}
	})
}

func TestPairingRace(t *testing.T) {
	h := newHarness(t)
	for round := 0; round < 10; round++ {
		pc := h.mint()
		users := []string{fmt.Sprintf("ou_racer%da", round), fmt.Sprintf("ou_racer%db", round)}
		events := []ev{h.text(users[0], "oc_dm_"+users[0], larkapi.ChatP2P, pc.Command, false),
			h.text(users[1], "oc_dm_"+users[1], larkapi.ChatP2P, pc.Command, false)}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, e := range events {
			body, hdr := h.wire(e.body())
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				h.ch.HandleEvent(context.Background(), hdr, body)
			}()
		}
		close(start)
		wg.Wait()
		n := 0
		for _, u := range users {
			if h.allowed(u) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("round %d: %d users were added for one code", round, n)
		}
	}
	if got := h.drops(reasonPairCode); got != 10 {
		t.Fatalf("pair_code drops %d, want one loser per round", got)
	}
}

func TestAllowlistManual(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for _, bad := range []string{"", "alice", "ou_", "ou_a b", "ou_" + strings.Repeat("x", 200)} {
		if _, err := h.ch.Allow(ctx, AllowRequest{OpenID: bad}); err == nil {
			t.Fatalf("accepted open_id %q", bad)
		}
	}
	if _, err := h.ch.Allow(ctx, AllowRequest{OpenID: alice, Name: "Alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ch.Allow(ctx, AllowRequest{OpenID: bob, Owner: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ch.SetOwner(ctx, alice); err != nil {
		t.Fatal(err)
	}
	es, _ := h.ch.Allowlist(ctx)
	owners := 0
	for _, e := range es {
		if e.Owner {
			owners++
			if e.OpenID != alice {
				t.Fatalf("owner is %s", e.OpenID)
			}
		}
	}
	if owners != 1 {
		t.Fatalf("%d owners", owners)
	}
	if err := h.ch.Disallow(ctx, bob); err != nil {
		t.Fatal(err)
	}
	if err := h.ch.Disallow(ctx, bob); err == nil {
		t.Fatal("removing a missing entry succeeded")
	}
}

func TestAllowlistCap(t *testing.T) {
	h := newHarness(t, withConfig(func(c *Config) { c.MaxAllowlist = 5 }))
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		if _, err := h.ch.Allow(ctx, AllowRequest{OpenID: fmt.Sprintf("ou_u%04d", i)}); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	if _, err := h.ch.Allow(ctx, AllowRequest{OpenID: "ou_onemore"}); err == nil {
		t.Fatal("the allowlist took one entry over its cap")
	}
	// Pairing cannot go over the cap either.
	pc := h.mint()
	h.send(h.text(carol, "oc_dm_carol", larkapi.ChatP2P, pc.Command, false))
	if h.allowed(carol) || h.drops(reasonAllowFull) != 1 {
		t.Fatalf("pairing over the cap (drops %d)", h.drops(reasonAllowFull))
	}
	// Updating an existing entry still works at the cap.
	if _, err := h.ch.Allow(ctx, AllowRequest{OpenID: "ou_u0001", Name: "x"}); err != nil {
		t.Fatal(err)
	}
}

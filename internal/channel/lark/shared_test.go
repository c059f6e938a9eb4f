package lark

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/pgstore"
	"github.com/pixie-dev/pixie/internal/store/pgstore/pgtest"
)

func openPG(t testing.TB, url string) *store.Store {
	t.Helper()
	st, err := pgstore.Open(context.Background(), pgstore.Options{URL: url, MaxConns: 4, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestSuitesOverPostgres runs the channel's suites with one replica over PostgreSQL: the
// shared-store paths (leader, pairing in the store, images in the store, settlement marks) keep
// every behaviour the embedded store has.
func TestSuitesOverPostgres(t *testing.T) {
	pgtest.ServerURL(t)
	harnessStore = func(t testing.TB) *store.Store { return openPG(t, pgtest.NewDatabase(t)) }
	defer func() { harnessStore = nil }()
	for name, f := range map[string]func(*testing.T){
		"Pairing": TestPairing, "PairingRefusals": TestPairingRefusals, "PairingRace": TestPairingRace,
		"AllowlistCap": TestAllowlistCap, "FinishAndReactionSequence": TestFinishAndReactionSequence,
		"WaitAndTimeout": TestWaitAndTimeout, "QueueCap": TestQueueCap, "CancelAndArchive": TestCancelAndArchive,
		"ImageSpool": TestImageSpool, "BuiltinExecutor": TestBuiltinExecutor, "Deduplication": TestDeduplication,
		"WhoMayAsk": TestWhoMayAsk, "ControlCommands": TestControlCommands, "Binding": TestBinding,
		"FIFOAcrossRestart": TestFIFOAcrossRestart,
		// The built-in agent: the images come from the store, an answer is found by polling it.
		"AgentReadsTheWorkspace": TestAgentReadsTheWorkspace, "AgentSeesImages": TestAgentSeesImages, "AskMainSession": TestAskMainSession,
	} {
		t.Run(name, f)
	}
}

// replica opens a second channel over another connection to h's database, with h's
// credentials, as another replica of the same cluster.
func (h *harness) replica(url string) *Channel {
	h.t.Helper()
	cfg := h.cfg
	cfg.Registerer = prometheus.NewRegistry()
	st := openPG(h.t, url)
	h.t.Cleanup(func() { _ = st.Close() })
	cfg.Store = st
	ch, err := New(context.Background(), cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = ch.Close(context.Background()) })
	return ch
}

func (h *harness) sendTo(ch *Channel, e ev) EventResponse {
	body, hdr := h.wire(e.body())
	return ch.HandleEvent(context.Background(), hdr, body)
}

// Two replicas of one cluster: an event Lark delivers to both at once becomes one Delivery,
// activated once; a code minted on one is redeemed once through the other; the one consumer is
// the leader, and a Delivery finished through the other replica settles once.
func TestTwoReplicas(t *testing.T) {
	url := pgtest.NewDatabase(t)
	harnessStore = func(t testing.TB) *store.Store { return openPG(t, url) }
	h := newHarness(t)
	harnessStore = nil
	h.clock.Add(time.Minute) // b starts a minute after a: it adopts a's start all the same
	b := h.replica(url)
	a := h.ch
	if !a.started.Equal(b.started) {
		t.Fatalf("the replicas disagree on the watermark: %v / %v", a.started, b.started)
	}
	waitFor(t, "one leader", func() bool { return a.leads() != b.leads() })
	h.allow(alice)

	// One event, delivered to both replicas at once.
	e := h.text(alice, "oc_g1", larkapi.ChatGroup, "what is up?", true)
	var wg sync.WaitGroup
	for _, ch := range []*Channel{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := h.sendTo(ch, e); r.Status != http.StatusOK {
				t.Errorf("status %d", r.Status)
			}
		}()
	}
	wg.Wait()
	v := h.waitCurrent("oc_g1", e.messageID)
	ls, err := b.Loci(context.Background())
	if err != nil || len(ls) != 1 {
		t.Fatalf("%d loci, %v", len(ls), err)
	}
	det, err := b.GetLocus(context.Background(), ls[0].ID)
	if err != nil || len(det.Deliveries) != 1 {
		t.Fatalf("one event delivered twice made %d deliveries (%v)", len(det.Deliveries), err)
	}
	if n := a.met.dropCount(reasonDupEvent) + b.met.dropCount(reasonDupEvent); n != 1 {
		t.Fatalf("%d duplicate drops, want 1", n)
	}
	if got := h.fake.reactionsOn(e.messageID); len(got) != 1 {
		t.Fatalf("reactions %v: activated more than once", got)
	}
	// The other replica serves Current (waits for the leader's activation) and Finish.
	follower := a
	if a.leads() {
		follower = b
	}
	cv, err := follower.Current(context.Background(), v.ChildID)
	if err != nil || cv.ID != v.ID {
		t.Fatalf("current on the follower: %+v %v", cv, err)
	}
	if _, err := follower.Finish(context.Background(), v.ChildID, FinishRequest{DeliveryID: v.ID, Reply: "all good"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "done reaction", func() bool {
		for _, r := range h.fake.reactionsOn(e.messageID) {
			if r == ReactionDone {
				return true
			}
		}
		return false
	})
	if n := len(h.fake.replyList()); n != 1 {
		t.Fatalf("%d replies", n)
	}

	// Pairing: minted on one replica, raced on both.
	pc, err := a.MintPairing(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st := b.Status(context.Background()); !st.Pairing.Pending {
		t.Fatal("the other replica does not know the pending code")
	}
	// The database holds the code salted and hashed, never as minted, with the TTL.
	var raw []byte
	if err := a.st.View(context.Background(), func(tx *store.Tx) (err error) {
		raw, err = tx.GetRaw("lark-pair/" + pairID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	bare := strings.ReplaceAll(pc.Code, "-", "")
	if pc.Code == "" || bytes.Contains(bytes.ToLower(raw), bytes.ToLower([]byte(pc.Code))) || bytes.Contains(bytes.ToLower(raw), bytes.ToLower([]byte(bare))) {
		t.Fatalf("the stored pairing record %s holds the code %q", raw, pc.Code)
	}
	var rec pairRecord
	if err := json.Unmarshal(raw, &rec); err != nil || rec.Hash != hashCode(rec.Salt, pc.Code) || len(rec.Salt) < 32 {
		t.Fatalf("pairing record %s: %v", raw, err)
	}
	e1 := h.text(bob, "oc_dm_bob", larkapi.ChatP2P, pc.Command, false)
	e2 := h.text(carol, "oc_dm_carol", larkapi.ChatP2P, pc.Command, false)
	wg.Add(2)
	go func() { defer wg.Done(); h.sendTo(a, e1) }()
	go func() { defer wg.Done(); h.sendTo(b, e2) }()
	wg.Wait()
	n := 0
	for _, u := range []string{bob, carol} {
		if h.allowed(u) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d senders paired with one code", n)
	}
	// Unbinding on one replica takes the channel down on the other.
	if _, err := b.Unbind(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "unbind seen by the other replica", func() bool { return a.binder.live() == nil })

	// Only a start after the whole cluster stopped (its record expired: deleted here) moves the
	// watermark; a replica joining a running one keeps it.
	h.clock.Add(time.Minute)
	c := h.replica(url)
	if !c.started.Equal(a.started) {
		t.Fatalf("a replica joining the running cluster moved the watermark: %v / %v", c.started, a.started)
	}
	if err := a.st.Update(context.Background(), func(tx *store.Tx) error { return colMeta.Delete(tx, epochID) }); err != nil {
		t.Fatal(err)
	}
	d := h.replica(url)
	if !d.started.Equal(h.clock.Now().UTC()) {
		t.Fatalf("a start after the cluster's record expired kept the old watermark %v (now %v)", d.started, h.clock.Now())
	}
	time.Sleep(10 * time.Millisecond)
}

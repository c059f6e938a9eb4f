package lark

import (
	"context"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
)

func TestReplyMentionsAgainstChatMembers(t *testing.T) {
	h := newHarness(t)
	h.allow(alice)
	// Five members over three pages (the fake pages by two): paging must be followed.
	h.fake.members["oc_m"] = []larkapi.Member{{OpenID: alice, Name: "Alice"}, {OpenID: bob, Name: "Bob"}, {OpenID: carol, Name: "Carol"}, {OpenID: "ou_d1", Name: "Dan"}, {OpenID: "ou_d2", Name: "Dan"}}
	e := h.ask(alice, "oc_m", "who owns this?")
	v := h.waitCurrent("oc_m", e.messageID)
	h.finish(v.ChildID, v.ID, "@Carol owns it; ask @Dan or @Bob.")
	reps := h.fake.replyList()
	want := `<at user_id="ou_carol">Carol</at> owns it; ask @Dan or <at user_id="ou_bob">Bob</at>.`
	if len(reps) != 1 || reps[0].Text != want {
		t.Fatalf("reply %+v\nwant %q", reps, want)
	}
}

func TestSenderNameInBuiltinPrompt(t *testing.T) {
	oa, m := newFakeOpenAI(t, func(string) (string, int) { return "ok", 200 })
	h := newHarness(t, withConfig(func(c *Config) { c.Executor, c.Model = ExecutorBuiltin, m }))
	h.allow(alice)
	h.fake.members["oc_n"] = []larkapi.Member{{OpenID: alice, Name: "Alice"}}
	h.ask(alice, "oc_n", "hello")
	waitFor(t, "answer", func() bool { return len(h.fake.replyList()) == 1 })
	reqs := oa.requests()
	last := reqs[0].Messages[len(reqs[0].Messages)-1].Content
	if !strings.HasPrefix(last, "From Alice:\nhello") {
		t.Fatalf("prompt %q", last)
	}
	_ = context.Background()
}

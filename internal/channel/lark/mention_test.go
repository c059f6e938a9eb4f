package lark

import (
	"context"
	"strings"
	"testing"
)

func TestRenderMentions(t *testing.T) {
	members := []member{
		{OpenID: "ou_alice", Name: "Alice"},
		{OpenID: "ou_alice2", Name: "Alice Smith"},
		{OpenID: "ou_bob1", Name: "Bob"},
		{OpenID: "ou_bob2", Name: "Bob"},
		{OpenID: "ou_zhang", Name: "张三"},
		{OpenID: "ou_amp", Name: "R&D <Lead>"},
	}
	cases := []struct {
		name, in, want string
	}{
		{"one match", "thanks @Alice!", `thanks <at user_id="ou_alice">Alice</at>!`},
		{"longest name wins", "ask @Alice Smith", `ask <at user_id="ou_alice2">Alice Smith</at>`},
		{"two members share the name", "ping @Bob", "ping @Bob"},
		{"no such member", "hi @Carol", "hi @Carol"},
		{"prefix of a longer word", "@Alicex said", "@Alicex said"},
		{"e-mail address", "mail alice@Alice.com", "mail alice@Alice.com"},
		{"CJK without a space", "@张三你好", `<at user_id="ou_zhang">张三</at>你好`},
		{"case must match", "@alice", "@alice"},
		{"markup is escaped", "@R&D <Lead> please", `<at user_id="ou_amp">R&amp;D &lt;Lead&gt;</at> please`},
		{"invented mention markup is removed", `<at user_id="all">everyone</at> look`, "everyone look"},
		{"invented markup then a real name", `<at user_id="ou_evil">x</at> @Alice`, `x <at user_id="ou_alice">Alice</at>`},
		{"start of line", "@Alice\n@Bob", "<at user_id=\"ou_alice\">Alice</at>\n@Bob"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := renderMentions(tc.in, members); got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestReplyMentionsAgainstChatMembers(t *testing.T) {
	h := newHarness(t)
	h.allow(alice)
	// Five members over three pages (the fake pages by two): paging must be followed.
	h.fake.members["oc_m"] = []member{{alice, "Alice"}, {bob, "Bob"}, {carol, "Carol"}, {"ou_d1", "Dan"}, {"ou_d2", "Dan"}}
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
	h.fake.members["oc_n"] = []member{{alice, "Alice"}}
	h.ask(alice, "oc_n", "hello")
	waitFor(t, "answer", func() bool { return len(h.fake.replyList()) == 1 })
	reqs := oa.requests()
	last := reqs[0].Messages[len(reqs[0].Messages)-1].Content
	if !strings.HasPrefix(last, "From Alice:\nhello") {
		t.Fatalf("prompt %q", last)
	}
	_ = context.Background()
}

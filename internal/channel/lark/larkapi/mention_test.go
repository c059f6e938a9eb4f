package larkapi

import "testing"

func TestRenderMentions(t *testing.T) {
	members := []Member{
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
			if got := RenderMentions(tc.in, members); got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

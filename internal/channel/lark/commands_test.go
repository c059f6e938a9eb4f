package lark

import (
	"context"
	"strings"
	"testing"
)

// command sends text as a mention from sender in chat and returns the reply to it.
func (h *harness) command(sender, chatID, text string) string {
	h.t.Helper()
	e := h.ask(sender, chatID, text)
	var got string
	waitFor(h.t, "reply to "+text, func() bool {
		for _, r := range h.fake.replyList() {
			if r.MessageID == e.messageID {
				got = r.Text
				return true
			}
		}
		return false
	})
	return got
}

func TestParseCommand(t *testing.T) {
	cases := []struct {
		in   string
		name string
		args []string
		ok   bool
	}{
		{"/bind abc123", cmdBind, []string{"abc123"}, true},
		{"-b abc123", cmdBind, []string{"abc123"}, true},
		{"/BIND abc123", cmdBind, []string{"abc123"}, true},
		{"/unbind", cmdUnbind, nil, true},
		{"-u", cmdUnbind, nil, true},
		{"/status", cmdStatus, nil, true},
		{"-s", cmdStatus, nil, true},
		{"/tier shell", cmdTier, []string{"shell"}, true},
		{"-t read", cmdTier, []string{"read"}, true},
		{"/cancel", cmdCancel, nil, true},
		{"-c", cmdCancel, nil, true},
		{"/help", cmdHelp, nil, true},
		{"-h", cmdHelp, nil, true},
		{"/etc/hosts is broken, why?", "", nil, false},
		{"-x what", "", nil, false},
		{"what does /bind do?", "", nil, false},
		{"", "", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			c, ok := parseCommand(tc.in)
			if ok != tc.ok || c.name != tc.name || len(c.args) != len(tc.args) {
				t.Fatalf("parse %q: %+v %v", tc.in, c, ok)
			}
		})
	}
}

func TestControlCommands(t *testing.T) {
	h := newHarness(t)
	h.allow(alice)
	ctx := context.Background()
	for _, id := range []string{"abc123def456", "abc123xyz789", "zzz999aaa000", "qqq111bbb222"} {
		if _, err := h.ch.RegisterSession(ctx, SessionRequest{ID: id, Workspace: "/work/" + id[:3]}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.ch.ArchiveSession(ctx, "qqq111bbb222"); err != nil {
		t.Fatal(err)
	}

	// No match, several matches, an archived session and a child all get the same reply.
	ambiguous := h.command(alice, "oc_cmd", "/bind abc123")
	for _, p := range []string{"nomatch1", "qqq111", "abc123def4567"} {
		if got := h.command(alice, "oc_cmd", "/bind "+p); got != ambiguous {
			t.Fatalf("/bind %s: %q differs from the ambiguous reply %q", p, got, ambiguous)
		}
	}
	if ambiguous != noSessionMatch || strings.ContainsAny(ambiguous, "0123456789") {
		t.Fatalf("reply reveals something: %q", ambiguous)
	}
	if got := h.command(alice, "oc_cmd", "/bind abc12"); !strings.HasPrefix(got, "Usage") {
		t.Fatalf("short prefix: %q", got)
	}
	if _, ok, _ := h.ch.q.EntryLocus(ctx, "oc_cmd"); ok {
		t.Fatal("a failed /bind created a Locus")
	}

	// The short form binds to the one match.
	if got := h.command(alice, "oc_cmd", "-b abc123d"); !strings.Contains(got, "abc123") {
		t.Fatalf("-b: %q", got)
	}
	l := h.locusOf("oc_cmd")
	if l.MainSessionID != "abc123def456" {
		t.Fatalf("bound to %s", l.MainSessionID)
	}
	child := l.ChildID
	// A child's id is not a session prefix.
	if got := h.command(alice, "oc_cmd2", "/bind "+child); got != noSessionMatch {
		t.Fatalf("/bind <child>: %q", got)
	}
	if got := h.command(alice, "oc_cmd", "/bind abc123def"); !strings.HasPrefix(got, "Already bound") {
		t.Fatalf("rebind same: %q", got)
	}
	if got := h.command(alice, "oc_cmd", "-s"); !strings.Contains(got, "abc123") || !strings.Contains(got, child) || !strings.Contains(got, "Idle") {
		t.Fatalf("status: %q", got)
	}
	if got := h.command(alice, "oc_cmd", "/tier shell"); !strings.Contains(got, "shell") || h.locusOf("oc_cmd").ToolTier != TierShell {
		t.Fatalf("tier: %q", got)
	}
	if got := h.command(alice, "oc_cmd", "-t admin"); !strings.HasPrefix(got, "Usage") {
		t.Fatalf("bad tier: %q", got)
	}
	if got := h.command(alice, "oc_cmd", "-c"); got != "Nothing is being answered here." {
		t.Fatalf("cancel idle: %q", got)
	}

	// Moving a busy entry is refused; /cancel frees it; then it moves with a new child.
	q := h.ask(alice, "oc_cmd", "a question")
	h.waitCurrent("oc_cmd", q.messageID)
	if got := h.command(alice, "oc_cmd", "/bind zzz999"); !strings.Contains(got, "/cancel") {
		t.Fatalf("busy rebind: %q", got)
	}
	if got := h.command(alice, "oc_cmd", "/cancel"); !strings.HasPrefix(got, "Cancelled") {
		t.Fatalf("cancel: %q", got)
	}
	if got := h.command(alice, "oc_cmd", "/bind zzz999"); !strings.HasPrefix(got, "Bound") {
		t.Fatalf("rebind: %q", got)
	}
	if l := h.locusOf("oc_cmd"); l.MainSessionID != "zzz999aaa000" || l.ChildID == child {
		t.Fatalf("after rebind: %+v", l)
	}

	if got := h.command(alice, "oc_cmd", "-h"); got != helpText {
		t.Fatalf("help: %q", got)
	}
	if got := h.command(alice, "oc_cmd", "/unbind"); !strings.HasPrefix(got, "Unbound") {
		t.Fatalf("unbind: %q", got)
	}
	if got := h.command(alice, "oc_cmd", "-u"); got != "This chat is not bound." {
		t.Fatalf("unbind twice: %q", got)
	}
	if got := h.command(alice, "oc_cmd", "/status"); !strings.HasPrefix(got, "This chat is not bound") {
		t.Fatalf("status unbound: %q", got)
	}

	// Someone else's commands are dropped: no reply, nothing changes.
	before := len(h.fake.replyList())
	h.ask(bob, "oc_cmd", "/bind abc123def")
	h.ask(bob, "oc_cmd", "-h")
	waitFor(t, "command drops", func() bool { return h.drops(reasonCommand) == 2 })
	if len(h.fake.replyList()) != before {
		t.Fatal("a refused command got a reply")
	}
	if _, ok, _ := h.ch.q.EntryLocus(ctx, "oc_cmd"); ok {
		t.Fatal("a refused command bound the chat")
	}
}

func TestSessionRegistry(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for _, bad := range []SessionRequest{{ID: "short"}, {ID: "has space 123"}, {ID: "abcdef", Workspace: "relative/dir"}} {
		if _, err := h.ch.RegisterSession(ctx, bad); err == nil {
			t.Fatalf("accepted %+v", bad)
		}
	}
	s, err := h.ch.RegisterSession(ctx, SessionRequest{ID: "0f3c9a2e-1111-2222"})
	if err != nil || s.ShortID != "0f3c9a" {
		t.Fatalf("%+v %v", s, err)
	}
	// Idempotent; the workspace is filled in later.
	s, err = h.ch.RegisterSession(ctx, SessionRequest{ID: "0f3c9a2e-1111-2222", Workspace: "/w"})
	if err != nil || s.Workspace != "/w" {
		t.Fatalf("%+v %v", s, err)
	}
	if _, err := h.ch.ArchiveSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ch.RegisterSession(ctx, SessionRequest{ID: s.ID}); err == nil {
		t.Fatal("an archived session was registered again")
	}
}

// TestBindRefusesAPrefixTwoSessionsShare is the attack where `/bind abcdef` answered "Bound"
// although two sessions shared the prefix: every prefix more than one session shares gets the
// no-match reply and binds nothing, whether the other session is live, archived, or a child;
// a prefix only one session has, or a session's exact id, still binds.
func TestBindRefusesAPrefixTwoSessionsShare(t *testing.T) {
	h := newHarness(t)
	h.allow(alice)
	ctx := context.Background()
	for _, id := range []string{"abcdef111111", "abcdef222222", "fedcba111111", "fedcba222222", "solo99aaaaaa", "exact7", "exact7more"} {
		if _, err := h.ch.RegisterSession(ctx, SessionRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.ch.ArchiveSession(ctx, "fedcba222222"); err != nil {
		t.Fatal(err)
	}
	// A child whose id a main session's id starts with.
	if got := h.command(alice, "oc_child", "/bind solo99"); !strings.HasPrefix(got, "Bound") {
		t.Fatalf("bind solo99: %q", got)
	}
	child := h.locusOf("oc_child").ChildID
	if _, err := h.ch.RegisterSession(ctx, SessionRequest{ID: child + "x"}); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"abcdef", "fedcba", child[:8], child} {
		t.Run("ambiguous "+prefix, func(t *testing.T) {
			chat := "oc_amb_" + prefix
			if got := h.command(alice, chat, "/bind "+prefix); got != noSessionMatch {
				t.Fatalf("/bind %s: %q, want the no-match reply", prefix, got)
			}
			if _, ok, _ := h.ch.q.EntryLocus(ctx, chat); ok {
				t.Fatal("an ambiguous /bind bound the chat")
			}
		})
	}
	for prefix, want := range map[string]string{"abcdef1": "abcdef111111", "fedcba1": "fedcba111111", "exact7": "exact7", "exact7m": "exact7more"} {
		chat := "oc_one_" + prefix
		if got := h.command(alice, chat, "/bind "+prefix); !strings.HasPrefix(got, "Bound") {
			t.Fatalf("/bind %s: %q", prefix, got)
		}
		if l := h.locusOf(chat); l.MainSessionID != want {
			t.Fatalf("/bind %s bound %s, want %s", prefix, l.MainSessionID, want)
		}
	}
	// The archived one itself is no match, even by its whole id.
	if got := h.command(alice, "oc_arch", "/bind fedcba222222"); got != noSessionMatch {
		t.Fatalf("archived: %q", got)
	}
}

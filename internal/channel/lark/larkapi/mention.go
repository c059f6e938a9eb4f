package larkapi

import (
	"context"
	"html"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// memberTTL is how long a chat's member list is reused.
const memberTTL = 5 * time.Minute

// maxCachedChats is how many chats' member lists MemberCache keeps before it starts afresh.
const maxCachedChats = 1000

type memberEntry struct {
	at   time.Time
	list []Member
}

// MemberCache keeps chat member lists briefly (mention rendering, sender names). The zero
// value is ready to use; it is safe for concurrent use.
type MemberCache struct {
	mu sync.Mutex
	m  map[string]memberEntry
}

// Members returns chatID's members through a, from the cache when fetched less than five
// minutes before now.
func (mc *MemberCache) Members(ctx context.Context, a *Client, chatID string, now time.Time) ([]Member, error) {
	mc.mu.Lock()
	e, ok := mc.m[chatID]
	mc.mu.Unlock()
	if ok && now.Sub(e.at) < memberTTL {
		return e.list, nil
	}
	list, err := a.Members(ctx, chatID)
	if err != nil {
		return nil, err
	}
	mc.mu.Lock()
	if mc.m == nil || len(mc.m) > maxCachedChats {
		mc.m = map[string]memberEntry{}
	}
	mc.m[chatID] = memberEntry{at: now, list: list}
	mc.mu.Unlock()
	return list, nil
}

// atTag matches mention markup an executor wrote itself; it is reduced to plain text so that
// only names resolved against the chat's members become real mentions (a model cannot invent a
// destination such as <at user_id="all">).
var atTag = regexp.MustCompile(`(?is)</?at\b[^>]*>`)

// RenderMentions turns "@Name" into a real mention when Name is exactly one member's name. The
// longest member name that follows the "@" is taken; when two members share it, the text stays
// as written. An "@" inside a word (an e-mail address) is left alone.
func RenderMentions(text string, members []Member) string {
	text = atTag.ReplaceAllString(text, "")
	if len(members) == 0 || !strings.Contains(text, "@") {
		return text
	}
	count := map[string]int{}
	byName := map[string]string{}
	for _, m := range members {
		if m.Name == "" || !ValidOpenID(m.OpenID) {
			continue
		}
		count[m.Name]++
		byName[m.Name] = m.OpenID
	}
	var sb strings.Builder
	prev := rune(0)
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		if r != '@' || isWordRune(prev) {
			sb.WriteRune(r)
			prev = r
			i += size
			continue
		}
		rest := text[i+1:]
		best := ""
		for name := range count {
			if len(name) > len(best) && strings.HasPrefix(rest, name) && boundaryAfter(name, rest[len(name):]) {
				best = name
			}
		}
		if best == "" || count[best] != 1 {
			sb.WriteRune(r)
			prev = r
			i += size
			continue
		}
		sb.WriteString(`<at user_id="` + byName[best] + `">` + html.EscapeString(best) + `</at>`)
		i += 1 + len(best)
		prev, _ = utf8.DecodeLastRuneInString(best)
	}
	return sb.String()
}

func isWordRune(r rune) bool {
	return r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '.')
}

// boundaryAfter reports whether a name may end where after begins: a Latin name must not run on
// into more letters ("@Al" is not "@Alice"); a CJK name needs no space after it.
func boundaryAfter(name, after string) bool {
	if after == "" {
		return true
	}
	last, _ := utf8.DecodeLastRuneInString(name)
	next, _ := utf8.DecodeRuneInString(after)
	if last >= utf8.RuneSelf || next >= utf8.RuneSelf {
		return true
	}
	return !(unicode.IsLetter(next) || unicode.IsDigit(next) || next == '_')
}

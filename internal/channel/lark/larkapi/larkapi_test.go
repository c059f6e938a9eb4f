package larkapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestValidSignature(t *testing.T) {
	const key, ts, nonce = "encrypt-key", "1700000000", "n0nce"
	body := []byte(`{"encrypt":"abc"}`)
	sum := sha256.Sum256([]byte(ts + nonce + key + string(body)))
	good := hex.EncodeToString(sum[:])
	header := func(ts, nonce, sig string) http.Header {
		h := http.Header{}
		for k, v := range map[string]string{HeaderTimestamp: ts, HeaderNonce: nonce, HeaderSignature: sig} {
			if v != "" {
				h.Set(k, v)
			}
		}
		return h
	}
	tests := []struct {
		name   string
		header http.Header
		body   []byte
		want   bool
	}{
		{"signed over timestamp, nonce, key and body", header(ts, nonce, good), body, true},
		{"upper-case hex", header(ts, nonce, strings.ToUpper(good)), body, true},
		{"another body", header(ts, nonce, good), []byte(`{"encrypt":"abd"}`), false},
		{"another timestamp", header("1700000001", nonce, good), body, false},
		{"another nonce", header(ts, "other", good), body, false},
		{"not hex", header(ts, nonce, "zz"+good[2:]), body, false},
		{"cut short", header(ts, nonce, good[:62]), body, false},
		{"no signature", header(ts, nonce, ""), body, false},
		{"no timestamp", header("", nonce, good), body, false},
		{"no nonce", header(ts, "", good), body, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ValidSignature(tt.header, tt.body, key); got != tt.want {
				t.Fatalf("ValidSignature = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEqualSecret(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want bool
	}{
		{"equal", "token-1", "token-1", true},
		{"different", "token-1", "token-2", false},
		{"prefix", "token", "token-1", false},
		{"both empty never match", "", "", false},
		{"one empty", "", "token-1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EqualSecret(tt.a, tt.b); got != tt.want {
				t.Fatalf("EqualSecret(%q, %q) = %v", tt.a, tt.b, got)
			}
		})
	}
}

// receiveEvent is the "event" object of an im.message.receive_v1 callback with a text message.
func receiveEvent(senderType, text string) []byte {
	content, _ := json.Marshal(map[string]string{"text": text})
	ev := map[string]any{
		"sender": map[string]any{"sender_type": senderType, "sender_id": map[string]string{"open_id": "ou_alice"}},
		"message": map[string]any{
			"message_id": "om_1", "chat_id": "oc_1", "chat_type": ChatGroup, "message_type": "text",
			"create_time": "1700000000000", "content": string(content),
			"mentions": []map[string]any{{"key": "@_user_1", "name": "Pixie", "id": map[string]string{"open_id": "ou_bot"}}},
		},
	}
	b, _ := json.Marshal(ev)
	return b
}

func TestParseMessage(t *testing.T) {
	const maxChars = 5
	tests := []struct {
		name      string
		event     []byte
		reason    string
		text      string
		truncated bool
	}{
		{"at the character limit", receiveEvent("user", "@_user_1 字字字字字"), "", "字字字字字", false},
		{"one character over it", receiveEvent("user", "@_user_1 字字字字字字"), "", "字字字字字", true},
		{"not JSON", []byte(`{"message":`), ReasonMalformed, "", false},
		{"an app as sender", receiveEvent("app", "@_user_1 hi"), ReasonSender, "", false},
		{"only the mention", receiveEvent("user", "@_user_1"), ReasonEmpty, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, reason := ParseMessage(tt.event, "ou_bot", maxChars, 1)
			if reason != tt.reason {
				t.Fatalf("reason %q, want %q", reason, tt.reason)
			}
			if reason != "" {
				return
			}
			if m.Text != tt.text || m.Truncated != tt.truncated || !m.MentionsBot || m.EntryKey() != "oc_1" {
				t.Fatalf("message %+v, want text %q truncated %v", m, tt.text, tt.truncated)
			}
		})
	}
}

// TestMemberCache reuses a chat's member list for five minutes and fetches it again at the
// five-minute mark.
func TestMemberCache(t *testing.T) {
	var listings atomic.Int32
	answer := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /open-apis/auth/v3/tenant_access_token/internal", func(w http.ResponseWriter, r *http.Request) {
		answer(w, map[string]any{"code": 0, "msg": "ok", "tenant_access_token": "t-test", "expire": 7200})
	})
	mux.HandleFunc("GET /open-apis/im/v1/chats/{chat}/members", func(w http.ResponseWriter, r *http.Request) {
		listings.Add(1)
		items := []map[string]string{{"member_id_type": "open_id", "member_id": "ou_alice", "name": "Alice"}}
		answer(w, map[string]any{"code": 0, "msg": "success", "data": map[string]any{"items": items, "has_more": false}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	a := New(srv.URL, "cli_test", "secret", 5*time.Second)
	var mc MemberCache
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		at       time.Duration
		listings int32
	}{
		{0, 1},
		{memberTTL - time.Nanosecond, 1}, // still fresh
		{memberTTL, 2},                   // at the mark: fetched again
	}
	for _, s := range steps {
		ms, err := mc.Members(context.Background(), a, "oc_1", t0.Add(s.at))
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 1 || ms[0] != (Member{OpenID: "ou_alice", Name: "Alice"}) {
			t.Fatalf("members %+v", ms)
		}
		if n := listings.Load(); n != s.listings {
			t.Fatalf("at %s: %d listings, want %d", s.at, n, s.listings)
		}
		if s.at == memberTTL {
			t0 = t0.Add(memberTTL) // the list fetched at the mark is the fresh one
		}
	}
}

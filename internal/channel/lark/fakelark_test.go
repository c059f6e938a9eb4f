package lark

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
)

// fakeLark is an httptest server speaking Lark's open API wire format for the calls the channel
// makes: the tenant token, bot info, reply, reactions, image download, chat members and chat
// creation. It checks the bearer token on every API call and records what it was asked.
type fakeLark struct {
	srv       *httptest.Server
	secret    string
	botOpenID string

	mu        sync.Mutex
	log       []string // "reply om_1", "react om_1 OnIt", "unreact om_1 r1", …
	replies   []fakeReply
	reactions map[string]fakeReaction // reaction id → reaction
	nextID    int
	members   map[string][]larkapi.Member
	images    map[string][]byte
	chats     []fakeChat
	// failReplies makes the next n replies answer with a Lark error code.
	failReplies int
	// memberPage is the page size the member listing uses (to exercise paging).
	memberPage int
}

type fakeReply struct {
	MessageID string
	Text      string
	UUID      string
}

type fakeReaction struct {
	MessageID string
	Emoji     string
}

type fakeChat struct {
	ID    string
	Name  string
	Users []string
	UUID  string
}

func newFakeLark(t testing.TB, secret, botOpenID string) *fakeLark {
	f := &fakeLark{secret: secret, botOpenID: botOpenID, reactions: map[string]fakeReaction{},
		members: map[string][]larkapi.Member{}, images: map[string][]byte{}, memberPage: 2}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /open-apis/auth/v3/tenant_access_token/internal", f.token)
	mux.HandleFunc("GET /open-apis/bot/v3/info", f.auth(f.botInfo))
	mux.HandleFunc("POST /open-apis/im/v1/messages/{id}/reply", f.auth(f.reply))
	mux.HandleFunc("POST /open-apis/im/v1/messages/{id}/reactions", f.auth(f.react))
	mux.HandleFunc("DELETE /open-apis/im/v1/messages/{id}/reactions/{rid}", f.auth(f.unreact))
	mux.HandleFunc("GET /open-apis/im/v1/messages/{id}/resources/{key}", f.auth(f.resource))
	mux.HandleFunc("GET /open-apis/im/v1/chats/{chat}/members", f.auth(f.chatMembers))
	mux.HandleFunc("POST /open-apis/im/v1/chats", f.auth(f.createChat))
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeLark) token(w http.ResponseWriter, r *http.Request) {
	var req struct {
		AppID     string `json:"app_id"`
		AppSecret string `json:"app_secret"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	if req.AppSecret != f.secret || !strings.HasPrefix(req.AppID, "cli_") {
		writeJSON(w, map[string]any{"code": 10014, "msg": "app secret invalid"})
		return
	}
	writeJSON(w, map[string]any{"code": 0, "msg": "ok", "tenant_access_token": "t-" + req.AppID, "expire": 7200})
}

func (f *fakeLark) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer t-cli_") {
			w.WriteHeader(http.StatusUnauthorized)
			writeJSON(w, map[string]any{"code": 99991663, "msg": "invalid access token"})
			return
		}
		h(w, r)
	}
}

func (f *fakeLark) botInfo(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string]any{"code": 0, "msg": "ok", "bot": map[string]any{
		"activate_status": 2, "app_name": "Pixie Test", "open_id": f.botOpenID}})
}

func (f *fakeLark) record(s string) {
	f.log = append(f.log, s)
}

func (f *fakeLark) reply(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Content string `json:"content"`
		MsgType string `json:"msg_type"`
		UUID    string `json:"uuid"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	var content struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal([]byte(req.Content), &content)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failReplies > 0 {
		f.failReplies--
		writeJSON(w, map[string]any{"code": 230002, "msg": "bot is not in the chat"})
		return
	}
	id := r.PathValue("id")
	f.replies = append(f.replies, fakeReply{MessageID: id, Text: content.Text, UUID: req.UUID})
	f.record("reply " + id)
	f.nextID++
	writeJSON(w, map[string]any{"code": 0, "msg": "success", "data": map[string]any{
		"message_id": fmt.Sprintf("om_reply%d", f.nextID), "msg_type": req.MsgType}})
}

func (f *fakeLark) react(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ReactionType struct {
			EmojiType string `json:"emoji_type"`
		} `json:"reaction_type"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	rid := fmt.Sprintf("r%d", f.nextID)
	id := r.PathValue("id")
	f.reactions[rid] = fakeReaction{MessageID: id, Emoji: req.ReactionType.EmojiType}
	f.record("react " + id + " " + req.ReactionType.EmojiType)
	writeJSON(w, map[string]any{"code": 0, "msg": "success", "data": map[string]any{
		"reaction_id": rid, "reaction_type": map[string]string{"emoji_type": req.ReactionType.EmojiType}}})
}

func (f *fakeLark) unreact(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rid := r.PathValue("rid")
	re, ok := f.reactions[rid]
	if !ok || re.MessageID != r.PathValue("id") {
		writeJSON(w, map[string]any{"code": 231003, "msg": "reaction not found"})
		return
	}
	delete(f.reactions, rid)
	f.record("unreact " + re.MessageID + " " + re.Emoji)
	writeJSON(w, map[string]any{"code": 0, "msg": "success", "data": map[string]any{"reaction_id": rid}})
}

func (f *fakeLark) resource(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("type") != "image" {
		writeJSON(w, map[string]any{"code": 234001, "msg": "invalid type"})
		return
	}
	f.mu.Lock()
	data, ok := f.images[r.PathValue("key")]
	f.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusBadRequest)
		writeJSON(w, map[string]any{"code": 234003, "msg": "file not found"})
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Content-Disposition", `attachment; filename="image.png"`)
	_, _ = w.Write(data)
}

func (f *fakeLark) chatMembers(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("member_id_type") != "open_id" {
		writeJSON(w, map[string]any{"code": 99992402, "msg": "member_id_type required"})
		return
	}
	f.mu.Lock()
	all := f.members[r.PathValue("chat")]
	f.mu.Unlock()
	start, _ := strconv.Atoi(r.URL.Query().Get("page_token"))
	end := min(start+f.memberPage, len(all))
	items := []map[string]string{}
	for _, m := range all[start:end] {
		items = append(items, map[string]string{"member_id_type": "open_id", "member_id": m.OpenID, "name": m.Name, "tenant_key": "tk"})
	}
	data := map[string]any{"items": items, "has_more": end < len(all), "member_total": len(all)}
	if end < len(all) {
		data["page_token"] = strconv.Itoa(end)
	}
	writeJSON(w, map[string]any{"code": 0, "msg": "success", "data": data})
}

func (f *fakeLark) createChat(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("user_id_type") != "open_id" {
		writeJSON(w, map[string]any{"code": 99992402, "msg": "user_id_type"})
		return
	}
	var req struct {
		Name       string   `json:"name"`
		UserIDList []string `json:"user_id_list"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &req)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	c := fakeChat{ID: fmt.Sprintf("oc_qa%d", f.nextID), Name: req.Name, Users: req.UserIDList, UUID: r.URL.Query().Get("uuid")}
	f.chats = append(f.chats, c)
	f.record("chat " + c.ID)
	writeJSON(w, map[string]any{"code": 0, "msg": "success", "data": map[string]any{"chat_id": c.ID, "name": c.Name}})
}

// snapshot returns a copy of the call log.
func (f *fakeLark) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

func (f *fakeLark) replyList() []fakeReply {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeReply(nil), f.replies...)
}

func (f *fakeLark) chatList() []fakeChat {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeChat(nil), f.chats...)
}

// reactionsOn lists the emoji currently on a message.
func (f *fakeLark) reactionsOn(messageID string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.reactions {
		if r.MessageID == messageID {
			out = append(out, r.Emoji)
		}
	}
	return out
}

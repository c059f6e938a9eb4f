package lark

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
)

const (
	testSecret = "app-secret-1234"
	testToken  = "verification-token-abcd"
	testKey    = "encrypt-key-xyz"
	botOpenID  = "ou_bot0001"
	alice      = "ou_alice"
	bob        = "ou_bob"
	carol      = "ou_carol"
)

var appCounter atomic.Int64

// clock is a settable clock, starting at the real time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type harness struct {
	t       testing.TB
	fake    *fakeLark
	st      *store.Store
	ch      *Channel
	clock   *clock
	secrets *MemorySecrets
	appID   string
	ekey    string
	cfg     Config
	seq     atomic.Int64
}

type harnessOpt func(*harness)

// harnessStore, when set, opens the store of every new harness (shared_test.go runs suites
// over PostgreSQL with it); nil means Badger in a temp dir.
var harnessStore func(t testing.TB) *store.Store

func plain(h *harness) { h.ekey = "" }

func withConfig(f func(*Config)) harnessOpt { return func(h *harness) { f(&h.cfg) } }

// newHarness starts a real Badger store, the fake Lark, and a bound, enabled channel with an
// external executor (tests drive finish and wait themselves).
func newHarness(t testing.TB, opts ...harnessOpt) *harness {
	t.Helper()
	ctx := context.Background()
	var st *store.Store
	if harnessStore != nil {
		st = harnessStore(t)
	} else {
		var err error
		st, err = badgerstore.Open(ctx, badgerstore.Options{Dir: t.TempDir(), GCInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = st.Close() })
	h := &harness{
		t: t, st: st, clock: &clock{t: time.Now().UTC().Truncate(time.Second)}, secrets: &MemorySecrets{},
		appID: fmt.Sprintf("cli_test%d_%d", time.Now().UnixNano(), appCounter.Add(1)),
		ekey:  testKey,
		fake:  newFakeLark(t, testSecret, botOpenID),
	}
	h.cfg = Config{
		Enabled:          true,
		BaseURL:          h.fake.srv.URL,
		DefaultWorkspace: t.TempDir(),
		SpoolDir:         filepath.Join(t.TempDir(), "spool"),
		Executor:         ExecutorExternal,
		SweepInterval:    -1,
		Secrets:          h.secrets,
		Registerer:       prometheus.NewRegistry(),
		Now:              h.clock.Now,
	}
	for _, o := range opts {
		o(h)
	}
	h.open()
	if _, err := h.ch.Bind(ctx, BindRequest{AppID: h.appID, AppSecret: testSecret, VerificationToken: testToken, EncryptKey: h.ekey}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	return h
}

func (h *harness) open() {
	h.t.Helper()
	cfg := h.cfg
	cfg.Store = h.st
	ch, err := New(context.Background(), cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.ch = ch
	h.t.Cleanup(func() { _ = ch.Close(context.Background()) })
}

// restart closes the channel and opens a new one over the same store and credentials, as a
// process restart does (the clock moves on so the watermark is after the earlier messages).
func (h *harness) restart() {
	h.t.Helper()
	_ = h.ch.Close(context.Background())
	h.open()
}

// ev is one im.message.receive_v1 event.
type ev struct {
	eventID, messageID, chatID, chatType, threadID string
	sender, senderType                             string
	msgType, content                               string
	mentions                                       []map[string]any
	created                                        time.Time
	token, appID                                   string
	eventType                                      string
}

// text builds a text message from sender in chat; mention adds an @-mention of the bot.
func (h *harness) text(sender, chatID, chatType, text string, mention bool) ev {
	n := h.seq.Add(1)
	e := ev{
		eventID: fmt.Sprintf("evt%d%d", n, time.Now().UnixNano()), messageID: fmt.Sprintf("om_%d", n),
		chatID: chatID, chatType: chatType, sender: sender, senderType: "user", msgType: "text",
		created: h.clock.Now(), token: testToken, appID: h.appID, eventType: eventReceive,
	}
	if mention {
		text = "@_user_1 " + text
		e.mentions = append(e.mentions, map[string]any{"key": "@_user_1", "name": "Pixie Test",
			"id": map[string]string{"open_id": botOpenID, "union_id": "on_bot", "user_id": ""}})
	}
	c, _ := json.Marshal(map[string]string{"text": text})
	e.content = string(c)
	return e
}

func (e ev) body() []byte {
	msg := map[string]any{
		"message_id": e.messageID, "chat_id": e.chatID, "chat_type": e.chatType, "message_type": e.msgType,
		"content": e.content, "mentions": e.mentions, "create_time": strconv.FormatInt(e.created.UnixMilli(), 10),
	}
	if e.threadID != "" {
		msg["thread_id"] = e.threadID
	}
	env := map[string]any{
		"schema": "2.0",
		"header": map[string]string{"event_id": e.eventID, "event_type": e.eventType, "app_id": e.appID,
			"tenant_key": "tk", "create_time": strconv.FormatInt(e.created.UnixMilli(), 10), "token": e.token},
		"event": map[string]any{
			"sender":  map[string]any{"sender_id": map[string]string{"open_id": e.sender}, "sender_type": e.senderType, "tenant_key": "tk"},
			"message": msg,
		},
	}
	b, _ := json.Marshal(env)
	return b
}

// encrypt does what Lark does: AES-256-CBC with key SHA-256(encrypt key), a random IV in front,
// PKCS#7 padding, base64.
func encrypt(t testing.TB, plain []byte, key string) string {
	k := sha256.Sum256([]byte(key))
	block, err := aes.NewCipher(k[:])
	if err != nil {
		t.Fatal(err)
	}
	pad := aes.BlockSize - len(plain)%aes.BlockSize
	plain = append(plain, bytes.Repeat([]byte{byte(pad)}, pad)...)
	out := make([]byte, aes.BlockSize+len(plain))
	if _, err := rand.Read(out[:aes.BlockSize]); err != nil {
		t.Fatal(err)
	}
	cipher.NewCBCEncrypter(block, out[:aes.BlockSize]).CryptBlocks(out[aes.BlockSize:], plain)
	return base64.StdEncoding.EncodeToString(out)
}

func sign(ts, nonce, key string, body []byte) string {
	s := sha256.Sum256([]byte(ts + nonce + key + string(body)))
	return hex.EncodeToString(s[:])
}

// wire turns a plaintext payload into the body and headers Lark would send.
func (h *harness) wire(plain []byte) ([]byte, http.Header) {
	hdr := http.Header{}
	hdr.Set("Content-Type", "application/json")
	if h.ekey == "" {
		return plain, hdr
	}
	body, _ := json.Marshal(map[string]string{"encrypt": encrypt(h.t, plain, h.ekey)})
	ts := strconv.FormatInt(h.clock.Now().Unix(), 10)
	nonce := fmt.Sprintf("n%d", h.seq.Add(1))
	hdr.Set(HeaderTimestamp, ts)
	hdr.Set(HeaderNonce, nonce)
	hdr.Set(HeaderSignature, sign(ts, nonce, h.ekey, body))
	return body, hdr
}

func (h *harness) send(e ev) EventResponse {
	body, hdr := h.wire(e.body())
	return h.ch.HandleEvent(context.Background(), hdr, body)
}

// waitFor polls cond until it holds or two seconds pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// allow puts sender on the allowlist.
func (h *harness) allow(openID string) {
	h.t.Helper()
	if _, err := h.ch.Allow(context.Background(), AllowRequest{OpenID: openID}); err != nil {
		h.t.Fatal(err)
	}
}

// locusOf returns the active Locus of an entry (failing when there is none).
func (h *harness) locusOf(entry string) Locus {
	h.t.Helper()
	l, ok, err := h.ch.q.EntryLocus(context.Background(), entry)
	if err != nil || !ok {
		h.t.Fatalf("no active locus for %s (err %v)", entry, err)
	}
	return l
}

// waitCurrent waits until the entry's Locus has a current Delivery for messageID and its
// activation is done, and returns it as the external executor sees it.
func (h *harness) waitCurrent(entry, messageID string) DeliveryView {
	h.t.Helper()
	var v DeliveryView
	waitFor(h.t, "current delivery "+messageID+" "+fmt.Sprint(h.fake.calls()), func() bool {
		l, ok, err := h.ch.q.EntryLocus(context.Background(), entry)
		if err != nil || !ok {
			return false
		}
		v, err = h.ch.Current(context.Background(), l.ChildID)
		return err == nil && v.MessageID == messageID
	})
	waitFor(h.t, "working reaction on "+messageID+" "+fmt.Sprint(h.fake.calls()), func() bool {
		for _, e := range h.fake.reactionsOn(messageID) {
			if e == ReactionWorking {
				return true
			}
		}
		return false
	})
	return v
}

func (h *harness) drops(reason string) uint64 { return h.ch.met.dropCount(reason) }

// fakeOpenAI is an httptest server speaking the OpenAI chat completions wire format; the
// channel reaches it through the real provider in internal/model.
type fakeOpenAI struct {
	srv    *httptest.Server
	answer func(lastUser string) (string, int)
	mu     sync.Mutex
	seen   []chatRequest
}

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

func newFakeOpenAI(t *testing.T, answer func(lastUser string) (string, int)) (*fakeOpenAI, model.Model) {
	f := &fakeOpenAI{answer: answer}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-test" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		var req chatRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		f.seen = append(f.seen, req)
		f.mu.Unlock()
		last := ""
		if n := len(req.Messages); n > 0 {
			last = req.Messages[n-1].Content
		}
		text, status := f.answer(last)
		w.Header().Set("Content-Type", "application/json")
		if status != http.StatusOK {
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error":{"message":%q,"type":"server_error","code":null}}`, text)
			return
		}
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1717000000,"model":"m",
"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],
"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`, text)
	}))
	t.Cleanup(f.srv.Close)
	m, err := model.New(model.Config{Provider: "openai", BaseURL: f.srv.URL, Model: "m", APIKey: "sk-test", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return f, m
}

func (f *fakeOpenAI) requests() []chatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]chatRequest(nil), f.seen...)
}

// The Loci's collections as the store holds them (the key layout in locus's doc.go), for the
// tests that look at the raw records.
var (
	colLocus   = store.NewCollection[Locus]("lark-locus")
	colSession = store.NewCollection[Session]("lark-session")
)

package larkapi

import (
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"

	larkevent "github.com/larksuite/oapi-sdk-go/v3/event"
)

// Header names of Lark's signed callbacks.
const (
	HeaderTimestamp = "X-Lark-Request-Timestamp"
	HeaderNonce     = "X-Lark-Request-Nonce"
	HeaderSignature = "X-Lark-Signature"
)

// Envelope is a callback body, decrypted: a URL verification or a schema 2.0 event. The outer
// body of an encrypted callback has only Encrypt.
type Envelope struct {
	Encrypt   string          `json:"encrypt"`
	Type      string          `json:"type"`
	Token     string          `json:"token"`
	Challenge string          `json:"challenge"`
	Schema    string          `json:"schema"`
	Header    *EventHeader    `json:"header"`
	Event     json.RawMessage `json:"event"`
}

// EventHeader is the header of a schema 2.0 event.
type EventHeader struct {
	EventID    string `json:"event_id"`
	EventType  string `json:"event_type"`
	AppID      string `json:"app_id"`
	TenantKey  string `json:"tenant_key"`
	CreateTime string `json:"create_time"` // Unix milliseconds
	Token      string `json:"token"`
}

// Decrypt opens the "encrypt" field of a callback sealed with encryptKey.
func Decrypt(encrypted, encryptKey string) ([]byte, error) {
	return larkevent.EventDecrypt(encrypted, encryptKey)
}

// ValidSignature checks X-Lark-Signature = hex(sha256(timestamp + nonce + encrypt key + body))
// in constant time.
func ValidSignature(header http.Header, body []byte, encryptKey string) bool {
	ts, nonce, sig := header.Get(HeaderTimestamp), header.Get(HeaderNonce), header.Get(HeaderSignature)
	if ts == "" || nonce == "" || sig == "" {
		return false
	}
	want := larkevent.Signature(ts, nonce, encryptKey, string(body))
	got, err := hex.DecodeString(strings.ToLower(sig))
	if err != nil {
		return false
	}
	w, _ := hex.DecodeString(want)
	return subtle.ConstantTimeCompare(got, w) == 1
}

// EqualSecret compares in constant time; empty never matches.
func EqualSecret(a, b string) bool {
	return a != "" && b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// Package larkapi is Pixie's side of the Lark (Feishu) Open API and the only package that
// imports Lark's SDK: the outbound client (replies, reactions, image downloads, member
// listings, group creation, the credential check), the parsing of a received message event,
// the rendering of @mentions against a chat's members, and the parts of webhook verification
// that are Lark's protocol (decryption, the signature, constant-time token comparison). No SDK
// type leaves it. The channel itself (admission, Loci, Deliveries) is package lark.
package larkapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	lark "github.com/larksuite/oapi-sdk-go/v3"
	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"

	"github.com/pixie-dev/pixie/internal/errs"
)

// Reaction emoji types the Host maintains on a triggering message (Lark's names, case-sensitive).
const (
	ReactionWorking = "OnIt"
	ReactionDone    = "DONE"
	ReactionFailed  = "CrossMark"
)

// maxResponseBytes caps any response body read from Lark (images are capped lower by config).
const maxResponseBytes = 32 << 20

// Client is the outbound side: the official SDK client, with every answer checked with
// Success(). It is safe for concurrent use.
type Client struct {
	cli *lark.Client
}

// quietLogger keeps the SDK silent: its debug output carries request bodies, and its warnings
// can carry token responses. Pixie logs its own, redacted, errors.
type quietLogger struct{}

func (quietLogger) Debug(context.Context, ...interface{}) {}
func (quietLogger) Info(context.Context, ...interface{})  {}
func (quietLogger) Warn(context.Context, ...interface{})  {}
func (quietLogger) Error(context.Context, ...interface{}) {}

// cappedTransport refuses response bodies larger than maxResponseBytes (the SDK reads every
// body fully into memory).
type cappedTransport struct{ base http.RoundTripper }

func (t cappedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &cappedBody{rc: resp.Body, left: maxResponseBytes}
	return resp, nil
}

type cappedBody struct {
	rc   io.ReadCloser
	left int64
}

var errBodyTooLarge = errors.New("lark: response body over the size limit")

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One more byte tells a body of exactly the limit from a longer one.
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n > 0 {
			return 0, errBodyTooLarge
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// New returns a client of the app appID at baseURL (Lark's or Feishu's open platform, or a
// fake); timeout bounds each HTTP request.
func New(baseURL, appID, secret string, timeout time.Duration) *Client {
	hc := &http.Client{Timeout: timeout, Transport: cappedTransport{base: http.DefaultTransport}}
	cli := lark.NewClient(appID, secret,
		lark.WithOpenBaseUrl(strings.TrimRight(baseURL, "/")),
		lark.WithHttpClient(hc),
		lark.WithLogger(quietLogger{}),
		lark.WithLogLevel(larkcore.LogLevelError),
	)
	return &Client{cli: cli}
}

// larkErr turns a Lark answer with a non-zero code into a coded error (the message Lark gives
// is safe to show: it names the problem, not a credential).
func larkErr(call string, code int, msg string) error {
	return errs.New(errs.Upstream, "Lark refused %s (code %d: %s)", call, code, msg)
}

// transportErr wraps a failure to reach Lark.
func transportErr(call string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return errs.Wrap(errs.Timeout, err, "Lark did not answer %s in time", call)
	}
	return errs.Wrap(errs.Upstream, err, "could not reach Lark for %s", call)
}

// botInfo is the bot/v3/info answer.
type botInfo struct {
	Code int    `json:"code"`
	Msg  string `json:"msg"`
	Bot  struct {
		OpenID  string `json:"open_id"`
		AppName string `json:"app_name"`
	} `json:"bot"`
}

// Verify proves the app id and secret by fetching a fresh tenant token (never a cached one) and
// then the bot's own identity with it.
func (a *Client) Verify(ctx context.Context, appID, secret string) (openID, name string, err error) {
	tr, err := a.cli.GetTenantAccessTokenBySelfBuiltApp(ctx, &larkcore.SelfBuiltTenantAccessTokenReq{AppID: appID, AppSecret: secret})
	if err != nil {
		return "", "", transportErr("the tenant token request", err)
	}
	if !tr.Success() || tr.TenantAccessToken == "" {
		return "", "", errs.New(errs.Unprocessable, "Lark refused the app id or app secret (code %d: %s)", tr.Code, tr.Msg)
	}
	resp, err := a.cli.Get(ctx, "/open-apis/bot/v3/info", nil, larkcore.AccessTokenTypeTenant,
		larkcore.WithTenantAccessToken(tr.TenantAccessToken))
	if err != nil {
		return "", "", transportErr("the bot info request", err)
	}
	var bi botInfo
	if err := json.Unmarshal(resp.RawBody, &bi); err != nil {
		return "", "", errs.Wrap(errs.Upstream, err, "Lark's bot info answer is not JSON (HTTP %d)", resp.StatusCode)
	}
	if bi.Code != 0 {
		return "", "", larkErr("the bot info request", bi.Code, bi.Msg)
	}
	if !ValidOpenID(bi.Bot.OpenID) {
		return "", "", errs.New(errs.Upstream, "Lark's bot info has no usable open_id: is the bot capability enabled for this app?")
	}
	return bi.Bot.OpenID, bi.Bot.AppName, nil
}

// Reply answers messageID with a text message; uuid makes a retried reply idempotent.
func (a *Client) Reply(ctx context.Context, messageID, text, uuid string) (string, error) {
	content, err := json.Marshal(map[string]string{"text": text})
	if err != nil {
		return "", err
	}
	body := larkim.NewReplyMessageReqBodyBuilder().MsgType("text").Content(string(content)).ReplyInThread(false)
	if uuid != "" {
		body = body.Uuid(uuid)
	}
	req := larkim.NewReplyMessageReqBuilder().MessageId(messageID).Body(body.Build()).Build()
	resp, err := a.cli.Im.Message.Reply(ctx, req)
	if err != nil {
		return "", transportErr("the reply", err)
	}
	if !resp.Success() {
		return "", larkErr("the reply", resp.Code, resp.Msg)
	}
	if resp.Data == nil || resp.Data.MessageId == nil {
		return "", nil
	}
	return *resp.Data.MessageId, nil
}

// AddReaction puts emoji on messageID and returns the reaction id.
func (a *Client) AddReaction(ctx context.Context, messageID, emoji string) (string, error) {
	req := larkim.NewCreateMessageReactionReqBuilder().MessageId(messageID).
		Body(larkim.NewCreateMessageReactionReqBodyBuilder().
			ReactionType(larkim.NewEmojiBuilder().EmojiType(emoji).Build()).Build()).Build()
	resp, err := a.cli.Im.MessageReaction.Create(ctx, req)
	if err != nil {
		return "", transportErr("the reaction", err)
	}
	if !resp.Success() {
		return "", larkErr("the reaction", resp.Code, resp.Msg)
	}
	if resp.Data == nil || resp.Data.ReactionId == nil {
		return "", errs.New(errs.Upstream, "Lark's reaction answer has no reaction_id")
	}
	return *resp.Data.ReactionId, nil
}

// DeleteReaction removes a reaction the bot added.
func (a *Client) DeleteReaction(ctx context.Context, messageID, reactionID string) error {
	req := larkim.NewDeleteMessageReactionReqBuilder().MessageId(messageID).ReactionId(reactionID).Build()
	resp, err := a.cli.Im.MessageReaction.Delete(ctx, req)
	if err != nil {
		return transportErr("the reaction removal", err)
	}
	if !resp.Success() {
		return larkErr("the reaction removal", resp.Code, resp.Msg)
	}
	return nil
}

// Download fetches an image of messageID; more than max bytes is refused.
func (a *Client) Download(ctx context.Context, messageID, key string, max int64) ([]byte, error) {
	req := larkim.NewGetMessageResourceReqBuilder().MessageId(messageID).FileKey(key).Type("image").Build()
	resp, err := a.cli.Im.MessageResource.Get(ctx, req)
	if err != nil {
		return nil, transportErr("the image download", err)
	}
	if !resp.Success() {
		return nil, larkErr("the image download", resp.Code, resp.Msg)
	}
	if resp.File == nil {
		return nil, errs.New(errs.Upstream, "Lark's image download has no body")
	}
	data, err := io.ReadAll(io.LimitReader(resp.File, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, errs.New(errs.TooLarge, "the image is over the %d-byte limit", max)
	}
	return data, nil
}

// Member is one chat member (bots are not listed by Lark).
type Member struct {
	OpenID string `json:"openId"`
	Name   string `json:"name"`
}

// maxMemberPages bounds the member listing (100 per page: 5000 members).
const maxMemberPages = 50

// Members lists chatID's members by open_id, following pages.
func (a *Client) Members(ctx context.Context, chatID string) ([]Member, error) {
	var out []Member
	token := ""
	for page := 0; page < maxMemberPages; page++ {
		b := larkim.NewGetChatMembersReqBuilder().ChatId(chatID).MemberIdType("open_id").PageSize(100)
		if token != "" {
			b = b.PageToken(token)
		}
		resp, err := a.cli.Im.ChatMembers.Get(ctx, b.Build())
		if err != nil {
			return nil, transportErr("the member listing", err)
		}
		if !resp.Success() {
			return nil, larkErr("the member listing", resp.Code, resp.Msg)
		}
		if resp.Data == nil {
			break
		}
		for _, it := range resp.Data.Items {
			if it == nil || it.MemberId == nil {
				continue
			}
			m := Member{OpenID: *it.MemberId}
			if it.Name != nil {
				m.Name = *it.Name
			}
			out = append(out, m)
		}
		if resp.Data.HasMore == nil || !*resp.Data.HasMore || resp.Data.PageToken == nil || *resp.Data.PageToken == "" {
			break
		}
		token = *resp.Data.PageToken
	}
	return out, nil
}

// CreateChat creates a private group with the bot in it and the person added; uuid makes a
// retried creation idempotent on Lark's side.
func (a *Client) CreateChat(ctx context.Context, name, description, personOpenID, uuid string) (string, error) {
	body := larkim.NewCreateChatReqBodyBuilder().Name(name).Description(description).
		UserIdList([]string{personOpenID}).ChatMode("group").ChatType("private").Build()
	b := larkim.NewCreateChatReqBuilder().UserIdType("open_id").Body(body)
	if uuid != "" {
		b = b.Uuid(uuid)
	}
	resp, err := a.cli.Im.Chat.Create(ctx, b.Build())
	if err != nil {
		return "", transportErr("the group creation", err)
	}
	if !resp.Success() {
		return "", larkErr("the group creation", resp.Code, resp.Msg)
	}
	if resp.Data == nil || resp.Data.ChatId == nil || *resp.Data.ChatId == "" {
		return "", errs.New(errs.Upstream, "Lark's group creation answer has no chat_id")
	}
	return *resp.Data.ChatId, nil
}

// ValidOpenID reports whether s looks like an open_id (ou_ followed by id characters).
func ValidOpenID(s string) bool {
	if !strings.HasPrefix(s, "ou_") || len(s) < 4 || len(s) > 128 {
		return false
	}
	for _, r := range s[3:] {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

package larkapi

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"
	"github.com/pixie-dev/pixie/internal/clip"
)

// Chat types as Lark names them.
const (
	ChatP2P        = "p2p"
	ChatGroup      = "group"
	ChatTopicGroup = "topic_group"
)

// Reasons ParseMessage gives for an event it does not take (the channel's drop reasons of the
// same names).
const (
	ReasonMalformed   = "malformed"    // a receive event missing required parts
	ReasonSender      = "sender"       // the sender is not a real user
	ReasonMessageType = "message_type" // an unsupported message type
	ReasonEmpty       = "empty"        // nothing left to answer after removing the mention
)

// Message is the part of an im.message.receive_v1 event Pixie keeps: no raw payload, no
// mention table beyond what admission and rendering need.
type Message struct {
	MessageID    string    `json:"messageId"`
	ChatID       string    `json:"chatId"`
	ChatType     string    `json:"chatType"`
	ThreadID     string    `json:"threadId,omitempty"`
	SenderOpenID string    `json:"senderOpenId"`
	MessageType  string    `json:"messageType"`
	CreatedAt    time.Time `json:"createdAt"`
	// Text is the message text with the bot's mention removed and other mentions rendered as
	// @Name.
	Text string `json:"text"`
	// Images are the image keys in the message, in order.
	Images []string `json:"images,omitempty"`
	// MentionsBot is true when a mention's open_id is the bot's.
	MentionsBot bool `json:"mentionsBot"`
	// Truncated is true when Text was cut to MaxTextChars.
	Truncated bool `json:"truncated,omitempty"`
}

// EntryKey names the Lark entry the message belongs to: the chat, or a topic in it.
func (m Message) EntryKey() string { return EntryKey(m.ChatID, m.ThreadID) }

// EntryKey names the Lark entry of chatID and threadID ("" for the chat itself).
func EntryKey(chatID, threadID string) string {
	if threadID == "" {
		return chatID
	}
	return chatID + "#" + threadID
}

// supportedTypes are the message types Pixie answers.
var supportedTypes = map[string]bool{"text": true, "post": true, "image": true}

// ParseMessage reads the event of an im.message.receive_v1 callback (its "event" object) into
// a Message: the text cut to maxChars code points, at most maxImages images. A reason other than
// "" means the event is not a well-formed user message with something to answer (the reason
// says which part is missing or unsupported).
func ParseMessage(event []byte, botOpenID string, maxChars, maxImages int) (Message, string) {
	var data larkim.P2MessageReceiveV1Data
	if err := json.Unmarshal(event, &data); err != nil {
		return Message{}, ReasonMalformed
	}
	return parseMessage(&data, botOpenID, maxChars, maxImages)
}

func parseMessage(ev *larkim.P2MessageReceiveV1Data, botOpenID string, maxChars, maxImages int) (m Message, reason string) {
	if ev == nil || ev.Message == nil || ev.Sender == nil {
		return m, ReasonMalformed
	}
	msg, snd := ev.Message, ev.Sender
	if str(snd.SenderType) != "user" || snd.SenderId == nil || !ValidOpenID(str(snd.SenderId.OpenId)) {
		return m, ReasonSender
	}
	m = Message{
		MessageID:    str(msg.MessageId),
		ChatID:       str(msg.ChatId),
		ChatType:     str(msg.ChatType),
		ThreadID:     str(msg.ThreadId),
		SenderOpenID: str(snd.SenderId.OpenId),
		MessageType:  str(msg.MessageType),
	}
	if m.MessageID == "" || m.ChatID == "" || len(m.MessageID) > 128 || len(m.ChatID) > 128 || len(m.ThreadID) > 128 {
		return m, ReasonMalformed
	}
	switch m.ChatType {
	case ChatP2P, ChatGroup, ChatTopicGroup:
	default:
		return m, ReasonMalformed
	}
	if ms, err := strconv.ParseInt(str(msg.CreateTime), 10, 64); err == nil && ms > 0 {
		m.CreatedAt = time.UnixMilli(ms).UTC()
	} else {
		return m, ReasonMalformed
	}
	names := map[string]string{} // mention key → "@Name" (or "" for the bot)
	for _, mn := range msg.Mentions {
		if mn == nil || mn.Key == nil {
			continue
		}
		open := ""
		if mn.Id != nil {
			open = str(mn.Id.OpenId)
		}
		if open != "" && open == botOpenID {
			m.MentionsBot = true
			names[*mn.Key] = ""
			continue
		}
		names[*mn.Key] = "@" + str(mn.Name)
	}
	if !supportedTypes[m.MessageType] {
		return m, ReasonMessageType
	}
	text, images, ok := parseContent(m.MessageType, str(msg.Content), names, botOpenID, &m.MentionsBot)
	if !ok {
		return m, ReasonMalformed
	}
	text = strings.TrimSpace(collapseSpaces(text))
	if cut := clip.Runes(text, maxChars); cut != text {
		text = cut
		m.Truncated = true
	}
	if len(images) > maxImages {
		images = images[:maxImages]
		m.Truncated = true
	}
	m.Text, m.Images = text, images
	if m.Text == "" && len(m.Images) == 0 {
		return m, ReasonEmpty
	}
	return m, ""
}

// parseContent reads the JSON content of a text, post or image message.
func parseContent(typ, content string, names map[string]string, botOpenID string, mentionsBot *bool) (string, []string, bool) {
	switch typ {
	case "text":
		var c struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal([]byte(content), &c); err != nil {
			return "", nil, false
		}
		return replaceMentionKeys(c.Text, names), nil, true
	case "image":
		var c struct {
			ImageKey string `json:"image_key"`
		}
		if err := json.Unmarshal([]byte(content), &c); err != nil || c.ImageKey == "" {
			return "", nil, false
		}
		return "", []string{c.ImageKey}, true
	case "post":
		return parsePost(content, names, botOpenID, mentionsBot)
	}
	return "", nil, false
}

type postElem struct {
	Tag      string `json:"tag"`
	Text     string `json:"text"`
	Href     string `json:"href"`
	UserID   string `json:"user_id"`
	UserName string `json:"user_name"`
	ImageKey string `json:"image_key"`
}

type postBody struct {
	Title   string       `json:"title"`
	Content [][]postElem `json:"content"`
}

// parsePost reads a rich-text message: {title, content:[[elem…]…]}, or the same keyed by
// locale ({"zh_cn": {…}}), in which case the first locale with content is used.
func parsePost(content string, names map[string]string, botOpenID string, mentionsBot *bool) (string, []string, bool) {
	var p postBody
	if err := json.Unmarshal([]byte(content), &p); err != nil {
		return "", nil, false
	}
	if p.Content == nil {
		var byLocale map[string]postBody
		if err := json.Unmarshal([]byte(content), &byLocale); err != nil {
			return "", nil, false
		}
		for _, loc := range []string{"zh_cn", "en_us", "ja_jp"} {
			if b, ok := byLocale[loc]; ok && b.Content != nil {
				p = b
				break
			}
		}
		if p.Content == nil {
			for _, b := range byLocale {
				if b.Content != nil {
					p = b
					break
				}
			}
		}
	}
	var sb strings.Builder
	var images []string
	if p.Title != "" {
		sb.WriteString(p.Title)
		sb.WriteString("\n")
	}
	for _, line := range p.Content {
		for _, e := range line {
			switch e.Tag {
			case "text":
				sb.WriteString(replaceMentionKeys(e.Text, names))
			case "a":
				sb.WriteString(e.Text)
				if e.Href != "" && e.Href != e.Text {
					sb.WriteString(" (" + e.Href + ")")
				}
			case "at":
				if e.UserID != "" && e.UserID == botOpenID {
					*mentionsBot = true
					continue
				}
				if n, ok := names[e.UserID]; ok {
					if n != "" {
						sb.WriteString(n)
					}
					continue
				}
				if e.UserName != "" {
					sb.WriteString("@" + e.UserName)
				}
			case "img":
				if e.ImageKey != "" {
					images = append(images, e.ImageKey)
				}
			case "code_block", "md":
				sb.WriteString(e.Text)
			}
		}
		sb.WriteString("\n")
	}
	return sb.String(), images, true
}

// replaceMentionKeys swaps "@_user_N" placeholders for the names they stand for ("" for the
// bot, which removes its mention from the text). Unknown keys stay as they are.
func replaceMentionKeys(s string, names map[string]string) string {
	if len(names) == 0 || !strings.Contains(s, "@_") {
		return s
	}
	var sb strings.Builder
	for {
		i := strings.Index(s, "@_")
		if i < 0 {
			sb.WriteString(s)
			return sb.String()
		}
		sb.WriteString(s[:i])
		j := i + 2
		for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= '0' && s[j] <= '9') {
			j++
		}
		if n, ok := names[s[i:j]]; ok {
			sb.WriteString(n)
		} else {
			sb.WriteString(s[i:j])
		}
		s = s[j:]
	}
}

// collapseSpaces turns runs of spaces and tabs into one space, keeping line breaks.
func collapseSpaces(s string) string {
	var sb strings.Builder
	space := false
	for _, r := range s {
		if r == ' ' || r == '\t' || r == '\u00a0' {
			if !space {
				sb.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		sb.WriteRune(r)
	}
	lines := strings.Split(sb.String(), "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, "\n")
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

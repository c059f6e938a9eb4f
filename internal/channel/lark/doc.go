// Package lark owns the Lark (Feishu) channel of Pet: the event webhook, the bot binding, the
// sender allowlist and pairing, and the Loci that serve Lark entries with their durable queues
// of Deliveries. HTTP lives in server/channel.go; the user guide is docs/lark.md.
package lark

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/sdk/abi"
	"github.com/pixie-dev/pixie/server"
)

func init() {
	register(&command{name: "mcp", summary: "MCP server over stdio for agents: hint_send, hint_status, judge, pet_locus_finish, pet_locus_wait",
		help: mcpHelp, flags: mcpFlags})
}

const mcpHelp = `An MCP server over stdio (newline-delimited JSON-RPC) exposing Pixie's model-side tools to an
agent host such as Claude Code: hint_send, hint_status and judge, and for a child session that
serves a Lark Locus, pet_locus_finish and pet_locus_wait. Each tool is a thin client of the
running Pixie server (pixie serve); nothing is stored here.

The calling session is --session. hint_send and hint_status use it when they name no session
(without it, hint_send with no sessionId queues a global hint, taken by any session's next
step); pet_locus_finish and pet_locus_wait act for it (the child serving the Locus) and fail
without it.`

func mcpFlags(fs *flag.FlagSet) runFunc {
	var cf clientFlags
	cf.add(fs)
	cf.tokenEnv = []string{"PIXIE_TOKEN"}
	session := fs.String("session", "", "the calling session's id")
	return func(ctx context.Context, _ cmdIO, _ []string) error {
		c, err := newClient(cf)
		if err != nil {
			return err
		}
		srv := newMCPServer(c, *session)
		if err := srv.Run(ctx, &mcp.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
			return fmt.Errorf("mcp: %w", err)
		}
		return nil
	}
}

// mcpHintSendArgs are hint_send's arguments (the server's hint.SendArgs).
type mcpHintSendArgs struct {
	Text      string  `json:"text" jsonschema:"the hint: what the agent should take into account at its next step (at most 2000 characters)"`
	SessionID *string `json:"sessionId,omitempty" jsonschema:"the target session; omitted means the calling session; an empty string means every session (a global hint)"`
}

// mcpHintStatusArgs are hint_status's arguments (the server's hint.StatusArgs).
type mcpHintStatusArgs struct {
	SessionID *string `json:"sessionId,omitempty" jsonschema:"the session to inspect; omitted means the calling session; * means every session; an empty string means the global queue"`
}

// mcpJudgeArgs are judge's arguments: the Jev request shape.
type mcpJudgeArgs struct {
	State     string                  `json:"state" jsonschema:"the text to judge; wrap several parts in JSON and name them in the questions"`
	Questions map[string]abi.Question `json:"questions" jsonschema:"the judgments by id (ids are not sent to the model): type noul (yes/no) with optional criteria.true/false, choice with two or more criteria.options, or score with 2 to 10 criteria.levels (lowest first); instructions hold the whole question"`
}

// mcpFinishArgs are pet_locus_finish's arguments (the channel's lark.FinishRequest).
type mcpFinishArgs struct {
	DeliveryID string `json:"deliveryId" jsonschema:"the current Delivery's id (from the message that handed it to you)"`
	Reply      string `json:"reply,omitempty" jsonschema:"the reply sent to the triggering Lark message; @Name becomes a mention when Name is exactly one chat member"`
	NoReply    bool   `json:"noReply,omitempty" jsonschema:"end the Delivery without a reply (then reason is required)"`
	Reason     string `json:"reason,omitempty" jsonschema:"why there is no reply"`
}

// mcpWaitArgs are pet_locus_wait's arguments (the channel's lark.WaitRequest).
type mcpWaitArgs struct {
	DeliveryID    string `json:"deliveryId" jsonschema:"the current Delivery's id"`
	ExtendSeconds int64  `json:"extendSeconds,omitempty" jsonschema:"move the deadline to now plus this many seconds (default 3600); never past 24 hours after the Delivery was accepted"`
}

// newMCPServer builds the MCP server: every tool posts to the Pixie server through c, with the
// calling session in the session header.
func newMCPServer(c *apiClient, session string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "pixie", Title: "Pixie", Version: version}, &mcp.ServerOptions{
		Instructions: "Pixie's side channel and decision engine. hint_send drops a hint that an agent sees at its next step, exactly once, outside the chat history; hint_status shows pending and recently consumed hints; judge answers yes/no, choice and score questions about a text with calibrated probabilities (it judges, it never rewrites).",
	})
	call := func(ctx context.Context, path string, in any) (*mcp.CallToolResult, any, error) {
		raw, err := json.Marshal(in)
		if err != nil {
			return nil, nil, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(raw))
		if err != nil {
			return nil, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if session != "" {
			req.Header.Set(server.SessionHeader, session)
		}
		var out json.RawMessage
		if err := c.send(req, &out); err != nil {
			return nil, nil, err
		}
		return nil, out, nil
	}
	mcp.AddTool(s, &mcp.Tool{
		Name:        "hint_send",
		Description: "Deliver a hint to a session (by default the calling one). The agent of that session sees it at its next step, once, without it entering the chat history. Returns the hint id, whether the session is running a turn now (the hint takes effect at once), and whether the oldest pending hint was evicted to respect the backlog cap.",
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in mcpHintSendArgs) (*mcp.CallToolResult, any, error) {
		return call(ctx, "/v1/tools/hint_send", in)
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "hint_status",
		Description: "Inspect the hint queue of a session (by default the calling one; \"*\" for every session): pending hints, whether the session is running a turn, and recently consumed hints.",
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in mcpHintStatusArgs) (*mcp.CallToolResult, any, error) {
		return call(ctx, "/v1/tools/hint_status", in)
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "judge",
		Description: "Judge a text with Pixie's decision engine: per question, the probabilities of the answers and a confidence (bool: P(yes); select: the chosen option; score: a probability-weighted level from 0). Use it to rank, filter or verify, and do the editing yourself. A failed judgment is a tool error, never a \"no\".",
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in mcpJudgeArgs) (*mcp.CallToolResult, any, error) {
		return call(ctx, "/v1/judge", in)
	})
	child := func(verb string) (string, error) {
		if session == "" {
			return "", errs.New(errs.Invalid, "pixie mcp was started without --session: %s acts for the child session serving the Locus", verb)
		}
		return "/v1/channel/lark/children/" + url.PathEscape(session) + "/" + verb, nil
	}
	mcp.AddTool(s, &mcp.Tool{
		Name:        "pet_locus_finish",
		Description: "Answer the current Lark Delivery of the Locus this session serves: send the reply to the triggering message, or end it with noReply and a reason. This is the only way to answer; ending a model turn does not. Fails when the Delivery is not the current one.",
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in mcpFinishArgs) (*mcp.CallToolResult, any, error) {
		path, err := child("finish")
		if err != nil {
			return nil, nil, err
		}
		return call(ctx, path, in)
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "pet_locus_wait",
		Description: "Extend the deadline of the current Lark Delivery this session serves (by default to one hour from now; never beyond 24 hours after it was accepted). Returns the new deadline and whether it reached the cap.",
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in mcpWaitArgs) (*mcp.CallToolResult, any, error) {
		path, err := child("wait")
		if err != nil {
			return nil, nil, err
		}
		return call(ctx, path, in)
	})
	return s
}

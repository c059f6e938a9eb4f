package proxy

import (
	"context"
	"fmt"
	"sort"

	"github.com/pixie-dev/pixie/internal/rewrite"
)

// Rewrites is the store of the sessions' rewrite rules as the proxy uses it; *rewrite.Rules
// implements it.
type Rewrites interface {
	For(ctx context.Context, session string) ([]rewrite.Rule, error)
	Applied(ctx context.Context, session, id string, index int) error
}

var _ Rewrites = (*rewrite.Rules)(nil)

// firstUse is the first application of a rule, recorded (Rewrites.Applied) before the request
// that carries it goes out.
type firstUse struct {
	id    string
	index int
}

// edit replaces the bytes of one JSON value.
type edit struct {
	at   span
	repl []byte
}

// rewriteMode says which rules a request takes: every request of the session takes the
// tool-result rules (a call id names one call, whoever's conversation holds it); the main
// agent's requests also take the applied message rules (at their place, and only where the text
// there is still the original); a step of the main agent also applies pending message rules to
// its latest user message.
type rewriteMode int

const (
	rewriteToolResults rewriteMode = iota // a subagent's request
	rewriteApplied                        // the main agent's side queries, compaction, token counts
	rewriteStep                           // a step of the main agent
)

// applyRewrites returns body with the rules applied in the endpoint's wire format, splicing only
// the values it replaces (a text part's "text", a tool result's content or output), and the
// rules applied for the first time. changed is false when nothing applied (the caller then
// forwards the original bytes). It fails only on a body whose shape it cannot read.
//
// Where the texts are:
//
//   - Messages: a user message's string content, or its "text" blocks; a "tool_result" block's
//     content, by tool_use_id (the whole content becomes the replacement, as a string).
//   - Responses: a string input, or a user message item's string content or "input_text"
//     parts; a "function_call_output" (or "custom_tool_call_output") item's output, by call_id.
//   - Chat Completions: a user message's string content or "text" parts; a "tool" message's
//     content, by tool_call_id.
func applyRewrites(ep endpoint, body []byte, rs []rewrite.Rule, mode rewriteMode) (out []byte, first []firstUse, changed bool, err error) {
	if len(rs) == 0 || (ep != epMessages && ep != epResponses && ep != epChat && ep != epCountTokens) {
		return body, nil, false, nil
	}
	top, err := objectMembers(body, span{0, len(body)})
	if err != nil {
		return nil, nil, false, err
	}
	listKey := "messages"
	if ep == epResponses {
		listKey = "input"
	}
	list, ok := lastMember(top, listKey)
	if !ok {
		return body, nil, false, nil
	}
	var elems []span
	switch kindOf(body, list) {
	case '[':
		if elems, err = arrayElems(body, list); err != nil {
			return nil, nil, false, err
		}
	case '"':
		if ep != epResponses {
			return body, nil, false, nil
		}
		elems = []span{list} // a string input is one user message
	default:
		return body, nil, false, nil
	}
	edits := map[int]edit{}
	put := func(at span, text string) {
		if _, done := edits[at.start]; !done {
			edits[at.start] = edit{at: at, repl: jsonString(text)}
		}
	}

	// Tool results, by call id.
	tools := map[string]rewrite.Rule{}
	for _, r := range rs {
		if r.Kind == rewrite.KindToolResult {
			tools[r.CallID] = r
		}
	}
	if len(tools) > 0 {
		recorded := map[string]bool{}
		for _, el := range elems {
			for _, tr := range toolResultsIn(ep, body, el) {
				r, ok := tools[tr.callID]
				if !ok {
					continue
				}
				put(tr.at, r.Text)
				if r.AppliedAt.IsZero() && !recorded[r.ID] {
					recorded[r.ID] = true
					first = append(first, firstUse{id: r.ID})
				}
			}
		}
	}
	if mode == rewriteToolResults {
		return finishEdits(body, edits, first)
	}

	// Message rules: applied ones at their place, pending ones (in a step) at the latest user
	// message, oldest rule first.
	var pending []rewrite.Rule
	for _, r := range rs {
		if r.Kind != rewrite.KindMessage {
			continue
		}
		if !r.Bound {
			pending = append(pending, r)
			continue
		}
		if r.Index < 0 || r.Index >= len(elems) {
			continue
		}
		if at, ok := matchingPart(ep, body, elems[r.Index], r, edits); ok {
			put(at, r.Text)
		}
	}
	if mode == rewriteStep && len(pending) > 0 {
		sort.SliceStable(pending, func(i, j int) bool { return pending[i].ID < pending[j].ID })
		last := -1
		for i := len(elems) - 1; i >= 0; i-- {
			if _, user := userTextParts(ep, body, elems[i], i == 0 && kindOf(body, list) == '"'); user {
				last = i
				break
			}
		}
		if last >= 0 {
			for _, r := range pending {
				if at, ok := matchingPart(ep, body, elems[last], r, edits); ok {
					put(at, r.Text)
					first = append(first, firstUse{id: r.ID, index: last})
				}
			}
		}
	}
	return finishEdits(body, edits, first)
}

// finishEdits splices the edits into body (they never overlap: each is one value).
func finishEdits(body []byte, edits map[int]edit, first []firstUse) ([]byte, []firstUse, bool, error) {
	if len(edits) == 0 {
		return body, first, false, nil
	}
	es := make([]edit, 0, len(edits))
	for _, e := range edits {
		es = append(es, e)
	}
	sort.Slice(es, func(i, j int) bool { return es[i].at.start < es[j].at.start })
	out := make([]byte, 0, len(body))
	at := 0
	for _, e := range es {
		if e.at.start < at {
			return nil, nil, false, fmt.Errorf("proxy: overlapping replacements")
		}
		out = append(out, body[at:e.at.start]...)
		out = append(out, e.repl...)
		at = e.at.end
	}
	return append(out, body[at:]...), first, true, nil
}

// matchingPart finds the first text part of a user message el that is exactly r's original and
// that no other edit took.
func matchingPart(ep endpoint, body []byte, el span, r rewrite.Rule, edits map[int]edit) (span, bool) {
	parts, user := userTextParts(ep, body, el, kindOf(body, el) == '"')
	if !user {
		return span{}, false
	}
	for _, p := range parts {
		if _, taken := edits[p.start]; taken {
			continue
		}
		if text, ok := stringAt(body, p); ok && r.Matches(text) {
			return p, true
		}
	}
	return span{}, false
}

// userTextParts returns the spans of the JSON strings that hold a user message's text, and
// whether el is a user message at all. bare is set for a Responses string input (el is the
// string itself).
func userTextParts(ep endpoint, body []byte, el span, bare bool) ([]span, bool) {
	if bare {
		return []span{el}, true
	}
	if kindOf(body, el) != '{' {
		return nil, false
	}
	fields, err := objectMembers(body, el)
	if err != nil {
		return nil, false
	}
	if role, _ := stringField(body, fields, "role"); role != "user" {
		return nil, false
	}
	if ep == epResponses {
		if typ, has := stringField(body, fields, "type"); has && typ != "message" {
			return nil, false
		}
	}
	c, ok := lastMember(fields, "content")
	if !ok {
		return nil, true
	}
	switch kindOf(body, c) {
	case '"':
		return []span{c}, true
	case '[':
	default:
		return nil, true
	}
	blocks, err := arrayElems(body, c)
	if err != nil {
		return nil, true
	}
	partType := "text"
	if ep == epResponses {
		partType = "input_text"
	}
	var out []span
	for _, b := range blocks {
		if kindOf(body, b) != '{' {
			continue
		}
		bf, err := objectMembers(body, b)
		if err != nil {
			continue
		}
		if typ, _ := stringField(body, bf, "type"); typ != partType {
			continue
		}
		if t, ok := lastMember(bf, "text"); ok && kindOf(body, t) == '"' {
			out = append(out, t)
		}
	}
	return out, true
}

// toolResult is a tool result in a request: its call id and the span of its content.
type toolResult struct {
	callID string
	at     span
}

// toolResultsIn lists the tool results an element of the message list holds.
func toolResultsIn(ep endpoint, body []byte, el span) []toolResult {
	if kindOf(body, el) != '{' {
		return nil
	}
	fields, err := objectMembers(body, el)
	if err != nil {
		return nil
	}
	switch ep {
	case epResponses:
		typ, _ := stringField(body, fields, "type")
		if typ != "function_call_output" && typ != "custom_tool_call_output" {
			return nil
		}
		id, _ := stringField(body, fields, "call_id")
		if o, ok := lastMember(fields, "output"); ok && id != "" {
			return []toolResult{{callID: id, at: o}}
		}
	case epChat:
		if role, _ := stringField(body, fields, "role"); role != "tool" {
			return nil
		}
		id, _ := stringField(body, fields, "tool_call_id")
		if c, ok := lastMember(fields, "content"); ok && id != "" {
			return []toolResult{{callID: id, at: c}}
		}
	default: // Messages
		if role, _ := stringField(body, fields, "role"); role != "user" {
			return nil
		}
		c, ok := lastMember(fields, "content")
		if !ok || kindOf(body, c) != '[' {
			return nil
		}
		blocks, err := arrayElems(body, c)
		if err != nil {
			return nil
		}
		var out []toolResult
		for _, b := range blocks {
			if kindOf(body, b) != '{' {
				continue
			}
			bf, err := objectMembers(body, b)
			if err != nil {
				continue
			}
			if typ, _ := stringField(body, bf, "type"); typ != "tool_result" {
				continue
			}
			id, _ := stringField(body, bf, "tool_use_id")
			if cc, ok := lastMember(bf, "content"); ok && id != "" {
				out = append(out, toolResult{callID: id, at: cc})
			}
		}
		return out
	}
	return nil
}

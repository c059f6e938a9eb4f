package hint

import (
	"strconv"
	"strings"

	"github.com/pixie-dev/pixie/internal/clip"
	"github.com/pixie-dev/pixie/internal/hint/locale"
)

// Render builds the one user-role message that carries hints into a step through a path whose
// host keeps it in the chat history (the hooks' additionalContext): the locale's header and
// instruction, then the hints numbered from 1. Each hint shows at most DisplayChars code points
// (the queue keeps the full text); continuation lines of a multi-line hint are indented under
// its number so they cannot be mistaken for further items. No hints render as "". Take's
// Message is this rendering.
func (q *Queue) Render(hs []Hint) string { return render(q.msg, q.msg.Header, hs) }

// RenderOutOfHistory is Render for the path that keeps the message out of the chat history
// (the model-API proxy adds it to one request): its header is the spec's whole sentence, which
// says so (zh: "📌 旁路提示（用户在任务执行过程中插入，不占对话历史，仅本条可见）").
func (q *Queue) RenderOutOfHistory(hs []Hint) string {
	return render(q.msg, q.msg.HeaderOutOfHistory, hs)
}

func render(m locale.Messages, header string, hs []Hint) string {
	if len(hs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(header)
	b.WriteByte('\n')
	b.WriteString(m.Instruction)
	for i, h := range hs {
		num := strconv.Itoa(i+1) + ". "
		text := h.Text
		if cut := clip.Runes(text, DisplayChars); cut != text {
			text = cut + m.Ellipsis
		}
		b.WriteByte('\n')
		b.WriteString(num)
		b.WriteString(strings.ReplaceAll(text, "\n", "\n"+strings.Repeat(" ", len(num))))
	}
	return b.String()
}

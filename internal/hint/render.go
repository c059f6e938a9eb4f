package hint

import (
	"strconv"
	"strings"

	"github.com/pixie-dev/pixie/internal/clip"
	"github.com/pixie-dev/pixie/internal/hint/locale"
)

// Render builds the one user-role message that carries hints into a step: the locale's header
// and instruction, then the hints numbered from 1. Each hint shows at most DisplayChars code
// points (the queue keeps the full text); continuation lines of a multi-line hint are indented
// under its number so they cannot be mistaken for further items. No hints render as "".
func (q *Queue) Render(hs []Hint) string { return render(q.msg, hs) }

func render(m locale.Messages, hs []Hint) string {
	if len(hs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(m.Header)
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

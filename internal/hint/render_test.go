package hint

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pixie-dev/pixie/internal/hint/locale"
)

func TestRender(t *testing.T) {
	en, _ := locale.Lookup("en")
	zh, _ := locale.Lookup("zh")
	h := func(s string) Hint { return Hint{Text: s} }
	tests := []struct {
		name   string
		m      locale.Messages
		header string // default m.Header
		hints  []Hint
		want   string
	}{
		{name: "none", m: en, want: ""},
		{name: "zh-out-of-history-spec-shape", m: zh, header: zh.HeaderOutOfHistory, hints: []Hint{h("先跑测试")},
			want: "📌 旁路提示（用户在任务执行过程中插入，不占对话历史，仅本条可见）\n" +
				"请在本步参考下面的要求，然后继续原来的任务；不要停下来等待确认，也不要把它当作新的用户回合。\n" +
				"1. 先跑测试"},
		{name: "zh-spec-shape", m: zh, hints: []Hint{h("先跑测试")},
			want: "📌 旁路提示（用户在任务执行过程中插入）\n" +
				"请在本步参考下面的要求，然后继续原来的任务；不要停下来等待确认，也不要把它当作新的用户回合。\n" +
				"1. 先跑测试"},
		{name: "en-numbered", m: en, hints: []Hint{h("run the tests"), h("skip docs")},
			want: en.Header + "\n" + en.Instruction + "\n1. run the tests\n2. skip docs"},
		{name: "multi-line-indented", m: en, hints: []Hint{h("a\nb")},
			want: en.Header + "\n" + en.Instruction + "\n1. a\n   b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			header := tc.header
			if header == "" {
				header = tc.m.Header
			}
			if got := render(tc.m, header, tc.hints); got != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestRenderDisplayTruncation(t *testing.T) {
	en, _ := locale.Lookup("en")
	tests := []struct {
		name      string
		n         int
		wantRunes int
		ellipsis  bool
	}{
		{name: "under", n: 599, wantRunes: 599},
		{name: "at-600", n: 600, wantRunes: 600},
		{name: "601-truncated", n: 601, wantRunes: 600, ellipsis: true},
		{name: "queue-max", n: 2000, wantRunes: 600, ellipsis: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := render(en, en.Header, []Hint{{Text: strings.Repeat("界", tc.n)}})
			line := msg[strings.LastIndex(msg, "\n")+1:]
			body := strings.TrimPrefix(line, "1. ")
			if e := strings.HasSuffix(body, en.Ellipsis); e != tc.ellipsis {
				t.Fatalf("ellipsis = %v, want %v", e, tc.ellipsis)
			}
			body = strings.TrimSuffix(body, en.Ellipsis)
			if got := utf8.RuneCountInString(body); got != tc.wantRunes {
				t.Fatalf("shows %d code points, want %d", got, tc.wantRunes)
			}
		})
	}
}

package locale

import (
	"reflect"
	"strings"
	"testing"
)

func TestEveryLocaleIsComplete(t *testing.T) {
	tags := Tags()
	if !reflect.DeepEqual(tags, []string{"en", "zh"}) {
		t.Fatalf("tags = %v, want [en zh]", tags)
	}
	for _, tag := range tags {
		t.Run(tag, func(t *testing.T) {
			m, err := Lookup(tag)
			if err != nil {
				t.Fatal(err)
			}
			v := reflect.ValueOf(m)
			for i := 0; i < v.NumField(); i++ {
				if strings.TrimSpace(v.Field(i).String()) == "" {
					t.Errorf("%s: %s is empty", tag, v.Type().Field(i).Name)
				}
			}
		})
	}
}

func TestLookup(t *testing.T) {
	tests := []struct {
		name, tag, header string
		wantErr           bool
	}{
		{name: "empty-means-english", tag: "", header: "📌 Side hint"},
		{name: "english", tag: "en", header: "📌 Side hint"},
		{name: "chinese", tag: "zh", header: "📌 旁路提示（用户在任务执行过程中插入）"},
		{name: "unknown", tag: "fr", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Lookup(tc.tag)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "en, zh") {
					t.Fatalf("err = %v, want an error listing the known locales", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(m.Header, tc.header) {
				t.Fatalf("header = %q, want prefix %q", m.Header, tc.header)
			}
		})
	}
	zh, _ := Lookup("zh")
	if want := "请在本步参考下面的要求，然后继续原来的任务；不要停下来等待确认，也不要把它当作新的用户回合。"; zh.Instruction != want {
		t.Fatalf("zh instruction = %q, want the spec's %q", zh.Instruction, want)
	}
}

package hint_test

import (
	"context"
	"fmt"
	"os"

	"github.com/pixie-dev/pixie/internal/hint"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
)

// A step takes its session's hints and the global ones, injects the rendered message, and
// confirms; a take that failed downstream would call Rollback instead.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "hint-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	st, err := badgerstore.Open(ctx, badgerstore.Options{Dir: dir, GCInterval: -1})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	q, err := hint.New(context.Background(), hint.Config{Store: st, Locale: "zh"})
	if err != nil {
		panic(err)
	}
	defer q.Close(context.Background())

	for _, h := range []struct{ session, text string }{
		{"s1", "先跑测试，再改文档"},
		{"", "回答用中文"}, // global: any session's next step
		{"s2", "not for s1"},
	} {
		if _, err := q.Put(ctx, h.session, h.text); err != nil {
			panic(err)
		}
	}

	tk, err := q.Take(ctx, "s1")
	if err != nil {
		panic(err)
	}
	fmt.Println(tk.Message)
	n, err := q.Confirm(ctx, tk.ID)
	fmt.Println("confirmed:", n, err)
	again, _ := q.Take(ctx, "s1")
	fmt.Println("next step takes:", len(again.Hints))
	// Output:
	// 📌 旁路提示（用户在任务执行过程中插入）
	// 请在本步参考下面的要求，然后继续原来的任务；不要停下来等待确认，也不要把它当作新的用户回合。
	// 1. 先跑测试，再改文档
	// 2. 回答用中文
	// confirmed: 2 <nil>
	// next step takes: 0
}

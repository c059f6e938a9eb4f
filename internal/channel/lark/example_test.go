package lark_test

import (
	"context"
	"fmt"
	"os"

	"github.com/pixie-dev/pixie/internal/channel/lark"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
)

// A channel with no bot bound is unavailable, says why, and refuses every event; the rest of
// Pixie is unaffected.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "lark-example")
	defer os.RemoveAll(dir)
	st, err := badgerstore.Open(ctx, badgerstore.Options{Dir: dir, GCInterval: -1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	ch, err := lark.New(ctx, lark.Config{Store: st, Enabled: true, Home: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ch.Close(context.Background())

	s := ch.Status(ctx)
	fmt.Println("available:", s.Available)
	fmt.Println(s.Problem)
	resp := ch.HandleEvent(ctx, nil, []byte(`{"type":"url_verification","token":"t","challenge":"c"}`))
	fmt.Println(resp.Status, string(resp.Body))
	// Output:
	// available: false
	// no Lark bot is bound: bind one with its app id, app secret, verification token and encrypt key
	// 503 {"msg":"unavailable"}
}

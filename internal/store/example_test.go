package store_test

import (
	"context"
	"fmt"
	"os"

	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
)

type note struct {
	Text string `json:"text"`
}

var notes = store.NewCollection[note]("note")

func Example() {
	dir, _ := os.MkdirTemp("", "store-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := badgerstore.Open(ctx, badgerstore.Options{Dir: dir, GCInterval: -1})
	if err != nil {
		panic(err)
	}
	defer st.Close()

	// One transaction writes two notes; it commits both or neither.
	_ = st.Update(ctx, func(tx *store.Tx) error {
		if err := notes.Put(tx, "s1/002", note{"second"}); err != nil {
			return err
		}
		return notes.Put(tx, "s1/001", note{"first"})
	})
	_ = st.View(ctx, func(tx *store.Tx) error {
		list, err := notes.List(tx, "s1/", store.ScanOptions{})
		for _, e := range list {
			fmt.Println(e.ID, e.Value.Text)
		}
		return err
	})
	// Output:
	// s1/001 first
	// s1/002 second
}

package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/pgstore/pgtest"
)

// BenchmarkUpdate is one read-modify-write transaction of the shape of a hint take: a read, a
// scan of a few keys, five writes and a notification, committed (durably).
func BenchmarkUpdate(b *testing.B) {
	st := openURL(b, pgtest.NewDatabase(b))
	defer st.Close()
	ctx := context.Background()
	for i := 0; i < 8; i++ {
		_ = st.Update(ctx, func(tx *store.Tx) error { return tx.SetRaw(fmt.Sprintf("h/%02d", i), []byte(`{"x":1}`), 0) })
	}
	for i := 0; b.Loop(); i++ {
		err := st.Update(ctx, func(tx *store.Tx) error {
			if _, err := tx.GetRaw("m/rev"); err != nil && err != store.ErrNotFound {
				return err
			}
			if err := tx.ScanRaw("h/", store.ScanOptions{}, func(string, []byte) error { return nil }); err != nil {
				return err
			}
			for k := 0; k < 4; k++ {
				if err := tx.SetRaw(fmt.Sprintf("h/%02d", k), []byte(fmt.Sprint(i)), 0); err != nil {
					return err
				}
			}
			if err := tx.SetRaw("m/rev", []byte(fmt.Sprint(i)), 0); err != nil {
				return err
			}
			return tx.Notify("bench", fmt.Sprint(i))
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

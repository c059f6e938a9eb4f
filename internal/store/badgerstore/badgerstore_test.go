package badgerstore_test

import (
	"context"
	"testing"

	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
	"github.com/pixie-dev/pixie/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, dir string) *store.Store {
		s, err := badgerstore.Open(context.Background(), badgerstore.Options{Dir: dir, GCInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

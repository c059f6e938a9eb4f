package credentials_test

import (
	"context"
	"fmt"
	"os"

	"github.com/pixie-dev/pixie/internal/credentials"
)

func Example() {
	home, _ := os.MkdirTemp("", "pixie-home")
	defer os.RemoveAll(home)
	ctx := context.Background()

	f := credentials.Open(home)
	_ = f.Set(ctx, "TYPESAFE_API_KEY", "ts-example")
	_, ok, _ := f.Get(ctx, "TYPESAFE_API_KEY")
	st, _ := os.Stat(f.Path())
	fmt.Println(ok, st.Mode().Perm())
	// Output: true -rw-------
}

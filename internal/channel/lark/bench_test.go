package lark

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/pixie-dev/pixie/internal/channel/lark/larkapi"
)

// BenchmarkHandleEvent measures the webhook's work before it answers Lark (which wants an
// answer within 3 s): decryption, the signature, token, app id and window checks, parsing,
// admission, and the one store transaction (de-duplication keys and the inbound record, synced
// to disk).
func BenchmarkHandleEvent(b *testing.B) {
	for _, mode := range []struct {
		name string
		opts []harnessOpt
	}{{"encrypted", nil}, {"plain", []harnessOpt{plain}}} {
		b.Run(mode.name, func(b *testing.B) {
			h := newHarness(b, mode.opts...)
			type req struct {
				body []byte
				hdr  http.Header
			}
			reqs := make([]req, b.N)
			for i := range reqs {
				// A sender who is not allowlisted in a group without a Locus: accepted by the
				// webhook, then dropped by the worker, so the background work stays small.
				e := h.text(fmt.Sprintf("ou_bench%d", i), "oc_bench", larkapi.ChatGroup, "how does the build work?", true)
				reqs[i].body, reqs[i].hdr = h.wire(e.body())
			}
			ctx := context.Background()
			b.ResetTimer()
			for i := range reqs {
				if resp := h.ch.HandleEvent(ctx, reqs[i].hdr, reqs[i].body); resp.Status != http.StatusOK {
					b.Fatalf("status %d %s", resp.Status, resp.Body)
				}
			}
		})
	}
}

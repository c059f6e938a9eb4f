package loadbench_test

import (
	"context"
	"net/http"

	"github.com/pixie-dev/pixie/internal/loadbench"
)

// A gate row on the shared server: the AssemblyScript twin of block-risky-commands, compared
// with OPA, checked on the twin table before it is measured. Add it to loadbench.Rows.
func ExampleGateRow() {
	_ = loadbench.GateRow(loadbench.GateSpec{
		Name:   "wasm-as",
		What:   "the WASM gate with the AssemblyScript guest (block-risky-commands-as)",
		Module: "block-risky-commands-as",
		Check:  true,
		Versus: &loadbench.Versus{Row: "opa", Metric: loadbench.ReqPerSec},
		Goals:  []loadbench.Goal{{Metric: loadbench.Ratio, Min: 0.5}},
	})
}

// A row on a server of its own: Shared starts it once for every row that names it; the Plan's
// connections repeat one request (or Do, for an operation of several requests).
func ExampleRow() {
	_ = loadbench.Row{Name: "info", What: "GET /v1/info on a server with the jev engine",
		Prepare: func(ctx context.Context, e *loadbench.Env) (*loadbench.Plan, error) {
			p, err := loadbench.Shared(e, "pixie-jev", func() (*loadbench.Pixie, error) {
				return e.StartPixie(ctx, "jev", loadbench.PixieOptions{Set: []string{"judge.engine=jev"}})
			})
			if err != nil {
				return nil, err
			}
			req := loadbench.Request{Method: http.MethodGet, Path: "/v1/info", Header: p.Auth(""), Want: []string{`"wasm"`}}
			return &loadbench.Plan{Addrs: []string{p.Addr}, Alive: p.Alive, Request: func(int) loadbench.Request { return req }}, nil
		}}
}

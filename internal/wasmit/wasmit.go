// Package wasmit holds the integration tests and the measurements of WASM gate modules, end
// to end: module upload through POST /v1/modules (every refusal, nothing stored), each guest
// of guests/ uploaded, attached to a gate and run through POST /v1/gates/evaluate beside its
// bash twin on the same inputs (the same decisions), the fault guests under the gate's error
// policy (the server keeps answering), and the benchmarks of `make bench`: evaluate latency of
// the WASM gate against its bash twin over HTTP, and the resident memory of a real server with
// ten modules warm.
//
// The stack is the real one: server.New with the gate service on a real Badger store, the
// module registry with the real validator, the WASM executor (wazero) and the bash executor,
// the real `pixie` binary as the scripts' helper, and the real OpenAI provider and decision
// engine against an httptest server that speaks the chat-completions wire format (with
// log-probabilities). The memory benchmark starts the real binary. Nothing here is imported by
// the product; the package exists for its tests.
package wasmit

// Package scale holds the end-to-end tests and benchmarks of Pixie as N replicas on one
// PostgreSQL database (docs/scale.md): real `pixie serve` processes, each with its own home,
// all on one database made for the test, with clients spread over them and a round-robin load
// balancer in front for what a deployment routes through one (the scripts' PIXIE_URL). The
// model and Lark are httptest servers speaking their wire formats. The tests need
// PIXIE_TEST_POSTGRES_URL (see internal/store/pgstore/pgtest) and skip without it. Nothing here
// is imported by the product; the package exists for its tests.
package scale

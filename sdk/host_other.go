//go:build !wasip1

package sdk

// Outside a WASM host only a Fake can run rules.
func platformHost() host { return nil }

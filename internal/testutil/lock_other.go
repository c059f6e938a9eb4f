//go:build !unix

package testutil

import "testing"

// lockFile is a no-op where flock is missing: builds are still serialised within a process.
func lockFile(testing.TB, string) func() { return func() {} }

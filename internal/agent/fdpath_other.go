//go:build !linux

package agent

import "os"

// fdPath is not known here: resolve's checks stand alone.
func fdPath(*os.File) (string, bool) { return "", false }

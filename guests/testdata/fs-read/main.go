//go:build wasip1

// Command fs-read is a test fixture for the /work mount's containment: its input is one path
// per line, and it answers, for each, what reading it gave: "file:<content>", "dir:<names
// joined by commas>", or "error:<message>".
package main

import (
	"os"
	"sort"
	"strings"

	"github.com/pixie-dev/pixie/sdk"
)

func main() {}

//go:wasmexport gate
func gate() int32 {
	return sdk.Run(func() int32 {
		res := map[string]string{}
		for _, p := range strings.Split(strings.TrimSpace(sdk.Target()), "\n") {
			if p == "" {
				continue
			}
			info, err := os.Stat(p)
			switch {
			case err != nil:
				res[p] = "error:" + err.Error()
			case info.IsDir():
				entries, err := os.ReadDir(p)
				if err != nil {
					res[p] = "error:" + err.Error()
					continue
				}
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				sort.Strings(names)
				res[p] = "dir:" + strings.Join(names, ",")
			default:
				b, err := os.ReadFile(p)
				if err != nil {
					res[p] = "error:" + err.Error()
				} else {
					res[p] = "file:" + string(b)
				}
			}
		}
		return sdk.ContinueData(res)
	})
}

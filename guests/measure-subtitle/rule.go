// Command measure-subtitle is the WASM twin of measure-subtitle.sh (spec/pixie-gate.md): at
// the user-message point it measures a subtitle file and passes the measurement to the Pixie
// task as JSON ({{hooks.measure-subtitle.data}}).
package main

import (
	"strings"

	"github.com/pixie-dev/pixie/sdk"
)

func main() {}

// measurement is the JSON the task receives.
type measurement struct {
	Cues  int `json:"cues"`
	Bytes int `json:"bytes"`
}

func rule() int32 {
	// As text=$(cat): trailing newlines go.
	text := strings.TrimRight(sdk.Target(), "\n")
	cues := 0
	if text != "" {
		// As grep -c -- '-->': lines containing a cue arrow.
		for _, line := range strings.Split(text, "\n") {
			if strings.Contains(line, "-->") {
				cues++
			}
		}
	}
	// ${#text} counts bytes in the C locale the bash twin runs in.
	return sdk.ContinueData(measurement{Cues: cues, Bytes: len(text)})
}

// Command measure-subtitle is the WASM twin of measure-subtitle.sh (spec/pixie-gate.md): at
// the user-message point it measures a subtitle file and passes the measurement to the Pixie
// task as JSON ({{hooks.measure-subtitle.data}}).
package main

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/pixie-dev/pixie/sdk"
)

func main() {}

// init warms the JSON encoder of the measurement: encoding/json builds a type's codec on first
// use, and every run is the first use of its instance, so building it here, while the host
// prepares the instance (before the run it will serve is known), takes it off the run's path.
// It is an optimisation, not a requirement; it must not read the context (empty here), and it is
// the same for every run (docs/guests.md, "Warming up").
func init() { _, _ = json.Marshal(measurement{}) }

// measurement is the JSON the task receives.
type measurement struct {
	Cues int `json:"cues"`
	// Bytes is the spec script's name for ${#text}: the length in characters.
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
	// ${#text} counts characters: the bash twin runs in the server's locale (Pixie passes LANG
	// and LC_* on), which is UTF-8 on any usual system. (In the C locale it counts bytes.)
	return sdk.ContinueData(measurement{Cues: cues, Bytes: utf8.RuneCountInString(text)})
}

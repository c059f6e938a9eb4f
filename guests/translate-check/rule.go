// Command translate-check is the WASM twin of translate-check.sh (spec/pixie-gate.md): at the
// turn-end point, an answer already in Korean skips the gate; otherwise Pixie translates it (two
// attempts), the decision engine judges faithfulness against the source, and the run concludes
// with the translation as a note, labelled "not verified" when no attempt passed. A helper
// error fails the run, so the gate's error policy applies.
package main

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/pixie-dev/pixie/sdk"
)

func main() {}

// init warms the JSON encoder of the judged pair: encoding/json builds a type's codec on first
// use, and every run is the first use of its instance, so building it here, while the host
// prepares the instance (before the run it will serve is known), takes it off the run's path.
// It is an optimisation, not a requirement; it must not read the context (empty here), and it is
// the same for every run (docs/guests.md, "Warming up").
func init() { pair("", "") }

const (
	isKorean  = "Is the prose of this text written in Korean? Ignore code blocks, file paths, identifiers and command output."
	translate = "Translate this agent answer into natural Korean. Keep code blocks, file paths, identifiers, commands and numbers unchanged. Keep the Markdown structure. Output only the translation."
	faithful  = "Does `translation` keep every condition, number, negation and code element of `source`?"

	labelVerified   = "[한국어 번역]\n"
	labelUnverified = "[한국어 번역 — 충실도 미확인]\n"
)

func rule() int32 {
	source := strings.TrimRight(sdk.Target(), "\n")
	korean, err := sdk.JudgeBool(isKorean, source, sdk.Threshold(0.8))
	if err != nil {
		return sdk.Fail(err)
	}
	if korean.Pass {
		return sdk.Skip()
	}
	var draft string
	for range 2 {
		if draft, err = sdk.Ask(translate, source); err != nil {
			return sdk.Fail(err)
		}
		draft = strings.TrimRight(draft, "\n")
		ok, err := sdk.JudgeBool(faithful, pair(source, draft), sdk.Threshold(0.7))
		if err != nil {
			return sdk.Fail(err)
		}
		if ok.Pass {
			return sdk.Conclude(sdk.Output{Note: labelVerified + draft})
		}
	}
	return sdk.Conclude(sdk.Output{Note: labelUnverified + draft})
}

// pair renders {source, translation} as jq -n does: two-space indent, no HTML escaping.
func pair(source, translation string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(struct {
		Source      string `json:"source"`
		Translation string `json:"translation"`
	}{source, translation})
	return b.String()
}

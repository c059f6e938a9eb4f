package gate_test

import (
	"fmt"

	"github.com/pixie-dev/pixie/internal/gate"
)

// The Pixie model's answer is parsed strictly (only the five fields, strings, a known verdict)
// but tolerantly about its wrapping: code fences and prose around the object are ignored.
func ExampleParseModelOutput() {
	o, err := gate.ParseModelOutput("Here is my verdict:\n```json\n{\"verdict\": \"stop\", \"reason\": \"The form has no title line.\"}\n```")
	fmt.Println(o.Verdict, "|", o.Reason, "|", err)

	_, err = gate.ParseModelOutput(`{"verdict":"stop","severity":"high"}`)
	fmt.Println(err)

	_, err = gate.ParseScriptOutput("stop please")
	fmt.Println(err)
	// Output:
	// stop | The form has no title line. | <nil>
	// Pixie's answer is not gate output JSON: json: unknown field "severity"
	// Hook script exit 11 needs a gate output JSON: not a JSON object
}

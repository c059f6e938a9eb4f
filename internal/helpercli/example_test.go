package helpercli_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/pixie-dev/pixie/internal/helpercli"
)

// `pixie judge` inside a script run: the server answers the run's helper route, the command
// prints the "yes" probability and exits 0 because it is at or above the threshold.
func ExampleJudge() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"answers":{"q":{"type":"noul","label":"yes","probabilities":{"yes":0.8731,"no":0.1269},"yes":0.8731,"confidence":0.45}},"engine":"llm","usage":{"inputTokens":90,"outputTokens":1}}`)
	}))
	defer srv.Close()
	env := map[string]string{"PIXIE_URL": srv.URL, "PIXIE_TOKEN": "run-token"}

	code := helpercli.Judge(context.Background(),
		[]string{"--question", "Is the prose of this text written in Korean?", "--threshold", "0.8", "--input"},
		strings.NewReader("안녕하세요"), os.Stdout, os.Stderr, func(k string) string { return env[k] })
	fmt.Println("exit", code)
	// Output:
	// 0.8731
	// exit 0
}

package testutil

import (
	"net/http"
	"strings"
	"testing"
)

// PostStopHook sends a Claude Code Stop hook call for session to the server at base (query is
// the route's query, "?preset=…"; auth the Authorization header, empty for none) and fails t
// unless it answers 200.
func PostStopHook(t testing.TB, base, session, query, auth string) {
	t.Helper()
	body := `{"session_id":"` + session + `","cwd":"/tmp","hook_event_name":"Stop","stop_hook_active":false,"last_assistant_message":"Done."}`
	req, err := http.NewRequest(http.MethodPost, base+"/v1/hooks/claude-code"+query, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("hook call %s: %d", query, resp.StatusCode)
	}
}

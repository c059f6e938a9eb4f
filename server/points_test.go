package server

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/pixie-dev/pixie/internal/gate"
)

// TestGatePointsRoute: GET /v1/gates/points serves internal/gate's point table as it is (Studio
// renders it), and like every /v1 route it needs the admin token or the UI cookie.
func TestGatePointsRoute(t *testing.T) {
	f := newGateFixture(t, `{"verdict":"pass"}`)
	var got struct {
		Points []gate.PointInfo `json:"points"`
	}
	if st, eb := f.call(t, http.MethodGet, "/v1/gates/points", nil, &got); st != http.StatusOK {
		t.Fatalf("status %d %+v", st, eb)
	}
	if !reflect.DeepEqual(got.Points, gate.PointTable()) {
		t.Fatalf("served %+v\nwant %+v", got.Points, gate.PointTable())
	}
	for _, c := range []struct {
		name, auth string
	}{
		{"no-token", ""},
		{"wrong-token", "Bearer nope"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := http.NewRequest(http.MethodGet, f.ts.URL+"/v1/gates/points", nil)
			if c.auth != "" {
				r.Header.Set("Authorization", c.auth)
			}
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", resp.StatusCode)
			}
		})
	}
}

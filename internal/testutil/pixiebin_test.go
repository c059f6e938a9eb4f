package testutil

import (
	"net"
	"net/http"
	"path/filepath"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

// A port another process took between FreeAddr and the server's listen answers /healthz, but
// not as our server: startServer must not take that answer for the server's (TestClaudeCode
// once got another package's server, and no token in its home).
func TestStartServerOnATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	other := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"status":"ok"}`)) })}
	go func() { _ = other.Serve(ln) }()
	defer other.Close()

	p, taken := startServer(t, PixieBinary(t), ln.Addr().String(), filepath.Join(t.TempDir(), "home"), nil)
	if p != nil || !taken {
		t.Fatalf("on a taken port: server %v, taken %v; want none, taken", p != nil, taken)
	}
	q := StartServer(t, filepath.Join(t.TempDir(), "home"), nil)
	defer q.Stop(t)
	if tok := q.Token(t); tok == "" {
		t.Fatal("no token in the started server's home")
	}
}

package model

import (
	"context"
	"errors"
	"sync"
	"testing"
)

func TestSwappable(t *testing.T) {
	hi := []Message{{Role: RoleUser, Content: "hi"}}
	var zero Swappable
	if _, err := zero.Complete(context.Background(), Request{Messages: hi}); !errors.Is(err, ErrNoModel) {
		t.Fatalf("zero value: err = %v, want ErrNoModel", err)
	}
	if zero.Info().Configured {
		t.Error("zero value reports a model")
	}

	urlA := openaiServer(t, jsonHandler(openaiBody("from A", "")), nil)
	urlB := anthropicServer(t, jsonHandler(anthropicBody("from B")), nil)
	a, err := New(Config{Provider: "openai", BaseURL: urlA, Model: "a", APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Provider: "anthropic", BaseURL: urlB, Model: "b", APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	sw := NewSwappable(a)
	var m Model = sw // what the services hold
	steps := []struct {
		name     string
		set      Model
		wantText string
		wantProv string
	}{
		{"first provider", nil, "from A", "openai"},
		{"swapped to Anthropic", b, "from B", "anthropic"},
		{"swapped back", a, "from A", "openai"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.set != nil {
				sw.Set(st.set)
			}
			resp, err := m.Complete(context.Background(), Request{Messages: hi})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != st.wantText || m.Info().Provider != st.wantProv || sw.Current().Info().Provider != st.wantProv {
				t.Errorf("text %q provider %q, want %q %q", resp.Text, m.Info().Provider, st.wantText, st.wantProv)
			}
		})
	}
	sw.Set(nil)
	if _, err := m.Complete(context.Background(), Request{Messages: hi}); !errors.Is(err, ErrNoModel) {
		t.Errorf("after Set(nil): err = %v, want ErrNoModel", err)
	}
}

// TestSwappableConcurrent swaps while calls run (go test -race).
func TestSwappableConcurrent(t *testing.T) {
	url := openaiServer(t, jsonHandler(openaiBody("ok", "")), nil)
	a, err := New(Config{Provider: "openai", BaseURL: url, Model: "a"})
	if err != nil {
		t.Fatal(err)
	}
	sw := NewSwappable(a)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 10 {
				if i == 0 {
					if j%2 == 0 {
						sw.Set(nil)
					} else {
						sw.Set(a)
					}
					continue
				}
				_, err := sw.Complete(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: "x"}}})
				if err != nil && !errors.Is(err, ErrNoModel) {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
}

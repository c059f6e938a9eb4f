package settings_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/pixie-dev/pixie/internal/config"
	"github.com/pixie-dev/pixie/internal/credentials"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/settings"
	"github.com/pixie-dev/pixie/internal/store/badgerstore"
)

// The settings page points the Pixie model at an OpenAI-compatible server: the services that
// hold the model use it at their next call, and the view never shows the key.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1717000000,"model":"qwen2.5",
			"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"OK"}}],
			"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`)
	}))
	defer srv.Close()
	home, _ := os.MkdirTemp("", "pixie-settings-example")
	defer os.RemoveAll(home)
	ctx := context.Background()
	st, err := badgerstore.Open(ctx, badgerstore.Options{Dir: filepath.Join(home, "data"), GCInterval: -1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()

	pixieModel := model.NewSwappable(nil) // what the gate service, the judge, Pet and Lark hold
	svc, err := settings.New(ctx, settings.Config{Config: config.Defaults(home), Store: st,
		Secrets: credentials.Open(home), Model: pixieModel, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		fmt.Println(err)
		return
	}
	provider, base, name, key := "openai", srv.URL+"/v1", "qwen2.5", "local-key"
	v, err := svc.SetModel(ctx, settings.ModelInput{Provider: &provider, BaseURL: &base, Model: &name, APIKey: &key})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(v.Provider, v.Model, v.HasAPIKey, v.APIKeySource, v.Fields["model"].Source, v.Fields["model"].Env)

	res, _ := svc.TestModel(ctx, nil)
	fmt.Println(res.OK, res.Model, res.Reply)
	// Output:
	// openai qwen2.5 true settings settings PIXIE_MODEL_MODEL
	// true qwen2.5 OK
}

package main

// `pixie settings model|judge …`: the run-time settings Studio's settings page changes, saved
// by the server on top of pixie.yaml and the environment (GET /v1/settings, PUT/DELETE
// /v1/settings/model and /v1/settings/judge, POST /v1/settings/model/test). API keys never go
// on the command line, where other users could read them: they come from stdin or from a named
// environment variable.

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/settings"
)

func init() {
	register(&command{name: "settings", summary: "run-time settings: the Pixie model and the decision engine (what Studio's settings page changes)", subs: []*command{
		{name: "show", summary: "every run-time setting, with where each value comes from", flags: func(fs *flag.FlagSet) runFunc {
			asJSON := fs.Bool("json", false, "print JSON")
			return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, _ []string) error {
				var v settings.View
				if err := c.do(ctx, http.MethodGet, "/v1/settings", nil, &v); err != nil {
					return err
				}
				if *asJSON {
					return writeJSON(io.stdout, v)
				}
				printModelView(io.stdout, "Pixie model", v.Model)
				if v.Judge != nil {
					fmt.Fprintln(io.stdout)
					printJudgeView(io.stdout, *v.Judge)
				}
				return nil
			})
		}},
		{name: "model", summary: "the Pixie model", subs: []*command{
			{name: "show", summary: "the Pixie model in force, and where each field comes from", flags: func(fs *flag.FlagSet) runFunc {
				asJSON := fs.Bool("json", false, "print JSON")
				return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, _ []string) error {
					var v settings.View
					if err := c.do(ctx, http.MethodGet, "/v1/settings", nil, &v); err != nil {
						return err
					}
					if *asJSON {
						return writeJSON(io.stdout, v.Model)
					}
					printModelView(io.stdout, "Pixie model", v.Model)
					return nil
				})
			}},
			{name: "set", summary: "save the Pixie model (only the fields given change; it is used at once)",
				help: `Saves the Pixie model on the server, over pixie.yaml; it is used at once, and kept across
restarts. Only the fields given change. A field set by an environment variable cannot be
changed here (the server says which). The API key comes from stdin (--api-key-stdin) or from an
environment variable of this shell (--api-key-env NAME), never from the command line.

  pixie settings model set --provider openai --model gpt-4o-mini --api-key-env OPENAI_API_KEY
  pixie settings model set --provider anthropic --model claude-3-5-haiku-latest --api-key-stdin < key.txt
  pixie settings model set --provider openai --base-url http://127.0.0.1:11434/v1 --model qwen2.5:7b`,
				flags: func(fs *flag.FlagSet) runFunc {
					mf := modelFlags(fs, "")
					return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, _ []string) error {
						in, err := mf.input(fs, io.stdin)
						if err != nil {
							return err
						}
						if in == (settings.ModelInput{}) {
							return usagef("give at least one of --provider, --base-url, --model, --timeout, --api-key-stdin, --api-key-env")
						}
						var v settings.ModelView
						if err := c.do(ctx, http.MethodPut, "/v1/settings/model", in, &v); err != nil {
							return err
						}
						printModelView(io.stdout, "saved; Pixie model", v)
						if v.Configured {
							fmt.Fprintln(io.stdout, "check it with: pixie settings model test")
						}
						return nil
					})
				}},
			{name: "test", summary: "one tiny real completion with the saved model (or with the fields given, unsaved)", flags: func(fs *flag.FlagSet) runFunc {
				mf := modelFlags(fs, "")
				return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, _ []string) error {
					in, err := mf.input(fs, io.stdin)
					if err != nil {
						return err
					}
					var res settings.TestResult
					if err := c.do(ctx, http.MethodPost, "/v1/settings/model/test", in, &res); err != nil {
						return err
					}
					if !res.OK {
						msg := "the test failed"
						if res.Error != nil {
							msg = fmt.Sprintf("the test failed (%s): %s", res.Error.Code, res.Error.Message)
						}
						return errs.New(errs.Unavailable, "%s", msg)
					}
					fmt.Fprintf(io.stdout, "ok: %s %s answered in %d ms: %s\n", res.Provider, res.Model, res.LatencyMs, oneLine(res.Reply, 60))
					return nil
				})
			}},
			{name: "reset", summary: "forget the saved model settings (pixie.yaml and the environment apply again)", flags: func(fs *flag.FlagSet) runFunc {
				return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, _ []string) error {
					var v settings.ModelView
					if err := c.do(ctx, http.MethodDelete, "/v1/settings/model", nil, &v); err != nil {
						return err
					}
					printModelView(io.stdout, "reset; Pixie model", v)
					return nil
				})
			}},
			{name: "delete-key", summary: "remove the saved API key of the Pixie model", flags: func(fs *flag.FlagSet) runFunc {
				return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, _ []string) error {
					var v settings.ModelView
					if err := c.do(ctx, http.MethodDelete, "/v1/settings/model/api-key", nil, &v); err != nil {
						return err
					}
					printModelView(io.stdout, "key removed; Pixie model", v)
					return nil
				})
			}},
		}},
		{name: "judge", summary: "the decision engine", subs: []*command{
			{name: "show", summary: "the decision engine in force, and where each field comes from", flags: func(fs *flag.FlagSet) runFunc {
				asJSON := fs.Bool("json", false, "print JSON")
				return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, _ []string) error {
					var v settings.View
					if err := c.do(ctx, http.MethodGet, "/v1/settings", nil, &v); err != nil {
						return err
					}
					if v.Judge == nil {
						return errs.New(errs.Unavailable, "this server has no decision engine")
					}
					if *asJSON {
						return writeJSON(io.stdout, v.Judge)
					}
					printJudgeView(io.stdout, *v.Judge)
					return nil
				})
			}},
			{name: "set", summary: "save the decision engine (only the fields given change)",
				help: `Saves the decision engine over pixie.yaml; only the fields given change. --model-* set a
judge model of its own; --model-provider "" makes the Pixie model answer again. The Jev key is
set with: pixie settings judge key --stdin.`,
				flags: func(fs *flag.FlagSet) runFunc {
					engine := fs.String("engine", "", "llm or jev")
					prompt := fs.String("system-prompt", "", `the judge's system prompt ("" = the built-in one)`)
					jevURL := fs.String("jev-base-url", "", "the Jev API base URL")
					jevModel := fs.String("jev-model", "", "the Jev model")
					jevTimeout := fs.String("jev-timeout", "", "the Jev call timeout (Go duration)")
					mf := modelFlags(fs, "model-")
					return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, _ []string) error {
						var in settings.JudgeInput
						set := setFlagNames(fs)
						str := func(name string, v *string) *string {
							if set[name] {
								return v
							}
							return nil
						}
						in.Engine, in.SystemPrompt = str("engine", engine), str("system-prompt", prompt)
						in.JevBaseURL, in.JevModel, in.JevTimeout = str("jev-base-url", jevURL), str("jev-model", jevModel), str("jev-timeout", jevTimeout)
						m, err := mf.input(fs, io.stdin)
						if err != nil {
							return err
						}
						if m != (settings.ModelInput{}) {
							in.Model = &m
						}
						if len(set) == 0 {
							return usagef("give at least one field to change (see --help)")
						}
						var v settings.JudgeView
						if err := c.do(ctx, http.MethodPut, "/v1/settings/judge", in, &v); err != nil {
							return err
						}
						printJudgeView(io.stdout, v)
						return nil
					})
				}},
			{name: "reset", summary: "forget the saved decision-engine settings", flags: func(fs *flag.FlagSet) runFunc {
				return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, _ []string) error {
					var v settings.JudgeView
					if err := c.do(ctx, http.MethodDelete, "/v1/settings/judge", nil, &v); err != nil {
						return err
					}
					printJudgeView(io.stdout, v)
					return nil
				})
			}},
			{name: "key", summary: "save (--stdin) or remove (--delete) the Jev API key; no flag shows its status", flags: func(fs *flag.FlagSet) runFunc {
				stdin := fs.Bool("stdin", false, "read the key from stdin and save it")
				del := fs.Bool("delete", false, "remove the saved key")
				return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, _ []string) error {
					var st map[string]any
					var err error
					switch {
					case *stdin && *del:
						return usagef("--stdin and --delete exclude each other")
					case *stdin:
						key, rerr := readSecret(io.stdin)
						if rerr != nil {
							return rerr
						}
						err = c.do(ctx, http.MethodPut, "/v1/judge/key", map[string]string{"key": key}, &st)
					case *del:
						err = c.do(ctx, http.MethodDelete, "/v1/judge/key", nil, &st)
					default:
						err = c.do(ctx, http.MethodGet, "/v1/judge/key", nil, &st)
					}
					if err != nil {
						return err
					}
					return writeJSON(io.stdout, st)
				})
			}},
		}},
	}})
}

// modelCLIFlags are the flags of a model section (prefix "" or "model-").
type modelCLIFlags struct {
	prefix                                    string
	provider, baseURL, model, timeout, keyEnv *string
	keyStdin                                  *bool
}

func modelFlags(fs *flag.FlagSet, prefix string) *modelCLIFlags {
	return &modelCLIFlags{
		prefix:   prefix,
		provider: fs.String(prefix+"provider", "", `openai (any OpenAI-compatible server) or anthropic; "" = no model`),
		baseURL:  fs.String(prefix+"base-url", "", `the endpoint (vLLM, llama.cpp, Ollama, LM Studio…); "" = the provider's`),
		model:    fs.String(prefix+"model", "", "the model name"),
		timeout:  fs.String(prefix+"timeout", "", "the per-call timeout (Go duration, e.g. 45s)"),
		keyStdin: fs.Bool(prefix+"api-key-stdin", false, "read the API key from stdin"),
		keyEnv:   fs.String(prefix+"api-key-env", "", "read the API key from this environment variable"),
	}
}

// input is the section the flags that were given describe.
func (m *modelCLIFlags) input(fs *flag.FlagSet, stdin io.Reader) (settings.ModelInput, error) {
	set := setFlagNames(fs)
	var in settings.ModelInput
	pick := func(name string, v *string) *string {
		if set[m.prefix+name] {
			return v
		}
		return nil
	}
	in.Provider, in.BaseURL, in.Model, in.Timeout = pick("provider", m.provider), pick("base-url", m.baseURL), pick("model", m.model), pick("timeout", m.timeout)
	switch {
	case *m.keyStdin && *m.keyEnv != "":
		return in, usagef("--%sapi-key-stdin and --%sapi-key-env exclude each other", m.prefix, m.prefix)
	case *m.keyStdin:
		key, err := readSecret(stdin)
		if err != nil {
			return in, err
		}
		in.APIKey = &key
	case *m.keyEnv != "":
		key := os.Getenv(*m.keyEnv)
		if key == "" {
			return in, errs.New(errs.Invalid, "$%s is empty or not set in this shell", *m.keyEnv)
		}
		in.APIKey = &key
	}
	return in, nil
}

// readSecret reads one line (a key) from stdin.
func readSecret(r io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 64<<10)).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("read the key from stdin: %w", err)
	}
	key := strings.TrimSpace(line)
	if key == "" {
		return "", errs.New(errs.Invalid, "no key on stdin")
	}
	return key, nil
}

func setFlagNames(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// sourceNote says where a field's value comes from, for the CLI's views.
func sourceNote(f settings.Field) string {
	switch f.Source {
	case settings.SourceEnv:
		return "from $" + f.Env + " (read-only here)"
	case settings.SourceSettings:
		return "saved at run time"
	default:
		return "from pixie.yaml or the default"
	}
}

func printModelView(w io.Writer, title string, v settings.ModelView) {
	if !v.Configured {
		fmt.Fprintf(w, "%s: not configured", title)
		if v.Problem != "" {
			fmt.Fprintf(w, " (%s)", v.Problem)
		}
		fmt.Fprintln(w, "\n  set one with: pixie settings model set --provider openai|anthropic --model NAME --api-key-env VAR")
	} else {
		fmt.Fprintf(w, "%s: %s %s at %s\n", title, v.Provider, v.Model, orDash(v.Endpoint))
		if v.Problem != "" {
			fmt.Fprintf(w, "  problem: %s\n", v.Problem)
		}
	}
	vals := map[string]string{"provider": v.Provider, "baseUrl": v.BaseURL, "model": v.Model, "timeout": v.Timeout}
	if v.HasAPIKey {
		vals["apiKey"] = "(set)"
	} else {
		vals["apiKey"] = "(none)"
	}
	names := make([]string, 0, len(v.Fields))
	for n := range v.Fields {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := newTable(w)
	for _, n := range names {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", n, orDash(vals[n]), sourceNote(v.Fields[n]))
	}
	_ = tw.Flush()
}

func printJudgeView(w io.Writer, v settings.JudgeView) {
	fmt.Fprintf(w, "Decision engine: %s", v.Engine)
	if v.UsesPixieModel && v.Engine == "llm" {
		fmt.Fprint(w, " (the Pixie model answers)")
	}
	fmt.Fprintln(w)
	if v.Problem != "" {
		fmt.Fprintf(w, "  problem: %s\n", v.Problem)
	}
	vals := map[string]string{"engine": v.Engine, "systemPrompt": "(built-in)", "jevBaseUrl": v.JevBaseURL, "jevModel": v.JevModel, "jevTimeout": v.JevTimeout}
	if v.SystemPrompt != "" {
		vals["systemPrompt"] = oneLine(v.SystemPrompt, 40)
	}
	names := make([]string, 0, len(v.Fields))
	for n := range v.Fields {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := newTable(w)
	for _, n := range names {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", n, orDash(vals[n]), sourceNote(v.Fields[n]))
	}
	_ = tw.Flush()
	if !v.UsesPixieModel {
		printModelView(w, "  judge model", v.Model)
	}
}

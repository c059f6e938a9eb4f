package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pixie-dev/pixie/runtime/modules"
	"github.com/pixie-dev/pixie/server"
)

// The WASM module side of the server (wiring) and `pixie module push|list|show|rm`.

func init() {
	register(&command{name: "module", summary: "WASM modules: push, list, show, rm", subs: []*command{
		{name: "push", args: "FILE.wasm", nargs: one, summary: "upload a module (validated first; pushing a name again replaces it)",
			flags: func(fs *flag.FlagSet) runFunc {
				name := fs.String("name", "", "the module's name (default: the file name without .wasm)")
				asJSON := fs.Bool("json", false, "print JSON")
				return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, pos []string) error {
					return modulePush(ctx, c, io.stdout, pos[0], *name, *asJSON)
				})
			}},
		{name: "list", summary: "the modules: name, sha256, size, upload time", flags: func(fs *flag.FlagSet) runFunc {
			asJSON := fs.Bool("json", false, "print JSON")
			return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, _ []string) error {
				return moduleList(ctx, c, io.stdout, *asJSON)
			})
		}},
		{name: "show", args: "NAME|SHA256", nargs: one, summary: "one module with its exports and imports", flags: func(fs *flag.FlagSet) runFunc {
			asJSON := fs.Bool("json", false, "print JSON")
			return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, pos []string) error {
				return moduleShow(ctx, c, io.stdout, pos[0], *asJSON)
			})
		}},
		{name: "rm", args: "NAME", nargs: one, summary: "delete a module (refused while a saved gate uses it)", flags: func(fs *flag.FlagSet) runFunc {
			return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, pos []string) error {
				if err := c.do(ctx, http.MethodDelete, "/v1/modules/"+url.PathEscape(pos[0]), nil, nil); err != nil {
					return err
				}
				fmt.Fprintf(io.stdout, "deleted module %s\n", pos[0])
				return nil
			})
		}},
	}})
}

// runModule runs `pixie module …` (the tests' entry point).
func runModule(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return executeVerb(ctx, "module", args, cmdIO{os.Stdin, stdout, stderr})
}

// modulePush sends the file's bytes as the body of POST /v1/modules?name=N.
func modulePush(ctx context.Context, c *apiClient, stdout io.Writer, file, name string, asJSON bool) error {
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(file), ".wasm")
	}
	if err := modules.ValidName(name); err != nil {
		return fmt.Errorf("%w (pass --name)", err)
	}
	body, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := c.ready(); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Base+"/v1/modules?name="+url.QueryEscape(name), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/wasm")
	var m modules.Module
	if err := c.send(req, &m); err != nil {
		return err
	}
	if asJSON {
		return writeJSON(stdout, m)
	}
	fmt.Fprintf(stdout, "pushed %s: sha256 %s, %d bytes, exports %s\n", m.Name, m.SHA256, m.Size, strings.Join(m.Exports, ", "))
	return nil
}

func moduleList(ctx context.Context, c *apiClient, stdout io.Writer, asJSON bool) error {
	var list server.ModuleList
	if err := c.do(ctx, http.MethodGet, "/v1/modules", nil, &list); err != nil {
		return err
	}
	if asJSON {
		return writeJSON(stdout, list)
	}
	if len(list.Modules) == 0 {
		fmt.Fprintln(stdout, "no modules (pixie module push FILE.wasm)")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSHA256\tSIZE\tUPLOADED")
	for _, m := range list.Modules {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", m.Name, m.SHA256[:12], m.Size, m.UploadedAt.Local().Format(time.DateTime))
	}
	return tw.Flush()
}

func moduleShow(ctx context.Context, c *apiClient, stdout io.Writer, ref string, asJSON bool) error {
	var m modules.Module
	if err := c.do(ctx, http.MethodGet, "/v1/modules/"+url.PathEscape(ref), nil, &m); err != nil {
		return err
	}
	if asJSON {
		return writeJSON(stdout, m)
	}
	fmt.Fprintf(stdout, "name      %s\nsha256    %s\nsize      %d\nuploaded  %s\nexports   %s\nimports   %s\n",
		m.Name, m.SHA256, m.Size, m.UploadedAt.Local().Format(time.RFC3339), strings.Join(m.Exports, ", "), strings.Join(m.Imports, ", "))
	return nil
}

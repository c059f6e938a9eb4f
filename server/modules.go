package server

import (
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/runtime/modules"
)

// The WASM module routes (docs/guests.md, "Upload"), in the /v1 group behind the admin token
// or the UI cookie:
//
//	POST   /v1/modules?name=N     upload: the module's bytes as the body (application/wasm,
//	                              application/octet-stream, or anything but JSON and
//	                              multipart), or multipart/form-data with the file in the
//	                              field "module" and the name in the field "name" (or the
//	                              query). 201 with the module; 400 bad request, 413 over the
//	                              registry's size cap, 422 a module that fails validation.
//	GET    /v1/modules            {"modules": [...], "maxSize": N}
//	GET    /v1/modules/:ref       one module by name or sha256
//	DELETE /v1/modules/:name      204; 409 while a saved gate uses it
//
// Uploads are read in memory up to the cap (never spilled to temporary files) and handed to
// the registry, which validates before it stores anything.

// maxMultipartOverhead is what a multipart upload may carry besides the module: the boundaries,
// part headers and the name field.
const maxMultipartOverhead = 64 << 10

// maxNameField caps the multipart name field.
const maxNameField = 256

// ModuleList is the answer of GET /v1/modules.
type ModuleList struct {
	Modules []modules.Module `json:"modules"`
	// MaxSize is the upload cap in bytes.
	MaxSize int64 `json:"maxSize"`
}

func (s *Server) mountModules(g *echo.Group) {
	if s.deps.Modules == nil {
		return
	}
	g.POST("/modules", s.moduleUpload)
	g.GET("/modules", s.moduleList)
	g.GET("/modules/:ref", s.moduleGet)
	g.DELETE("/modules/:name", s.moduleDelete)
	s.allowBigBody(http.MethodPost, "/v1/modules")
}

func (s *Server) moduleUpload(c echo.Context) error {
	r := c.Request()
	max := s.deps.Modules.MaxSize()
	name := c.QueryParam("name")
	ct := r.Header.Get(echo.HeaderContentType)
	mt, params, _ := mime.ParseMediaType(ct)
	var wasm []byte
	switch {
	case mt == echo.MIMEMultipartForm:
		if err := capBody(c, max+maxMultipartOverhead); err != nil {
			return err
		}
		formName, body, err := readModuleForm(r, params["boundary"], max)
		if err != nil {
			return err
		}
		if formName != "" && name != "" && formName != name {
			return errs.New(errs.Invalid, "the name field %q differs from the query's %q", formName, name)
		}
		if formName != "" {
			name = formName
		}
		wasm = body
	case mt == echo.MIMEApplicationJSON || strings.HasPrefix(mt, "text/"):
		return errs.New(errs.Invalid, "send the module's bytes as the body (application/wasm) or as the multipart field \"module\", not %s", mt)
	default:
		if err := capBody(c, max); err != nil {
			return err
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return readErr(err, max)
		}
		wasm = body
	}
	if name == "" {
		return errs.New(errs.Invalid, "the module's name is required: ?name=N, or the multipart field \"name\"")
	}
	if len(wasm) == 0 {
		return errs.New(errs.Invalid, "the body is empty; send the module's bytes")
	}
	m, err := s.deps.Modules.Put(r.Context(), name, wasm, "")
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, m)
}

// readModuleForm reads the multipart fields "name" and "module" (at most max bytes), refusing
// any other field, a repeated field and a missing module.
func readModuleForm(r *http.Request, boundary string, max int64) (string, []byte, error) {
	if boundary == "" {
		return "", nil, errs.New(errs.Invalid, "the multipart body has no boundary")
	}
	mr := multipart.NewReader(r.Body, boundary)
	var (
		name    string
		wasm    []byte
		gotName bool
		gotWasm bool
	)
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", nil, readErr(err, max)
		}
		switch field := p.FormName(); field {
		case "name":
			if gotName {
				return "", nil, errs.New(errs.Invalid, "the multipart field \"name\" is repeated")
			}
			b, err := io.ReadAll(io.LimitReader(p, maxNameField+1))
			if err != nil {
				return "", nil, readErr(err, max)
			}
			if len(b) > maxNameField {
				return "", nil, errs.New(errs.Invalid, "the multipart field \"name\" is over %d bytes", maxNameField)
			}
			name, gotName = strings.TrimSpace(string(b)), true
		case "module":
			if gotWasm {
				return "", nil, errs.New(errs.Invalid, "the multipart field \"module\" is repeated")
			}
			b, err := io.ReadAll(io.LimitReader(p, max+1))
			if err != nil {
				return "", nil, readErr(err, max)
			}
			if int64(len(b)) > max {
				return "", nil, errs.New(errs.TooLarge, "the module is over the %d-byte limit", max)
			}
			wasm, gotWasm = b, true
		default:
			return "", nil, errs.New(errs.Invalid, "unknown multipart field %q; send \"module\" and \"name\"", field)
		}
	}
	if !gotWasm {
		return "", nil, errs.New(errs.Invalid, "the multipart body has no field \"module\"")
	}
	return name, wasm, nil
}

// readErr codes an error reading the request body: over the cap is 413, anything else 400.
func readErr(err error, max int64) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errs.New(errs.TooLarge, "the module is over the %d-byte limit", max)
	}
	return errs.Wrap(errs.Invalid, err, "cannot read the upload: %v", err)
}

func (s *Server) moduleList(c echo.Context) error {
	ms, err := s.deps.Modules.List(c.Request().Context())
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cannot list the modules")
	}
	if ms == nil {
		ms = []modules.Module{}
	}
	return c.JSON(http.StatusOK, ModuleList{Modules: ms, MaxSize: s.deps.Modules.MaxSize()})
}

func (s *Server) moduleGet(c echo.Context) error {
	m, err := s.deps.Modules.Get(c.Request().Context(), c.Param("ref"))
	if err != nil {
		return moduleErr(err, "cannot read the module")
	}
	return c.JSON(http.StatusOK, m)
}

func (s *Server) moduleDelete(c echo.Context) error {
	if err := s.deps.Modules.Delete(c.Request().Context(), c.Param("name"), s.deps.ModuleInUse); err != nil {
		return moduleErr(err, "cannot delete the module")
	}
	return c.NoContent(http.StatusNoContent)
}

// moduleErr keeps the registry's coded errors and codes the rest as internal.
func moduleErr(err error, msg string) error {
	var ce *errs.Error
	if errors.As(err, &ce) {
		return err
	}
	return errs.Wrap(errs.Internal, err, "%s", msg)
}

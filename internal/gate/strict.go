package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
)

// Strict decoding of definitions. A gate set arrives as JSON over HTTP and as YAML (converted to
// JSON) from `pixie gate apply`. encoding/json alone would drop a misspelt key inside a gate
// silently: Gate and Attachment decode themselves (to fill defaults), and a type's own
// UnmarshalJSON does not inherit the decoder's DisallowUnknownFields. So a definition is first
// walked against its Go type, which finds every unknown or repeated key and every value of the
// wrong kind, each with its path (gates[0].advanced.onErrror), and only a document that fits is
// decoded. Keys match exactly (encoding/json would also take "Task" or "ONERROR").

// DecodeSet decodes the body of a whole-set save (PUT /v1/gates). Besides fitting the type, the
// body must name both "gates" and "presets": a save replaces both, so a body without them (such
// as {} or {"revision": 3}) would delete every gate and preset, and is refused instead.
func DecodeSet(data []byte) (Set, error) {
	var s Set
	err := decodeDefinition(data, &s, "a gate set", "gates", "presets")
	return s, err
}

// DecodeSetFile decodes a set read from a file (`pixie gate apply`): strict like DecodeSet, but
// either list may be left out, since a file's gates and presets are merged into the saved ones.
func DecodeSetFile(data []byte) (Set, error) {
	var s Set
	err := decodeDefinition(data, &s, "a gate set")
	return s, err
}

// DecodeGate decodes one gate definition (PUT /v1/gates/definitions/NAME).
func DecodeGate(data []byte) (Gate, error) {
	var g Gate
	err := decodeDefinition(data, &g, "a gate")
	return g, err
}

// DecodePreset decodes one preset (PUT /v1/gates/presets/NAME). The body must carry "gates",
// the full list of attachments: a body without it would detach every gate.
func DecodePreset(data []byte) (Preset, error) {
	var p Preset
	err := decodeDefinition(data, &p, "a preset", "gates")
	return p, err
}

// DecodeTry decodes a trial request (POST /v1/gates/try); the draft gate is checked like a saved
// one, with paths under "gate".
func DecodeTry(data []byte) (TryRequest, error) {
	var r TryRequest
	err := decodeDefinition(data, &r, "a trial request", "gate")
	return r, err
}

// decodeDefinition checks data against v's type, then decodes it into v. Every problem found is
// listed in one errs.Invalid error whose details are []Problem (the shape a refused save has).
func decodeDefinition(data []byte, v any, what string, required ...string) error {
	t := reflect.TypeOf(v).Elem()
	w := walker{dec: json.NewDecoder(bytes.NewReader(data))}
	w.dec.UseNumber()
	present, err := w.root(t)
	if err == nil {
		if _, terr := w.dec.Token(); terr != io.EOF {
			err = errors.New("trailing data after the value")
		}
	}
	if err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return errs.Wrap(errs.Invalid, err, "%s must be JSON: %v (at byte %d)", what, se, se.Offset)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return errs.Wrap(errs.Invalid, err, "%s must be a JSON object; the body is empty or cut short", what)
		}
		return errs.Wrap(errs.Invalid, err, "%s must be JSON: %v", what, err)
	}
	if present != nil {
		for _, k := range required {
			if !present[k] {
				w.add(k, "is required, and not null (an empty list is written [])")
			}
		}
	}
	if len(w.ps) > 0 {
		return shapeRefusal(what, w.ps)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return errs.Wrap(errs.Invalid, err, "%s does not decode: %v", what, err)
	}
	return nil
}

func shapeRefusal(what string, ps []Problem) error {
	msgs := make([]string, len(ps))
	for i, p := range ps {
		msgs[i] = p.Field + ": " + p.Message
	}
	return errs.New(errs.Invalid, "%s was refused: %s", what, strings.Join(msgs, "; ")).WithDetails(ps)
}

// maxShapeProblems caps the problems one document reports.
const maxShapeProblems = 100

// walker reads one JSON document token by token against a Go type.
type walker struct {
	dec *json.Decoder
	ps  []Problem
}

func (w *walker) add(path, format string, a ...any) {
	if len(w.ps) < maxShapeProblems {
		w.ps = append(w.ps, Problem{Field: path, Message: fmt.Sprintf(format, a...)})
	}
}

// root walks the top-level value, which must be an object, and returns its keys.
func (w *walker) root(t reflect.Type) (map[string]bool, error) {
	tok, err := w.dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		w.add("(body)", "must be a JSON object, not %s", kindOf(tok))
		return nil, w.skip(tok)
	}
	present := map[string]bool{}
	return present, w.object(t, "", present)
}

// value walks one value whose first token is tok.
func (w *walker) value(tok json.Token, t reflect.Type, path string) error {
	if tok == nil {
		// null leaves the field as it is, as in encoding/json (a YAML key with no value).
		return nil
	}
	for t.Kind() == reflect.Pointer && !opaque(t) {
		t = t.Elem()
	}
	if opaque(t) {
		return w.skip(tok)
	}
	d, isDelim := tok.(json.Delim)
	switch t.Kind() {
	case reflect.Struct:
		if !isDelim || d != '{' {
			w.add(path, "must be an object, not %s", kindOf(tok))
			return w.skip(tok)
		}
		return w.object(t, path, nil)
	case reflect.Slice, reflect.Array:
		if !isDelim || d != '[' {
			w.add(path, "must be a list, not %s", kindOf(tok))
			return w.skip(tok)
		}
		for i := 0; w.dec.More(); i++ {
			next, err := w.dec.Token()
			if err != nil {
				return err
			}
			if err := w.value(next, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err := w.dec.Token() // ]
		return err
	case reflect.Map:
		if !isDelim || d != '{' {
			w.add(path, "must be an object, not %s", kindOf(tok))
			return w.skip(tok)
		}
		for w.dec.More() {
			k, err := w.dec.Token()
			if err != nil {
				return err
			}
			next, err := w.dec.Token()
			if err != nil {
				return err
			}
			if err := w.value(next, t.Elem(), join(path, k.(string))); err != nil {
				return err
			}
		}
		_, err := w.dec.Token() // }
		return err
	case reflect.String:
		if _, ok := tok.(string); !ok {
			w.add(path, "must be a string, not %s", kindOf(tok))
			return w.skip(tok)
		}
	case reflect.Bool:
		if _, ok := tok.(bool); !ok {
			w.add(path, "must be true or false, not %s", kindOf(tok))
			return w.skip(tok)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := tok.(json.Number)
		if !ok {
			w.add(path, "must be a whole number, not %s", kindOf(tok))
			return w.skip(tok)
		}
		if _, err := n.Int64(); err != nil {
			w.add(path, "must be a whole number, not %s", n)
		}
	case reflect.Float32, reflect.Float64:
		if _, ok := tok.(json.Number); !ok {
			w.add(path, "must be a number, not %s", kindOf(tok))
			return w.skip(tok)
		}
	default: // interfaces and anything else encoding/json decodes as it likes
		return w.skip(tok)
	}
	return nil
}

// object walks the members of an object (its '{' already read) against struct type t; present,
// when not nil, collects the keys whose value is not null.
func (w *walker) object(t reflect.Type, path string, present map[string]bool) error {
	fields := fieldsOf(t)
	seen := map[string]bool{}
	for w.dec.More() {
		k, err := w.dec.Token()
		if err != nil {
			return err
		}
		key := k.(string)
		p := join(path, key)
		next, err := w.dec.Token()
		if err != nil {
			return err
		}
		if seen[key] {
			w.add(p, "appears twice")
		}
		seen[key] = true
		if present != nil && next != nil {
			present[key] = true
		}
		ft, ok := fields.byName[key]
		if !ok {
			if s := fields.suggest(key); s != "" {
				w.add(p, "unknown field (did you mean %q?)", s)
			} else {
				w.add(p, "unknown field (known: %s)", strings.Join(fields.names, ", "))
			}
			if err := w.skip(next); err != nil {
				return err
			}
			continue
		}
		if err := w.value(next, ft, p); err != nil {
			return err
		}
	}
	_, err := w.dec.Token() // }
	return err
}

// skip consumes the rest of a value whose first token is tok.
func (w *walker) skip(tok json.Token) error {
	d, ok := tok.(json.Delim)
	if !ok || d == '}' || d == ']' {
		return nil
	}
	for depth := 1; depth > 0; {
		t, err := w.dec.Token()
		if err != nil {
			return err
		}
		if d, ok := t.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func kindOf(tok json.Token) string {
	switch v := tok.(type) {
	case nil:
		return "null"
	case bool:
		return "true or false"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case json.Delim:
		if v == '[' {
			return "a list"
		}
		return "an object"
	}
	return "something else"
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	timeType        = reflect.TypeFor[time.Time]()
)

// opaque reports whether values of t are left to encoding/json: raw messages, times, and
// types other than structs that decode themselves. A struct that decodes itself (Gate,
// Attachment) only fills defaults, so it is checked by its fields.
func opaque(t reflect.Type) bool {
	if t == rawMessageType || t == timeType {
		return true
	}
	base := t
	for base.Kind() == reflect.Pointer {
		base = base.Elem()
	}
	if base.Kind() == reflect.Struct {
		return false
	}
	return t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType)
}

// structFields are the JSON members of a struct type.
type structFields struct {
	byName map[string]reflect.Type
	names  []string
}

var fieldCache sync.Map // reflect.Type → *structFields

func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	f := &structFields{byName: map[string]reflect.Type{}}
	collectFields(t, f)
	fieldCache.Store(t, f)
	return f
}

func collectFields(t reflect.Type, f *structFields) {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			et := sf.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				collectFields(et, f)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if _, dup := f.byName[name]; !dup {
			f.names = append(f.names, name)
		}
		f.byName[name] = sf.Type
	}
}

// suggest returns the known name closest to key: the same letters in another case, or at most
// two edits away.
func (f *structFields) suggest(key string) string {
	best, bestD := "", 3
	for _, n := range f.names {
		if strings.EqualFold(n, key) {
			return n
		}
		if d := editDistance(strings.ToLower(n), strings.ToLower(key)); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (short strings: field names).
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

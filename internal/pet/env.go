package pet

import (
	"context"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/store"
)

// EnvPrefix is prepended to every environment value's key when it reaches a Skill.
const EnvPrefix = "DSH_PET_"

// Limits of environment values.
const (
	MaxEnvKeyLen      = 64
	MaxEnvValueLen    = 8 << 10
	MaxEnvPerScope    = 100
	GlobalScope       = "global"
	workspaceScopePfx = "workspace:"
	// MinRedactLen is the shortest value Pet can redact from what it records and shows: a
	// shorter one would garble ordinary text, so SetEnv refuses non-empty values shorter than
	// this (an empty value has nothing to leak).
	MinRedactLen = 4
	maskedValue  = "********"
)

var envKey = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// envValue is pet-env/g/<KEY> or pet-env/w/<workspace>/<KEY>.
type envValue struct {
	Value     string    `json:"value"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// EnvEntry is one environment value as listings show it: the value is always masked.
type EnvEntry struct {
	// Scope is "global" or "workspace:<id>".
	Scope string `json:"scope"`
	Key   string `json:"key"`
	// Var is the variable the Skill reads (DSH_PET_<KEY>).
	Var string `json:"var"`
	// Value is masked; the mask is display-only and says nothing about the value.
	Value     string    `json:"value"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// envPrefix returns the store id prefix of a scope: workspace "" is global.
func envPrefix(workspace string) string {
	if workspace == "" {
		return "g/"
	}
	return "w/" + workspace + "/"
}

func scopeName(workspace string) string {
	if workspace == "" {
		return GlobalScope
	}
	return workspaceScopePfx + workspace
}

func validEnvKey(key string) error {
	if len(key) > MaxEnvKeyLen || !envKey.MatchString(key) {
		return errs.New(errs.Invalid, "environment key %q must be upper snake case (A-Z, 0-9, _; starting with a letter), at most %d bytes", key, MaxEnvKeyLen)
	}
	return nil
}

func validWorkspace(workspace string) error {
	if workspace == "" {
		return nil
	}
	return validID("workspace", workspace)
}

// SetEnv stores key=value in the global scope (workspace "") or a workspace's scope. Values are
// kept in Pet's state as they are: this is not a credential store.
func (s *Service) SetEnv(ctx context.Context, workspace, key, value string) (EnvEntry, error) {
	if err := validWorkspace(workspace); err != nil {
		return EnvEntry{}, err
	}
	if err := validEnvKey(key); err != nil {
		return EnvEntry{}, err
	}
	if len(value) > MaxEnvValueLen {
		return EnvEntry{}, errs.New(errs.TooLarge, "the value of %s is %d bytes; the limit is %d", key, len(value), MaxEnvValueLen)
	}
	if !utf8.ValidString(value) || strings.ContainsRune(value, 0) {
		return EnvEntry{}, errs.New(errs.Invalid, "the value of %s must be UTF-8 text without NUL bytes", key)
	}
	if value != "" && len(value) < MinRedactLen {
		return EnvEntry{}, errs.New(errs.Invalid, "the value of %s is %d bytes; values shorter than %d bytes are refused because they are too short to redact from Skill outputs and Task history (Pet would have to rewrite every occurrence of them in ordinary text)", key, len(value), MinRedactLen)
	}
	now := s.now()
	err := s.st.Update(ctx, func(tx *store.Tx) error {
		id := envPrefix(workspace) + key
		ok, err := envC.Has(tx, id)
		if err != nil {
			return err
		}
		if !ok {
			n := 0
			if err := envC.Each(tx, envPrefix(workspace), store.ScanOptions{}, func(string, envValue) error { n++; return nil }); err != nil {
				return err
			}
			if n >= MaxEnvPerScope {
				return errs.New(errs.Conflict, "the %s scope already holds %d values, the limit", scopeName(workspace), MaxEnvPerScope)
			}
		}
		return envC.Put(tx, id, envValue{Value: value, UpdatedAt: now})
	})
	if err != nil {
		return EnvEntry{}, err
	}
	return EnvEntry{Scope: scopeName(workspace), Key: key, Var: EnvPrefix + key, Value: maskedValue, UpdatedAt: now}, nil
}

// DeleteEnv removes key from a scope.
func (s *Service) DeleteEnv(ctx context.Context, workspace, key string) error {
	if err := validWorkspace(workspace); err != nil {
		return err
	}
	if err := validEnvKey(key); err != nil {
		return err
	}
	return s.st.Update(ctx, func(tx *store.Tx) error {
		id := envPrefix(workspace) + key
		if ok, err := envC.Has(tx, id); err != nil {
			return err
		} else if !ok {
			return errs.New(errs.NotFound, "no environment value %s in the %s scope", key, scopeName(workspace))
		}
		return envC.Delete(tx, id)
	})
}

// ListEnv lists environment values, masked: all scopes when all is set, else the scope of
// workspace ("" is global). Global entries come first, then workspaces by id; keys sorted.
func (s *Service) ListEnv(ctx context.Context, workspace string, all bool) ([]EnvEntry, error) {
	if err := validWorkspace(workspace); err != nil {
		return nil, err
	}
	prefix := envPrefix(workspace)
	if all {
		prefix = ""
	}
	out := []EnvEntry{}
	err := s.st.View(ctx, func(tx *store.Tx) error {
		out = out[:0]
		return envC.Each(tx, prefix, store.ScanOptions{}, func(id string, v envValue) error {
			ws, key := "", ""
			switch {
			case strings.HasPrefix(id, "g/"):
				key = strings.TrimPrefix(id, "g/")
			case strings.HasPrefix(id, "w/"):
				rest := strings.TrimPrefix(id, "w/")
				i := strings.LastIndexByte(rest, '/')
				if i < 0 {
					return nil
				}
				ws, key = rest[:i], rest[i+1:]
			default:
				return nil
			}
			out = append(out, EnvEntry{Scope: scopeName(ws), Key: key, Var: EnvPrefix + key, Value: maskedValue, UpdatedAt: v.UpdatedAt})
			return nil
		})
	})
	sort.SliceStable(out, func(i, j int) bool {
		gi, gj := out[i].Scope == GlobalScope, out[j].Scope == GlobalScope
		if gi != gj {
			return gi
		}
		if out[i].Scope != out[j].Scope {
			return out[i].Scope < out[j].Scope
		}
		return out[i].Key < out[j].Key
	})
	return out, err
}

// resolveEnv returns the DSH_PET_* variables of an invocation from workspace: the global values
// overridden by the workspace's own. A key neither scope defines is absent.
func (s *Service) resolveEnv(ctx context.Context, workspace string) (map[string]string, error) {
	vars := map[string]string{}
	err := s.st.View(ctx, func(tx *store.Tx) error {
		clear(vars)
		add := func(prefix string) error {
			return envC.Each(tx, prefix, store.ScanOptions{}, func(id string, v envValue) error {
				key := strings.TrimPrefix(id, prefix)
				if v.Value != "" && len(v.Value) < MinRedactLen {
					// Stored before values that short were refused: fail closed.
					return errs.New(errs.Unprocessable, "the environment value %s (%s scope) is shorter than %d bytes and cannot be redacted; set it again with a longer value or delete it", key, scopeName(strings.TrimSuffix(strings.TrimPrefix(prefix, "w/"), "/")), MinRedactLen)
				}
				vars[EnvPrefix+key] = v.Value
				return nil
			})
		}
		if err := add(envPrefix("")); err != nil {
			return err
		}
		if workspace != "" {
			return add(envPrefix(workspace))
		}
		return nil
	})
	return vars, err
}

// redactor replaces environment values in text that Pet records or returns.
type redactor struct {
	r    *strings.Replacer
	vars map[string]string
}

func newRedactor(vars map[string]string) redactor {
	keys := make([]string, 0, len(vars))
	for k, v := range vars {
		if len(v) >= MinRedactLen {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return redactor{}
	}
	// Longest values first, so a value that contains another is replaced whole.
	sort.Slice(keys, func(i, j int) bool { return len(vars[keys[i]]) > len(vars[keys[j]]) })
	pairs := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		pairs = append(pairs, vars[k], "[$"+k+"]")
	}
	return redactor{r: strings.NewReplacer(pairs...), vars: vars}
}

// with returns a redactor that also replaces value, as [$name].
func (r redactor) with(name, value string) redactor {
	vars := make(map[string]string, len(r.vars)+1)
	for k, v := range r.vars {
		vars[k] = v
	}
	vars[name] = value
	return newRedactor(vars)
}

func (r redactor) clean(s string) string {
	if r.r == nil || s == "" {
		return s
	}
	return r.r.Replace(s)
}

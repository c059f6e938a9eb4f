// Package locale owns the texts of the hint queue that people and models read: the header (one
// per delivery path) and instruction of the injected message and the reasons of refused
// operations. Each language is one embedded JSON file (en.json, zh.json); zh carries the
// wording of the original spec.
//
// Adding a language is adding a file: every key must be present and non-empty, which the
// package's tests check for every file.
package locale

import (
	"embed"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Default is the language used when none is configured.
const Default = "en"

// Messages are the texts of one language.
type Messages struct {
	// Header is the first line of the injected message on a path whose host keeps the message
	// in its chat history (hooks: additionalContext). It says only who inserted the hint.
	Header string `json:"header"`
	// HeaderOutOfHistory is the first line on the path that keeps the message out of the chat
	// history (the model-API proxy: one request only), where the spec's whole sentence is true:
	// zh carries it word for word.
	HeaderOutOfHistory string `json:"headerOutOfHistory"`
	// Instruction is the second line: how the model should treat the hints.
	Instruction string `json:"instruction"`
	// Ellipsis marks a hint truncated for display.
	Ellipsis string `json:"ellipsis"`
	// ErrBlank refuses a hint whose text is blank: nothing visible is left once whitespace,
	// control and invisible characters are set aside.
	ErrBlank string `json:"errBlank"`
	// ErrNotFound answers a cancel of an unknown hint.
	ErrNotFound string `json:"errNotFound"`
	// ErrConsumed answers a cancel of a consumed hint.
	ErrConsumed string `json:"errConsumed"`
	// ErrCancelled answers a cancel of an already cancelled hint.
	ErrCancelled string `json:"errCancelled"`
	// ErrTakeNotFound answers a confirm or rollback of a take the queue does not know (never
	// made, or closed longer ago than it remembers).
	ErrTakeNotFound string `json:"errTakeNotFound"`
	// ErrTakeExpired answers a confirm of a take whose lease ran out first.
	ErrTakeExpired string `json:"errTakeExpired"`
	// ErrTakeRolledBack answers a confirm of a take that was rolled back.
	ErrTakeRolledBack string `json:"errTakeRolledBack"`
	// ErrTakeConfirmed answers a rollback of a take that was confirmed.
	ErrTakeConfirmed string `json:"errTakeConfirmed"`
}

//go:embed *.json
var files embed.FS

var all = func() map[string]Messages {
	m := map[string]Messages{}
	entries, err := files.ReadDir(".")
	if err != nil {
		panic("locale: " + err.Error())
	}
	for _, e := range entries {
		raw, err := files.ReadFile(e.Name())
		if err != nil {
			panic("locale: " + err.Error())
		}
		var msg Messages
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&msg); err != nil {
			panic(fmt.Sprintf("locale: %s: %v", e.Name(), err))
		}
		m[strings.TrimSuffix(e.Name(), ".json")] = msg
	}
	return m
}()

// Lookup returns the texts of tag ("en", "zh"); an empty tag means Default.
func Lookup(tag string) (Messages, error) {
	if tag == "" {
		tag = Default
	}
	m, ok := all[tag]
	if !ok {
		return Messages{}, fmt.Errorf("unknown locale %q (known: %s)", tag, strings.Join(Tags(), ", "))
	}
	return m, nil
}

// Tags lists the known languages, sorted.
func Tags() []string {
	out := make([]string, 0, len(all))
	for t := range all {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

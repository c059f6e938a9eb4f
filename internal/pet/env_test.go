package pet_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/pet"
)

func TestEnvValues(t *testing.T) {
	e := newEnv(t, nil, nil, pet.Config{})
	ctx := context.Background()
	for _, kv := range [][3]string{{"", "CR_GROUP", "oc_global"}, {"w1", "CR_GROUP", "oc_w1"}, {"", "MR_URL", "https://x/{id}"}, {"w2", "ONLY", "only-w2"}} {
		en, err := e.svc.SetEnv(ctx, kv[0], kv[1], kv[2])
		if err != nil {
			t.Fatal(err)
		}
		if en.Value != "********" || en.Var != "DSH_PET_"+kv[1] || strings.Contains(fmt.Sprint(en), kv[2]) {
			t.Fatalf("answer %+v", en)
		}
	}
	all, err := e.svc.ListEnv(ctx, "", true)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, en := range all {
		got = append(got, en.Scope+"/"+en.Key+"="+en.Value)
	}
	want := "global/CR_GROUP=********,global/MR_URL=********,workspace:w1/CR_GROUP=********,workspace:w2/ONLY=********"
	if strings.Join(got, ",") != want {
		t.Fatalf("listing %v", got)
	}
	if list, _ := e.svc.ListEnv(ctx, "w1", false); len(list) != 1 || list[0].Scope != "workspace:w1" {
		t.Fatalf("w1 %+v", list)
	}
	if list, _ := e.svc.ListEnv(ctx, "", false); len(list) != 2 {
		t.Fatalf("global %+v", list)
	}
	// Overwriting keeps one entry; deleting removes it.
	if _, err := e.svc.SetEnv(ctx, "w1", "CR_GROUP", "oc_new"); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.DeleteEnv(ctx, "w1", "CR_GROUP"); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.DeleteEnv(ctx, "w1", "CR_GROUP"); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("second delete: %v", err)
	}
	if list, _ := e.svc.ListEnv(ctx, "", true); len(list) != 3 {
		t.Fatalf("after delete %+v", list)
	}
}

func TestEnvValidation(t *testing.T) {
	e := newEnv(t, nil, nil, pet.Config{})
	ctx := context.Background()
	tests := []struct {
		name, ws, key, value string
		code                 errs.Code
	}{
		{"upper snake", "", "CR_GROUP_2", "xxxx", ""},
		{"key at its limit", "", "K" + strings.Repeat("X", pet.MaxEnvKeyLen-1), "xxxx", ""},
		// Values too short to redact are refused, with the reason; 4 bytes is the shortest.
		{"value of 1 byte", "", "SHORT", "x", errs.Invalid},
		{"value of 3 bytes", "", "SHORT", "abc", errs.Invalid},
		{"value of 3 bytes in 1 rune", "", "SHORT", "€", errs.Invalid},
		{"value of 4 bytes", "", "SHORT", "abcd", ""},
		{"key over its limit", "", "K" + strings.Repeat("X", pet.MaxEnvKeyLen), "x", errs.Invalid},
		{"lower case", "", "cr_group", "x", errs.Invalid},
		{"leading digit", "", "2X", "x", errs.Invalid},
		{"leading underscore", "", "_X", "x", errs.Invalid},
		{"hyphen", "", "CR-GROUP", "x", errs.Invalid},
		{"empty key", "", "", "x", errs.Invalid},
		{"value at its limit", "", "BIG", strings.Repeat("v", pet.MaxEnvValueLen), ""},
		{"value over its limit", "", "BIG", strings.Repeat("v", pet.MaxEnvValueLen+1), errs.TooLarge},
		{"NUL in value", "", "NUL", "a\x00b", errs.Invalid},
		{"empty value", "", "EMPTY", "", ""},
		{"workspace with a slash", "a/b", "K", "x", errs.Invalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.svc.SetEnv(ctx, tc.ws, tc.key, tc.value)
			if tc.code == "" && err != nil {
				t.Fatal(err)
			}
			if tc.code != "" && errs.CodeOf(err) != tc.code {
				t.Fatalf("code %s, want %s: %v", errs.CodeOf(err), tc.code, err)
			}
			if tc.key == "SHORT" && err != nil && !strings.Contains(err.Error(), "too short to redact") {
				t.Fatalf("the refusal does not say why: %v", err)
			}
		})
	}
}

func TestEnvScopeCap(t *testing.T) {
	e := newEnv(t, nil, nil, pet.Config{})
	ctx := context.Background()
	for i := range pet.MaxEnvPerScope {
		if _, err := e.svc.SetEnv(ctx, "w", fmt.Sprintf("K%d", i), "value"); err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
	}
	if _, err := e.svc.SetEnv(ctx, "w", "ONE_MORE", "value"); errs.CodeOf(err) != errs.Conflict {
		t.Fatalf("value past the cap: %v", err)
	}
	// Overwriting an existing key and other scopes are unaffected.
	if _, err := e.svc.SetEnv(ctx, "w", "K0", "value2"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.SetEnv(ctx, "", "ONE_MORE", "value"); err != nil {
		t.Fatal(err)
	}
}

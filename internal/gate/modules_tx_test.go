package gate

import (
	"context"
	"testing"

	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/runtime"
)

// txModules is a TxModuleChecker over a collection of the same store: module names present in
// "test-module" exist. beforeCheck, when set, runs before each in-transaction check.
type txModules struct {
	st          *store.Store
	col         store.Collection[bool]
	txCalls     int
	plainCalls  int
	beforeCheck func(call int)
}

var _ TxModuleChecker = (*txModules)(nil)

func (m *txModules) ModuleExists(ctx context.Context, name string) (bool, error) {
	m.plainCalls++
	var ok bool
	err := m.st.View(ctx, func(tx *store.Tx) error {
		var err error
		ok, err = m.col.Has(tx, name)
		return err
	})
	return ok, err
}

func (m *txModules) ModuleExistsTx(_ context.Context, tx *store.Tx, name string) (bool, error) {
	m.txCalls++
	if m.beforeCheck != nil {
		m.beforeCheck(m.txCalls)
	}
	return m.col.Has(tx, name)
}

func (m *txModules) set(t *testing.T, name string, exists bool) {
	t.Helper()
	err := m.st.Update(context.Background(), func(tx *store.Tx) error {
		if exists {
			return m.col.Put(tx, name, true)
		}
		return m.col.Delete(tx, name)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func moduleGate(name, module string) Gate {
	g := gateAt(name, "turn-end", "")
	g.Rule = &Rule{Kind: runtime.KindModule, Name: module}
	return g
}

// TestModuleChecksRunInTheSaveTransaction: a save checks module rules inside its own
// transaction, so a module deleted between that check and the save's commit makes the save
// conflict, retry, and be refused.
func TestModuleChecksRunInTheSaveTransaction(t *testing.T) {
	mods := &txModules{col: store.NewCollection[bool]("test-module")}
	e := newEnv(t, envOptions{modules: mods})
	mods.st = e.st
	mods.set(t, "lint", true)

	if _, err := e.svc.SaveGate(context.Background(), moduleGate("a", "lint")); err != nil {
		t.Fatal(err)
	}
	if mods.txCalls != 1 || mods.plainCalls != 0 {
		t.Fatalf("checked %d times in the transaction, %d outside", mods.txCalls, mods.plainCalls)
	}

	// The module is deleted while the save is between its check and its commit.
	mods.txCalls = 0
	mods.beforeCheck = func(call int) {
		if call == 1 {
			mods.set(t, "lint", false)
		}
	}
	_, err := e.svc.SaveGate(context.Background(), moduleGate("b", "lint"))
	// The whole set is checked again: both gates now name a missing module.
	ps := problemsOf(t, err)
	if len(ps) != 2 || ps[0].Field != "gates[0].rule.name" || ps[1].Field != "gates[1].rule.name" {
		t.Fatalf("problems %+v", ps)
	}
	if mods.txCalls < 2 {
		t.Fatalf("the save did not retry after the conflict (%d checks)", mods.txCalls)
	}
	if _, err := e.svc.Gate(context.Background(), "b"); err == nil {
		t.Fatal("a gate naming a deleted module was saved")
	}
}

// TestModuleInUseReadsTheCallersTransaction: ModuleInUse sees the definitions through the
// transaction it is given.
func TestModuleInUseReadsTheCallersTransaction(t *testing.T) {
	mods := ModuleCheckerFunc(func(context.Context, string) (bool, error) { return true, nil })
	e := newEnv(t, envOptions{modules: mods})
	e.saveGates(t, moduleGate("w", "lint"))
	err := e.st.View(context.Background(), func(tx *store.Tx) error {
		for name, want := range map[string]bool{"lint": true, "other": false} {
			got, err := e.svc.ModuleInUse(context.Background(), tx, name)
			if err != nil || got != want {
				t.Errorf("ModuleInUse(%s) = %v, %v", name, got, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

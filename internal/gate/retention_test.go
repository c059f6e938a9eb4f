package gate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pixie-dev/pixie/internal/errs"
	"github.com/pixie-dev/pixie/internal/model"
	"github.com/pixie-dev/pixie/internal/store"
	"github.com/pixie-dev/pixie/internal/store/pgstore"
	"github.com/pixie-dev/pixie/internal/store/pgstore/pgtest"
)

// The retention tests run over both drivers: Badger in a temp dir, and PostgreSQL when
// PIXIE_TEST_POSTGRES_URL names a server (skipped otherwise, failed in CI).
var retentionStores = []struct {
	name string
	open func(t *testing.T) *store.Store
}{
	{"badger", func(t *testing.T) *store.Store { return openStore(t) }},
	{"postgres", func(t *testing.T) *store.Store {
		url := pgtest.NewDatabase(t)
		st, err := pgstore.Open(context.Background(), pgstore.Options{URL: url, MaxConns: 3, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}},
}

// retentionEnv is a Service with retention rt over st, its clock at now (which the test moves).
type retentionEnv struct {
	st  *store.Store
	svc *Service
	now time.Time
}

func newRetentionEnv(t *testing.T, st *store.Store, rt RecordRetention) *retentionEnv {
	t.Helper()
	m, err := model.New(model.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e := &retentionEnv{st: st, now: time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)}
	rt.Interval = time.Hour // the tests sweep themselves
	svc, err := New(context.Background(), Config{Store: st, Model: m, Home: t.TempDir(), Records: rt, Now: func() time.Time { return e.now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	e.svc = svc
	return e
}

// record is a decision in session at start (the block-risky one, with a target of its own so
// that sizes differ).
func recordAt(session string, start time.Time, i int) Record {
	r := blockRiskyRecord()
	r.Session, r.StartedAt, r.ID, r.Turn = session, start, newRunID(start), i
	r.Original = fmt.Sprintf(`{"command":"rm -rf /%s"}`, string(make([]byte, i%7)))
	r.Final = r.Original
	return r
}

func (e *retentionEnv) write(t *testing.T, recs ...Record) {
	t.Helper()
	ptrs := make([]*Record, len(recs))
	for i := range recs {
		ptrs[i] = &recs[i]
	}
	if err := e.st.Update(context.Background(), func(tx *store.Tx) error { return e.svc.writeRecords(tx, ptrs) }); err != nil {
		t.Fatal(err)
	}
}

// rawSize is what the record of id takes in the store: its key and value and its index entry's.
func (e *retentionEnv) rawSize(t *testing.T, id string) int64 {
	t.Helper()
	var n int64
	err := e.st.View(context.Background(), func(tx *store.Tx) error {
		iv, err := tx.GetRaw(runIDCol.Key(id))
		if err != nil {
			return err
		}
		idx, err := decodeIndex(id, iv)
		if err != nil {
			return err
		}
		rv, err := tx.GetRaw(runsCol.Key(idx.Key))
		if err != nil {
			return err
		}
		n = int64(len(runIDCol.Key(id)) + len(iv) + len(runsCol.Key(idx.Key)) + len(rv))
		return nil
	})
	if err != nil {
		t.Fatalf("record %s: %v", id, err)
	}
	return n
}

// kept returns which of ids still have their record (readable by id) and index entry.
func (e *retentionEnv) kept(t *testing.T, ids []string) []bool {
	t.Helper()
	out := make([]bool, len(ids))
	for i, id := range ids {
		_, err := e.svc.Record(context.Background(), id)
		switch {
		case err == nil:
			out[i] = true
		case errs.CodeOf(err) != errs.NotFound:
			t.Fatalf("record %s: %v", id, err)
		}
	}
	return out
}

// storedTotal is what every record in the store takes, read straight from it.
func (e *retentionEnv) storedTotal(t *testing.T) (bytes, records int64) {
	t.Helper()
	err := e.st.View(context.Background(), func(tx *store.Tx) error {
		if err := tx.ScanRaw(runsCol.Name()+"/", store.ScanOptions{}, func(k string, v []byte) error {
			bytes += int64(len(k) + len(v))
			records++
			return nil
		}); err != nil {
			return err
		}
		return tx.ScanRaw(runIDCol.Name()+"/", store.ScanOptions{}, func(k string, v []byte) error {
			bytes += int64(len(k) + len(v))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return bytes, records
}

// checkCount fails unless the retention count equals what the store holds.
func (e *retentionEnv) checkCount(t *testing.T) {
	t.Helper()
	if _, _, err := e.svc.ret.measure(context.Background()); err != nil {
		t.Fatal(err)
	}
	u, err := e.svc.RecordsUsage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, n := e.storedTotal(t)
	if u.Bytes != b || u.Records != n {
		t.Fatalf("the count says %d records in %d bytes; the store holds %d in %d", u.Records, u.Bytes, n, b)
	}
}

// TestRecordRetentionBytes: a bound of N bytes keeps the newest records that fit in N, across
// sessions, and deletes the others; N one byte less keeps one record fewer. The count stays
// exactly what the store holds.
func TestRecordRetentionBytes(t *testing.T) {
	for _, s := range retentionStores {
		t.Run(s.name, func(t *testing.T) {
			e := newRetentionEnv(t, s.open(t), RecordRetention{MaxBytes: 1 << 40})
			ctx := context.Background()
			const n = 40
			var ids []string
			t0 := e.now.Add(-time.Hour)
			for i := range n {
				r := recordAt(fmt.Sprintf("s%d", i%3), t0.Add(time.Duration(i)*time.Second), i)
				e.write(t, r)
				ids = append(ids, r.ID)
			}
			sizes := make([]int64, n)
			for i, id := range ids {
				sizes[i] = e.rawSize(t, id)
			}
			e.checkCount(t)
			// The newest 25 take newest25 bytes.
			var newest25 int64
			for _, sz := range sizes[n-25:] {
				newest25 += sz
			}
			for _, c := range []struct {
				max  int64
				keep int
			}{{newest25 + sizes[n-26] - 1, 25}, {newest25, 25}, {newest25 - 1, 24}, {sizes[n-1], 1}, {sizes[n-1] - 1, 0}} {
				e.svc.ret.cfg.MaxBytes = c.max
				if _, err := e.svc.SweepRecords(ctx); err != nil {
					t.Fatal(err)
				}
				kept := e.kept(t, ids)
				for i := range n {
					if want := i >= n-c.keep; kept[i] != want {
						t.Fatalf("maxBytes %d: record %d (of %d, oldest first) kept=%v, want %v", c.max, i, n, kept[i], want)
					}
				}
				e.checkCount(t)
				u, _ := e.svc.RecordsUsage(ctx)
				if u.Bytes > c.max {
					t.Fatalf("maxBytes %d: the records take %d", c.max, u.Bytes)
				}
			}
		})
	}
}

// TestRecordRetentionAge: maxAge deletes exactly the records whose run started before now −
// maxAge; a record started at the cutoff itself is kept.
func TestRecordRetentionAge(t *testing.T) {
	for _, s := range retentionStores {
		t.Run(s.name, func(t *testing.T) {
			e := newRetentionEnv(t, s.open(t), RecordRetention{MaxAge: 5 * time.Hour})
			ctx := context.Background()
			cutoff := e.now.Add(-5 * time.Hour)
			starts := []time.Time{cutoff.Add(-48 * time.Hour), cutoff.Add(-time.Minute), cutoff.Add(-time.Nanosecond), cutoff,
				cutoff.Add(time.Nanosecond), e.now.Add(-time.Minute), e.now}
			var ids []string
			for i, at := range starts {
				r := recordAt(fmt.Sprintf("s%d", i%2), at, i)
				e.write(t, r)
				ids = append(ids, r.ID)
			}
			n, err := e.svc.SweepRecords(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n != 3 {
				t.Errorf("the sweep deleted %d records, want 3", n)
			}
			kept := e.kept(t, ids)
			for i, at := range starts {
				if want := !at.Before(cutoff); kept[i] != want {
					t.Errorf("record started %s before now: kept=%v, want %v", e.now.Sub(at), kept[i], want)
				}
			}
			e.checkCount(t)
			// An hour later, the hour's records go too.
			e.now = e.now.Add(time.Hour)
			if _, err := e.svc.SweepRecords(ctx); err != nil {
				t.Fatal(err)
			}
			kept = e.kept(t, ids)
			for i := range starts {
				if want := i >= 5; kept[i] != want {
					t.Errorf("an hour later, record %d kept=%v, want %v", i, kept[i], want)
				}
			}
			e.checkCount(t)
		})
	}
}

// TestRecordRetentionReaders: what reads records sees a swept record as gone: its detail is a
// 404 (errs.NotFound), the session's list and chat notes leave it out, and a session whose
// records are all gone leaves the sessions list.
func TestRecordRetentionReaders(t *testing.T) {
	e := newRetentionEnv(t, openStore(t), RecordRetention{MaxAge: time.Hour})
	ctx := context.Background()
	old := recordAt("gone", e.now.Add(-2*time.Hour), 1)
	oldToo := recordAt("mixed", e.now.Add(-2*time.Hour+time.Second), 2)
	fresh := recordAt("mixed", e.now.Add(-time.Minute), 3)
	e.write(t, old, oldToo, fresh)
	if _, err := e.svc.SweepRecords(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{old.ID, oldToo.ID} {
		if _, err := e.svc.Record(ctx, id); errs.CodeOf(err) != errs.NotFound {
			t.Errorf("record %s after the sweep: %v, want not found", id, err)
		}
	}
	if r, err := e.svc.Record(ctx, fresh.ID); err != nil || r.ID != fresh.ID || r.Session != "mixed" {
		t.Errorf("the fresh record: %+v %v", r, err)
	}
	page, err := e.svc.Records(ctx, "mixed", "", 0)
	if err != nil || len(page.Records) != 1 || page.Records[0].ID != fresh.ID {
		t.Errorf("the session's records: %+v %v", page, err)
	}
	page, err = e.svc.Records(ctx, "gone", "", 0)
	if err != nil || len(page.Records) != 0 {
		t.Errorf("the swept session's records: %+v %v", page, err)
	}
	notes, err := e.svc.ChatNotes(ctx, "mixed")
	if err != nil || len(notes) != 1 || notes[0].RunID != fresh.ID {
		t.Errorf("chat notes: %+v %v", notes, err)
	}
	sp, err := e.svc.Sessions(ctx, "", 0)
	if err != nil || len(sp.Sessions) != 1 || sp.Sessions[0].Session != "mixed" {
		t.Errorf("sessions: %+v %v", sp, err)
	}
}

// writeLegacy writes a record as the version before run ids sorted by time did: a JSON value
// with a TTL, and a JSON-string index entry under a random id.
func writeLegacy(t *testing.T, st *store.Store, r Record) Record {
	t.Helper()
	var b [12]byte
	_, _ = rand.Read(b[:])
	r.ID = "run_" + hex.EncodeToString(b[:])
	key := r.Session + "/" + store.ReverseSortableTime(r.StartedAt) + "/" + r.ID
	err := st.Update(context.Background(), func(tx *store.Tx) error {
		raw, _ := json.Marshal(r)
		if err := tx.SetRaw(runsCol.Key(key), raw, 30*24*time.Hour); err != nil {
			return err
		}
		iv, _ := json.Marshal(key)
		return tx.SetRaw(runIDCol.Key(r.ID), iv, 30*24*time.Hour)
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRecordRetentionOlderRecords: records written by the version before (JSON, random run ids)
// are read, counted once (the first sweep lists them), and deleted first, oldest first, since
// every one of them is older than any record written since.
func TestRecordRetentionOlderRecords(t *testing.T) {
	for _, s := range retentionStores {
		t.Run(s.name, func(t *testing.T) {
			// The older version wrote records; this one starts over the same store.
			st := s.open(t)
			now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
			t0 := now.Add(-10 * time.Hour)
			var legacy []string
			for i := range 12 {
				r := writeLegacy(t, st, recordAt(fmt.Sprintf("s%d", i%2), t0.Add(time.Duration(i)*time.Minute), i))
				legacy = append(legacy, r.ID)
			}
			e := newRetentionEnv(t, st, RecordRetention{MaxBytes: 1 << 40})
			ctx := context.Background()
			got, err := e.svc.Record(ctx, legacy[3])
			if err != nil || got.ID != legacy[3] || got.Turn != 3 {
				t.Fatalf("an older record reads %+v %v", got, err)
			}
			var fresh []string
			for i := range 6 {
				r := recordAt("s0", e.now.Add(-time.Duration(6-i)*time.Minute), 100+i)
				e.write(t, r)
				fresh = append(fresh, r.ID)
			}
			// The first sweep lists the older records; a second one must not count them again.
			for range 2 {
				if _, err := e.svc.SweepRecords(ctx); err != nil {
					t.Fatal(err)
				}
				e.checkCount(t)
			}
			var freshBytes int64
			for _, id := range fresh {
				freshBytes += e.rawSize(t, id)
			}
			// A bound that holds the new records and one older record keeps the newest older one.
			e.svc.ret.cfg.MaxBytes = freshBytes + e.rawSize(t, legacy[11])
			if _, err := e.svc.SweepRecords(ctx); err != nil {
				t.Fatal(err)
			}
			kept := e.kept(t, append(append([]string{}, legacy...), fresh...))
			for i, k := range kept {
				if want := i >= 11; k != want {
					t.Errorf("record %d (the first 12 older) kept=%v, want %v", i, k, want)
				}
			}
			e.checkCount(t)
			e.svc.ret.cfg.MaxBytes = freshBytes - 1
			if _, err := e.svc.SweepRecords(ctx); err != nil {
				t.Fatal(err)
			}
			kept = e.kept(t, append(append([]string{}, legacy...), fresh...))
			for i, k := range kept {
				if want := i >= 13; k != want {
					t.Errorf("then record %d kept=%v, want %v", i, k, want)
				}
			}
			e.checkCount(t)
		})
	}
}

// TestRecordRetentionFold: the count of a process that stopped is folded into the base; the
// total does not change, and the process's entry is gone.
func TestRecordRetentionFold(t *testing.T) {
	e := newRetentionEnv(t, openStore(t), RecordRetention{MaxBytes: 1 << 40})
	ctx := context.Background()
	e.write(t, recordAt("s", e.now.Add(-time.Minute), 1))
	// Another process wrote 1000 bytes in 3 records an hour ago, and stopped.
	err := e.st.Update(ctx, func(tx *store.Tx) error {
		return ledgerCol.Put(tx, "i/dead", ledger{Bytes: 1000, Records: 3, At: e.now.Add(-time.Hour)})
	})
	if err != nil {
		t.Fatal(err)
	}
	before, _, err := e.svc.ret.measure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.SweepRecords(ctx); err != nil {
		t.Fatal(err)
	}
	after, _, _ := e.svc.ret.measure(ctx)
	if after != before {
		t.Errorf("the total went from %d to %d", before, after)
	}
	err = e.st.View(ctx, func(tx *store.Tx) error {
		_, err := ledgerCol.Get(tx, "i/dead")
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the stopped process's count is still there: %v", err)
	}
}

// TestRecordRetentionInTheBackground: with a bound, evaluations keep the records under it on
// their own: the sweep runs every interval and sooner when a sixteenth of the bound was
// written.
func TestRecordRetentionInTheBackground(t *testing.T) {
	const bound = 20 << 10
	e := newEnv(t, envOptions{noModel: true, records: RecordRetention{MaxBytes: bound, Interval: 50 * time.Millisecond}})
	ctx := context.Background()
	e.saveGates(t, gateAt("g", "user-message", "Check the instruction."))
	var last string
	for i := range 300 {
		res, err := e.svc.Evaluate(ctx, evalReq("user-message", fmt.Sprintf("instruction %d", i)))
		if err != nil || res.RunID == "" {
			t.Fatalf("%+v %v", res, err)
		}
		last = res.RunID
	}
	if err := e.svc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		u, err := e.svc.RecordsUsage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if u.Bytes <= bound && u.Swept > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the records still take %d bytes (bound %d), %d swept", u.Bytes, bound, u.Swept)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := e.svc.Record(ctx, last); err != nil {
		t.Errorf("the newest record was swept: %v", err)
	}
}

// TestRecordRetentionCursor: a sweep starts where the last one stopped (the tombstones of the
// records it deleted are not walked again), still oldest first, with the bound kept; a record
// written late with an older id (a run that took long to finish) waits for the next full pass,
// an hour later, and is the first to go then (the bound holds meanwhile: newer ones go instead).
func TestRecordRetentionCursor(t *testing.T) {
	for _, s := range retentionStores {
		t.Run(s.name, func(t *testing.T) {
			e := newRetentionEnv(t, s.open(t), RecordRetention{MaxBytes: 1 << 40})
			ctx := context.Background()
			t0 := e.now.Add(-time.Hour)
			var ids []string
			var sizes []int64
			add := func(at time.Time, i int) {
				r := recordAt(fmt.Sprintf("s%d", i%2), at, i)
				e.write(t, r)
				ids = append(ids, r.ID)
				sizes = append(sizes, e.rawSize(t, r.ID))
			}
			for i := range 10 {
				add(t0.Add(time.Duration(i)*time.Second), i)
			}
			var newest5 int64
			for _, sz := range sizes[5:] {
				newest5 += sz
			}
			e.svc.ret.cfg.MaxBytes = newest5
			if _, err := e.svc.SweepRecords(ctx); err != nil {
				t.Fatal(err)
			}
			if e.svc.ret.cursor != ids[4] {
				t.Fatalf("cursor %q, want the last deleted record %q", e.svc.ret.cursor, ids[4])
			}
			add(t0.Add(-time.Minute), 10) // late, older than every record
			for i := 11; i < 14; i++ {
				add(t0.Add(time.Duration(i)*time.Second), i)
			}
			if _, err := e.svc.SweepRecords(ctx); err != nil {
				t.Fatal(err)
			}
			kept := e.kept(t, ids)
			if !kept[10] {
				t.Fatal("the late record went before the full pass")
			}
			for i := 5; i < 9; i++ {
				if kept[i] {
					t.Errorf("record %d kept: the sweep did not go on from its cursor", i)
				}
			}
			e.checkCount(t)
			if u, _ := e.svc.RecordsUsage(ctx); u.Bytes > newest5 {
				t.Fatalf("the records take %d, over %d", u.Bytes, newest5)
			}
			e.now = e.now.Add(fullSweepEvery)
			add(t0.Add(20*time.Second), 20) // over the bound again
			if _, err := e.svc.SweepRecords(ctx); err != nil {
				t.Fatal(err)
			}
			if kept := e.kept(t, ids); kept[10] || !kept[len(ids)-1] {
				t.Errorf("the full pass kept the late record (%v) or dropped the newest (%v)", kept[10], !kept[len(ids)-1])
			}
			e.checkCount(t)
		})
	}
}

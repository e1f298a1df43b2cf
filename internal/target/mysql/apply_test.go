package mysql

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
)

const (
	testStream = "s"
	testOwner  = "run-1"
	testFull   = "full-1"
)

// restoreEmpty creates s's tables empty, as a restore of a full without
// rows does, and gives the stream a position after it.
func restoreEmpty(t *testing.T, tg *Target, s *chain.Schema) {
	t.Helper()
	ctx := context.Background()
	if err := tg.Prepare(ctx, s, false); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	for _, tb := range s.Tables {
		if _, err := tg.LoadTable(ctx, chaintest.Store(t), s, chain.TableData{Table: tb.QualifiedName()}, nil); err != nil {
			t.Fatalf("load %s: %v", tb.QualifiedName(), err)
		}
	}
	if err := tg.Finish(ctx, s); err != nil {
		t.Fatalf("finish: %v", err)
	}
	row, err := apply.Row(apply.Token{Engine: apply.EngineBroker, Stream: testStream, ChainID: "c", LastApplied: testFull, Owner: testOwner})
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.State().ReplaceState(ctx, testStream, &row); err != nil {
		t.Fatal(err)
	}
}

// applyOnce applies m as the broker does, after the full.
func applyOnce(tg *Target, s *chain.Schema, ch *chain.Chain, m *chain.Manifest, lanes int) error {
	_, err := apply.ApplyIncremental(context.Background(), ch, m, s, tg, apply.Options{Stream: testStream, Owner: testOwner, ExpectedLast: testFull, Lanes: lanes})
	return err
}

func position(t *testing.T, tg *Target) apply.Token {
	t.Helper()
	row, ok, err := tg.State().ReadState(context.Background(), testStream)
	if err != nil || !ok {
		t.Fatalf("read position: found %t, %v", ok, err)
	}
	tok, err := apply.Decode(row.Token, row.Checksum)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func ins(tb *chain.Table, values ...string) chain.Change {
	return chain.Change{Op: chain.OpInsert, Table: tb.QualifiedName(), New: chaintest.Text(values...)}
}

func keyedTable() chain.Table {
	id := col("id", "integer", 23)
	id.NotNull = true
	return chain.Table{Schema: "public", Name: "k", PrimaryKey: []string{"id"}, Columns: []chain.Column{id, col("v", "text", 25)}}
}

func keylessTable() chain.Table {
	return chain.Table{Schema: "public", Name: "kl", Columns: []chain.Column{col("a", "integer", 23), col("b", "text", 25)}}
}

var errCrash = errors.New("test: crash")

// crashAt makes the next schema change or truncate end the apply before
// (after false) or after (after true) it ran, as a crash would, once.
func crashAt(t *testing.T, after bool) {
	t.Helper()
	var once sync.Once
	testHookImplicit = func(c *chain.Change, a bool) error {
		var err error
		if a == after {
			once.Do(func() { err = errCrash })
		}
		return err
	}
	t.Cleanup(func() { testHookImplicit = nil })
}

// A schema change commits implicitly on MySQL; a crash on either side of it
// leaves the target where a second run finishes exactly once: the rows
// before it are neither lost nor doubled (a keyless table included), the
// column is added once and filled with its default, and the rows after it
// apply once.
func TestSchemaChangeExactlyOnceAcrossACrash(t *testing.T) {
	for _, lanes := range []int{1, 3} {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("lanes=%d/crash after=%t", lanes, after), func(t *testing.T) {
				tg := openTarget(t)
				k, kl := keyedTable(), keylessTable()
				s := &chain.Schema{Tables: []chain.Table{k, kl}}
				restoreEmpty(t, tg, s)
				next := keyedTable()
				c := col("c", "text", 25)
				c.Default = "'dflt'::text"
				next.Columns = append(next.Columns, c)
				recs := chaintest.Txn(10, ins(&kl, "1", "x"), ins(&k, "1", "a"),
					chain.Change{Op: chain.OpSchema, Table: k.QualifiedName(), Schema: &next},
					ins(&next, "2", "b", "c2"), ins(&kl, "2", "y"))
				ch, m := chaintest.WriteIncremental(t, recs, 2)
				crashAt(t, after)
				if err := applyOnce(tg, s, ch, m, lanes); !errors.Is(err, errCrash) {
					t.Fatalf("first run: %v, want the injected crash", err)
				}
				testHookImplicit = nil
				if err := applyOnce(tg, s, ch, m, lanes); err != nil {
					t.Fatalf("second run: %v", err)
				}
				wantRows(t, tg.db, "SELECT a, b FROM kl ORDER BY a", "1|x", "2|y")
				wantRows(t, tg.db, "SELECT id, v, c FROM k ORDER BY id", "1|a|dflt", "2|b|c2")
				if pos := position(t, tg); pos.LastApplied != m.ID {
					t.Errorf("position %+v, want past %s", pos, m.ID)
				}
			})
		}
	}
}

// A truncate commits implicitly too: crashing on either side of it, the
// second run leaves exactly the rows inserted after it.
func TestTruncateExactlyOnceAcrossACrash(t *testing.T) {
	for _, after := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash after=%t", after), func(t *testing.T) {
			tg := openTarget(t)
			kl := keylessTable()
			s := &chain.Schema{Tables: []chain.Table{kl}}
			restoreEmpty(t, tg, s)
			recs := append(chaintest.Txn(20, ins(&kl, "1", "x"), ins(&kl, "1", "x")),
				chaintest.Txn(21, ins(&kl, "2", "y"),
					chain.Change{Op: chain.OpTruncate, Tables: []string{kl.QualifiedName()}},
					ins(&kl, "3", "z"))...)
			ch, m := chaintest.WriteIncremental(t, recs, 3)
			crashAt(t, after)
			if err := applyOnce(tg, s, ch, m, 1); !errors.Is(err, errCrash) {
				t.Fatalf("first run: %v, want the injected crash", err)
			}
			testHookImplicit = nil
			if err := applyOnce(tg, s, ch, m, 1); err != nil {
				t.Fatalf("second run: %v", err)
			}
			wantRows(t, tg.db, "SELECT a, b FROM kl ORDER BY a", "3|z")
		})
	}
}

// ON DUPLICATE KEY UPDATE fires on any unique index: on a table with a
// secondary UNIQUE index, an insert whose unique value another row holds
// must fail loudly rather than overwrite that row, while an insert applied
// again still converges on its key.
func TestSecondaryUniqueIndexNeverUpdatesAnotherRow(t *testing.T) {
	tg := openTarget(t)
	id, email := col("id", "integer", 23), col("email", "text", 25)
	id.NotNull, email.NotNull = true, true
	u := chain.Table{Schema: "public", Name: "u", PrimaryKey: []string{"id"},
		Columns: []chain.Column{id, email, col("v", "text", 25)},
		Indexes: []chain.Index{{Name: "u_email", Columns: []string{"email"}, Unique: true}}}
	s := &chain.Schema{Tables: []chain.Table{u}}
	restoreEmpty(t, tg, s)
	ch := chaintest.Store(t)
	unidentified := func(recs []chain.Change) []chain.Change {
		for i := range recs {
			recs[i].Identified = false
		}
		return recs
	}
	first := chaintest.AddIncremental(t, ch, unidentified(chaintest.Txn(30, ins(&u, "1", "x@a", "one"))), 10)
	again := chaintest.AddIncremental(t, ch, unidentified(chaintest.Txn(31, ins(&u, "1", "x@a", "uno"))), 10)
	thief := chaintest.AddIncremental(t, ch, chaintest.Txn(32, ins(&u, "2", "x@a", "two")), 10)
	last := testFull
	for _, m := range []*chain.Manifest{first, again} {
		if _, err := apply.ApplyIncremental(context.Background(), ch, m, s, tg, apply.Options{Stream: testStream, Owner: testOwner, ExpectedLast: last}); err != nil {
			t.Fatal(err)
		}
		last = m.ID
	}
	wantRows(t, tg.db, "SELECT id, email, v FROM u ORDER BY id", "1|x@a|uno")
	_, err := apply.ApplyIncremental(context.Background(), ch, thief, s, tg, apply.Options{Stream: testStream, Owner: testOwner, ExpectedLast: last})
	if err == nil || !strings.Contains(err.Error(), "Duplicate entry") {
		t.Fatalf("an insert colliding with another row's unique value: %v, want the duplicate refused", err)
	}
	wantRows(t, tg.db, "SELECT id, email, v FROM u ORDER BY id", "1|x@a|uno")
}

// A lock another session holds makes the lane's statement wait out
// innodb_lock_wait_timeout (1205): the lane applies its transaction again
// in place and the run succeeds, instead of failing.
func TestLockWaitTimeoutRetriedInPlace(t *testing.T) {
	tg := openTarget(t)
	tg.lockWaitSeconds = 1
	k := keyedTable()
	s := &chain.Schema{Tables: []chain.Table{k}}
	restoreEmpty(t, tg, s)
	exec(t, tg, "INSERT INTO k VALUES (1, 'a'), (2, 'b')")
	ctx := context.Background()
	blocker, err := tg.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	if _, err := blocker.ExecContext(ctx, "START TRANSACTION"); err != nil {
		t.Fatal(err)
	}
	if _, err := blocker.ExecContext(ctx, "UPDATE k SET v = 'held' WHERE id = 2"); err != nil {
		t.Fatal(err)
	}
	release := time.AfterFunc(1500*time.Millisecond, func() { _, _ = blocker.ExecContext(ctx, "ROLLBACK") })
	defer release.Stop()
	recs := chaintest.Txn(40,
		chain.Change{Op: chain.OpUpdate, Table: k.QualifiedName(), New: chaintest.Text("1", "a2"), OldKind: 'K', Old: chaintest.Text("1", "\x00")},
		chain.Change{Op: chain.OpUpdate, Table: k.QualifiedName(), New: chaintest.Text("2", "b2"), OldKind: 'K', Old: chaintest.Text("2", "\x00")})
	ch, m := chaintest.WriteIncremental(t, recs, 10)
	began := time.Now()
	if err := applyOnce(tg, s, ch, m, 1); err != nil {
		t.Fatalf("apply behind a held lock: %v", err)
	}
	if waited := time.Since(began); waited < time.Second {
		t.Fatalf("the apply took %v: it never waited on the held lock, so nothing was retried", waited)
	}
	wantRows(t, tg.db, "SELECT id, v FROM k ORDER BY id", "1|a2", "2|b2")
}

// Values MySQL cannot hold exactly are refused with the table, the column
// and the value named, and nothing of the transaction is written.
func TestValuesRefusedByName(t *testing.T) {
	id := col("id", "text", 25)
	id.NotNull = true
	tb := chain.Table{Schema: "public", Name: "vals", PrimaryKey: []string{"id"}, Columns: []chain.Column{
		id, col("n", "numeric", 1700), col("d", "date", 1082), col("ts", "timestamp with time zone", 1184)}}
	for _, tc := range []struct {
		name, column string
		row          []string
	}{
		{"decimal beyond 30 fraction digits", "n", []string{"a", "0.0000000000000000000000000000001", "\x00", "\x00"}},
		{"decimal beyond 35 integer digits", "n", []string{"b", "123456789012345678901234567890123456", "\x00", "\x00"}},
		{"date past year 9999", "d", []string{"c", "\x00", "10000-01-01", "\x00"}},
		{"date before year 1", "d", []string{"d", "\x00", "0001-12-31 BC", "\x00"}},
		{"timestamptz infinity", "ts", []string{"e", "\x00", "\x00", "infinity"}},
		{"key text beyond its bound", "id", []string{strings.Repeat("é", 769), "\x00", "\x00", "\x00"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := openTarget(t)
			s := &chain.Schema{Tables: []chain.Table{tb}}
			restoreEmpty(t, tg, s)
			ch, m := chaintest.WriteIncremental(t, chaintest.Txn(50, ins(&tb, "ok", "1", "2024-01-01", "\x00"), ins(&tb, tc.row...)), 10)
			err := applyOnce(tg, s, ch, m, 1)
			wantCode(t, err, errcode.TargetValueRefused)
			if !strings.Contains(err.Error(), "vals") || !strings.Contains(err.Error(), tc.column) {
				t.Errorf("the refusal names no table and column: %v", err)
			}
			wantRows(t, tg.db, "SELECT COUNT(*) FROM vals", "0")
		})
	}
}

// Updates held back and sent as one UPDATE joined to a derived table of
// values write each kind exactly as a single-row UPDATE does, NULLs and a
// first row of NULLs included.
func TestBatchedUpdatesKeepEveryKind(t *testing.T) {
	id := col("id", "integer", 23)
	id.NotNull = true
	tb := chain.Table{Schema: "public", Name: "upd", PrimaryKey: []string{"id"}, Columns: []chain.Column{
		id, col("n", "numeric", 1700), col("f", "real", 700), col("ts", "timestamp with time zone", 1184),
		col("by", "bytea", 17), col("j", "json", 114), col("t", "text", 25), col("b", "boolean", 16)}}
	s := &chain.Schema{Tables: []chain.Table{tb}}
	tg := openTarget(t)
	restoreEmpty(t, tg, s)
	upd := func(values ...string) chain.Change {
		return chain.Change{Op: chain.OpUpdate, Table: tb.QualifiedName(), New: chaintest.Text(values...), OldKind: 'K',
			Old: chaintest.Text(values[0], "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00")}
	}
	recs := chaintest.Txn(70,
		ins(&tb, "1", "1", "1", "2024-01-01 00:00:00+00", `\x00`, "{}", "x", "t"),
		ins(&tb, "2", "1", "1", "2024-01-01 00:00:00+00", `\x00`, "{}", "x", "t"),
		ins(&tb, "3", "1", "1", "2024-01-01 00:00:00+00", `\x00`, "{}", "x", "t"))
	recs = append(recs, chaintest.Txn(71,
		upd("1", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00"),
		upd("2", "12345678901234567890.123", "1.1", "2024-02-29 13:14:15.123456+00", `\x00ff10`, `{"a": [1, "é"]}`, "it's \\ \"q\"", "f"),
		upd("3", "-0.5", "-3.4028235e+38", "1999-12-31 23:59:59+00", `\x`, "[]", "", "t"))...)
	ch, m := chaintest.WriteIncremental(t, recs, 100)
	if err := applyOnce(tg, s, ch, m, 1); err != nil {
		t.Fatal(err)
	}
	wantRows(t, tg.db, "SELECT id, n, ts, HEX(`by`), j, t, b FROM upd ORDER BY id",
		"1|NULL|NULL|NULL|NULL|NULL|NULL",
		`2|12345678901234567890.123000000000000000000000000000|2024-02-29 13:14:15.123456|00FF10|{"a": [1, "é"]}|it's \ "q"|0`,
		"3|-0.500000000000000000000000000000|1999-12-31 23:59:59.000000||[]||1")
	got, err := tg.ReadRows(context.Background(), &tb)
	if err != nil {
		t.Fatal(err)
	}
	if f := got[1][2].Float; float32(f) != float32(1.1) {
		t.Errorf("a real updated in a batch reads back as %v, want 1.1", f)
	}
	if f := got[2][2].Float; float32(f) != float32(-3.4028235e+38) {
		t.Errorf("a real updated in a batch reads back as %v, want -3.4028235e+38", f)
	}
}

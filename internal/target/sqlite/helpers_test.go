package sqlite

import (
	"context"
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
	"github.com/sluicehq/sluice/internal/testenv"
)

// openTarget opens a target on a new database file of t.
func openTarget(t testing.TB) *Target {
	t.Helper()
	tg, err := Open(context.Background(), filepath.Join(t.TempDir(), "target.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tg.Close(context.Background()) })
	return tg
}

// wantRows fails unless query returns exactly want.
func wantRows(t testing.TB, tg *Target, query string, want ...string) {
	t.Helper()
	testenv.WantSQLRows(t, tg.db, query, want...)
}

// wantCode fails unless err carries code.
func wantCode(t testing.TB, err error, code errcode.Code) {
	t.Helper()
	if !errcode.Is(err, code) {
		t.Fatalf("want %s, got %v", code, err)
	}
}

func col(name, typ string, oid uint32) chain.Column {
	return chain.Column{Name: name, Type: typ, TypeOID: oid, Encoding: chain.EncodingText}
}

func binCol(name, typ string, oid uint32) chain.Column {
	c := col(name, typ, oid)
	c.Encoding = chain.EncodingBinary
	return c
}

func notNull(c chain.Column) chain.Column {
	c.NotNull = true
	return c
}

// PostgreSQL binary forms of the few types the tests send binary.
func pgInt8(v int64) []byte     { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
func pgFloat8(f float64) []byte { return binary.BigEndian.AppendUint64(nil, math.Float64bits(f)) }
func pgBool(b bool) []byte {
	if b {
		return []byte{1}
	}
	return []byte{0}
}

// writeFull stores rows of one table as row chunks (chaintest.WriteFull).
var writeFull = chaintest.WriteFull

// restore prepares the target for s and loads each table's rows.
func restore(t testing.TB, tg *Target, ch *chain.Chain, s *chain.Schema, data map[string]chain.TableData) {
	t.Helper()
	ctx := context.Background()
	if err := tg.Prepare(ctx, s, false); err != nil {
		t.Fatal(err)
	}
	for _, tb := range s.Tables {
		td, ok := data[tb.QualifiedName()]
		if !ok {
			continue
		}
		if _, err := tg.LoadTable(ctx, ch, s, td, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := tg.Finish(ctx, s); err != nil {
		t.Fatal(err)
	}
}

// openLane opens a lane of stream "s1" whose lease accepts any row.
func openLane(t testing.TB, tg *Target, s *chain.Schema, lease func(target.StateRow) error) target.Lane {
	t.Helper()
	if lease == nil {
		lease = func(target.StateRow) error { return nil }
	}
	l, err := tg.OpenLane(context.Background(), target.LaneConfig{Schema: s, Stream: "s1", Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l
}

// applyAll applies records on l and commits once at the end.
func applyAll(t testing.TB, l target.Lane, records []chain.Change) {
	t.Helper()
	ctx := context.Background()
	for i := range records {
		if err := l.Apply(ctx, &records[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Commit(ctx, target.Commit{}); err != nil {
		t.Fatal(err)
	}
}

func ins(table string, vals ...chain.Value) chain.Change {
	return chain.Change{Op: chain.OpInsert, Table: table, New: vals}
}

var (
	txt     = chaintest.Text
	toasted = chain.Value{Kind: chain.ValueUnchanged}
)

// restoreApply applies m as a restore applies an incremental
// (apply.RestoreOptions) under a restore stream whose position starts at
// the full the first time.
func restoreApply(t *testing.T, tg *Target, ch *chain.Chain, m *chain.Manifest, s *chain.Schema, subset target.Subset) (apply.Result, error) {
	t.Helper()
	const stream, owner, full = "restore:c", "run-1", "full-1"
	ctx := context.Background()
	if _, found, err := tg.State().ReadState(ctx, stream); err != nil {
		t.Fatal(err)
	} else if !found {
		row, err := apply.Row(apply.Token{Engine: apply.EngineBroker, Stream: stream, ChainID: "c", LastApplied: full, Owner: owner, Subset: subset})
		if err != nil {
			t.Fatal(err)
		}
		if err := tg.State().ReplaceState(ctx, stream, &row); err != nil {
			t.Fatal(err)
		}
	}
	return apply.ApplyIncremental(ctx, ch, m, s, tg, apply.RestoreOptions(stream, owner, full, subset, 0, ""))
}

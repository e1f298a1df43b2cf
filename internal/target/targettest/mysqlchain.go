package targettest

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/readback"
	"github.com/sluicehq/sluice/internal/target"
	"github.com/sluicehq/sluice/internal/value"
)

// A chain recorded from a MySQL-family source: tables of dialect mysql,
// MySQL type texts, every column a kind, transactions named by GTIDs.

// mysqlSide is shop.side, a small table of dialect mysql the incremental
// truncates.
func mysqlSide() chain.Table {
	id := chaintest.MySQLColumn("id", "int(11)", chaintest.KindInt)
	id.NotNull = true
	return chain.Table{Schema: "shop", Name: "side", Dialect: chain.DialectMySQL, PrimaryKey: []string{"id"}, PrimaryKeyName: "PRIMARY",
		Columns: []chain.Column{id, chaintest.MySQLColumn("v", "varchar(10)", value.Kind{Name: value.Text})}}
}

// mysqlFresh is shop.fresh, a table the incremental creates.
func mysqlFresh() chain.Table {
	id := chaintest.MySQLColumn("id", "bigint(20) unsigned", chaintest.KindUBigint)
	id.NotNull = true
	return chain.Table{Schema: "shop", Name: "fresh", Dialect: chain.DialectMySQL, PrimaryKey: []string{"id"}, PrimaryKeyName: "PRIMARY",
		Columns: []chain.Column{id, chaintest.MySQLColumn("j", "json", value.Kind{Name: value.JSON}), chaintest.MySQLColumn("m", "mediumint(9)", chaintest.KindMediumint)}}
}

// withNote is tb with a column note varchar(20) added at its end, as an
// ALTER TABLE … ADD COLUMN on the source records it.
func withNote(tb chain.Table) chain.Table {
	tb.Columns = append(slices.Clone(tb.Columns), chaintest.MySQLColumn("note", "varchar(20)", value.Kind{Name: value.Text}))
	return tb
}

// readBack reads a table through the engine's read-back seam (the one
// `sluice verify` reads by), each value rendered in PostgreSQL's text
// form by the column's recorded kind, rows ordered by their first column.
func readBack(t *testing.T, tgt any, tb *chain.Table) [][]string {
	t.Helper()
	r, ok := tgt.(readback.Reader)
	if !ok {
		t.Fatalf("%T has no read-back seam", tgt)
	}
	ctx := context.Background()
	snap, err := r.OpenSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close(ctx)
	var out [][]string
	var keys []value.Value
	err = snap.Scan(ctx, tb, func(row []value.Value) error {
		if len(row) != len(tb.Columns) {
			t.Fatalf("%s: a row of %d values, the table has %d columns", tb.Name, len(row), len(tb.Columns))
		}
		r := make([]string, len(row))
		for j, v := range row {
			r[j] = normalize(t, tb.Columns[j].NeutralKind(), v)
		}
		out = append(out, r)
		keys = append(keys, row[0])
		return nil
	})
	if err != nil {
		t.Fatalf("read back %s: %v", tb.QualifiedName(), err)
	}
	// Order by the first column, an integer key in every table here.
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		if c := cmp.Compare(keys[a].Int, keys[b].Int); c != 0 {
			return c
		}
		return cmp.Compare(keys[a].Uint, keys[b].Uint)
	})
	sorted := make([][]string, len(out))
	for i, j := range idx {
		sorted[i] = out[j]
	}
	return sorted
}

// expectKinds renders recorded text rows by each column's recorded kind.
func expectKinds(t *testing.T, tb *chain.Table, rows [][]string) [][]string {
	t.Helper()
	return expectBy(t, tb, rows, chain.Column.NeutralKind)
}

// mysqlChain restores a full recorded from a MySQL-family source (every
// kind such a source records, at its edges, NULLs and empty values) and
// applies an incremental of GTID-named transactions: inserts, an update
// and a delete by whole before images, a column added, a table created,
// a table truncated. Every table reads back through the engine's
// read-back seam equal, value by value, to what the chain records.
// viaRestore applies the incremental as a restore does (one lane, one
// transaction: apply.RestoreOptions) instead of as the broker does.
func mysqlChain(t *testing.T, h Harness, viaRestore bool) {
	ctx := context.Background()
	kinds, side := chaintest.MySQLKindsTable(), mysqlSide()
	s := &chain.Schema{Schemas: []string{"shop"}, Tables: []chain.Table{kinds, side}}
	ch := chaintest.Store(t)
	data := []chain.TableData{
		chaintest.WriteFullText(t, ch, &kinds, 2, chaintest.MySQLKindsRows),
		chaintest.WriteFullText(t, ch, &side, 10, [][]string{{"1", "x"}, {"2", "\x00"}}),
	}
	tgt := h.New(t)
	if err := tgt.Prepare(ctx, s, false); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	for _, td := range data {
		n, err := tgt.LoadTable(ctx, ch, s, td, nil)
		if err != nil {
			t.Fatalf("load %s: %v", td.Table, err)
		}
		if n != td.Rows {
			t.Fatalf("load %s: %d rows, want %d", td.Table, n, td.Rows)
		}
	}
	if err := tgt.Finish(ctx, s); err != nil {
		t.Fatalf("finish: %v", err)
	}
	sameRows(t, &kinds, readBack(t, tgt, &kinds), expectKinds(t, &kinds, chaintest.MySQLKindsRows))
	sameRows(t, &side, readBack(t, tgt, &side), expectKinds(t, &side, [][]string{{"1", "x"}, {"2", "\x00"}}))
	restorePosition(t, tgt)

	row1 := chaintest.MySQLKindsRows[0]
	row2 := chaintest.MySQLKindsRows[1]
	row1b := slices.Clone(row1)
	row1b[1], row1b[5], row1b[16], row1b[21], row1b[27] = "0", "-1", "changed", "medium", "PT0.000001S"
	row4 := slices.Clone(row2)
	row4[0], row4[16], row4[22], row4[28] = "4", "four", "b", "2000"
	after := withNote(kinds)
	row5 := append(slices.Clone(row1), "a note")
	row5[0], row5[16] = "5", "five"
	row4n := append(slices.Clone(row4), "noted")
	fresh := mysqlFresh()

	recs := chaintest.GTIDTxn("0-1-100",
		chain.Change{Op: chain.OpInsert, Table: kinds.QualifiedName(), New: chaintest.Text(row4...)},
		chain.Change{Op: chain.OpUpdate, Table: kinds.QualifiedName(), New: chaintest.Text(row1b...), OldKind: 'O', Old: chaintest.Text(row1...)},
		chain.Change{Op: chain.OpDelete, Table: kinds.QualifiedName(), OldKind: 'O', Old: chaintest.Text(row2...)},
	)
	recs = append(recs, chaintest.GTIDTxn("0-1-101",
		chain.Change{Op: chain.OpSchema, Table: after.QualifiedName(), Schema: &after},
		chain.Change{Op: chain.OpInsert, Table: after.QualifiedName(), New: chaintest.Text(row5...)},
		chain.Change{Op: chain.OpUpdate, Table: after.QualifiedName(), New: chaintest.Text(row4n...), OldKind: 'O', Old: chaintest.Text(append(slices.Clone(row4), "\x00")...)},
		chain.Change{Op: chain.OpSchema, Table: fresh.QualifiedName(), Schema: &fresh},
		chain.Change{Op: chain.OpInsert, Table: fresh.QualifiedName(), New: chaintest.Text("9223372036854775807", `{"k": "v"}`, "-8388608")},
		chain.Change{Op: chain.OpInsert, Table: fresh.QualifiedName(), New: chaintest.Text("1", "[]", "\x00")},
	)...)
	recs = append(recs, chaintest.GTIDTxn("0-1-102",
		chain.Change{Op: chain.OpTruncate, Tables: []string{side.QualifiedName()}},
		chain.Change{Op: chain.OpInsert, Table: side.QualifiedName(), New: chaintest.Text("3", "")},
	)...)
	m := chaintest.AddIncremental(t, ch, recs, 4)
	if viaRestore {
		r, err := apply.ApplyIncremental(ctx, ch, m, s, tgt, apply.RestoreOptions(stream, owner, full, target.Subset{}, 0, ""))
		if err != nil || r.Applied != m.Changes {
			t.Fatalf("restore incremental: applied %d of %d changes, %v", r.Applied, m.Changes, err)
		}
	} else if err := applyLinks(t, tgt, s, ch, m); err != nil {
		t.Fatalf("apply: %v", err)
	}
	// By id: 1 updated, 2 deleted, 3 (all NULL) as restored, 4 and 5
	// inserted; the column added after the restore is NULL where no row
	// image carried it.
	want := [][]string{append(row1b, "\x00"), append(slices.Clone(chaintest.MySQLKindsRows[2]), "\x00"), row4n, row5}
	sameRows(t, &after, readBack(t, tgt, &after), expectKinds(t, &after, want))
	sameRows(t, &fresh, readBack(t, tgt, &fresh), expectKinds(t, &fresh, [][]string{{"1", "[]", "\x00"}, {"9223372036854775807", `{"k": "v"}`, "-8388608"}}))
	sameRows(t, &side, readBack(t, tgt, &side), expectKinds(t, &side, [][]string{{"3", ""}}))
	if pos := position(t, tgt); pos.LastApplied != m.ID {
		t.Errorf("position %+v, want past %s", pos, m.ID)
	}
}

// mysqlChainRefusesOrHolds applies, into tables restored empty, the values
// of a MySQL-family chain some engines cannot hold: each comes back
// unchanged or is refused with the code the harness names.
func mysqlChainRefusesOrHolds(t *testing.T, h Harness) {
	kinds := chaintest.MySQLKindsTable()
	s := &chain.Schema{Schemas: []string{"shop"}, Tables: []chain.Table{kinds}}
	tgt := h.New(t)
	restore(t, tgt, s)
	row := make([]string, len(kinds.Columns))
	var k value.Kind
	for j, c := range kinds.Columns {
		row[j] = "\x00"
		if c.Name == "biu" {
			row[j], k = chaintest.MySQLUint64Max, c.NeutralKind()
		}
	}
	row[0] = "9"
	ch, m := chaintest.WriteIncremental(t, chaintest.GTIDTxn("0-1-9", chain.Change{Op: chain.OpInsert, Table: kinds.QualifiedName(), New: chaintest.Text(row...)}), 100)
	err := applyLinks(t, tgt, s, ch, m)
	if code := h.Refusal(k, chaintest.MySQLUint64Max); code != "" {
		requireCode(t, err, code)
		if !strings.Contains(err.Error(), "transaction 0-1-9") {
			t.Errorf("the refusal does not name the transaction by its GTID: %v", err)
		}
		if rows := readBack(t, tgt, &kinds); len(rows) != 0 {
			t.Errorf("a refused value left %d rows", len(rows))
		}
		return
	}
	if err != nil {
		t.Fatalf("the harness says the engine holds %s: %v", chaintest.MySQLUint64Max, err)
	}
	sameRows(t, &kinds, readBack(t, tgt, &kinds), expectKinds(t, &kinds, [][]string{row}))
}

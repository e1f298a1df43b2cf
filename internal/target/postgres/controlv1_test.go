package postgres

import (
	"context"
	"os"
	"testing"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/target"
	"github.com/sluicehq/sluice/internal/testenv"
)

// Control tables of the first layout (frozen in testdata) keep working: the
// position decodes, the marks read and skip, PostgreSQL marks are written
// without touching the layout, and the first mark of a transaction named by
// an opaque ID upgrades the marks table without losing a mark.
func TestControlTablesV1(t *testing.T) {
	db := testenv.CreateDB(t, "ctlv1")
	ctx := context.Background()
	tgt, err := Open(ctx, testenv.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close(ctx)
	fixture, err := os.ReadFile("testdata/control-tables-v1.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tgt.Conn().Exec(ctx, string(fixture)); err != nil {
		t.Fatal(err)
	}
	st := tgt.State()
	if err := st.EnsureControlTables(ctx); err != nil {
		t.Fatal(err)
	}
	tok, err := apply.ReadOwnedToken(ctx, st, "s", "run-1")
	if err != nil || tok.LastApplied != "l1" || tok.Changes != 12 {
		t.Fatalf("v1 position: %+v, %v", tok, err)
	}
	pg := chain.Identity{XID: 7, CommitLSN: 1 << 40}
	marks, err := apply.ReadMarks(ctx, st, "s")
	if err != nil {
		t.Fatal(err)
	}
	for o, want := range map[uint32]bool{0: true, 1: true, 2: true, 3: false, 5: true, 6: true, 7: false} {
		c := chain.Change{XID: pg.XID, CommitLSN: pg.CommitLSN, Ordinal: o}
		if marks.Has(&c) != want {
			t.Errorf("v1 mark of ordinal %d: %t, want %t", o, !want, want)
		}
	}

	write := func(id chain.Identity, ords ...uint32) {
		t.Helper()
		var b target.MarkBatch
		for _, o := range ords {
			b.Add("l2", id, o)
		}
		tx, err := tgt.Conn().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeMarks(ctx, tx, "s", &b, nil); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	write(chain.Identity{XID: 9, CommitLSN: 1 << 41}, 0, 1)
	if has, _ := marksHaveTxID(ctx, tgt.Conn()); has {
		t.Fatal("a PostgreSQL mark changed the v1 layout")
	}
	gtid := chain.Identity{Tx: "3e11fa47-71ca-11e1-9e33-c80aa9429562:23"}
	write(gtid, 0)
	write(chain.Identity{Tx: "0-1-4711"}, 0) // same first ordinal, another transaction
	if has, _ := marksHaveTxID(ctx, tgt.Conn()); !has {
		t.Fatal("a mark named by an opaque ID did not upgrade the layout")
	}
	marks, err = apply.ReadMarks(ctx, st, "s")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []chain.Change{
		{XID: 7, CommitLSN: 1 << 40, Ordinal: 6},
		{XID: 9, CommitLSN: 1 << 41, Ordinal: 1},
		{Tx: gtid.Tx, Ordinal: 0},
		{Tx: "0-1-4711", Ordinal: 0},
	} {
		if !marks.Has(&c) {
			t.Errorf("mark of %s ordinal %d lost", c.Identity(), c.Ordinal)
		}
	}
	if c := (chain.Change{Tx: gtid.Tx, Ordinal: 1}); marks.Has(&c) {
		t.Error("an unmarked ordinal reads as marked")
	}
}

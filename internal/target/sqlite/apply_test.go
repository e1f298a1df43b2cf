package sqlite

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

var itemsTable = chain.Table{Schema: "public", Name: "items", PrimaryKey: []string{"id"},
	Columns: []chain.Column{notNull(col("id", "bigint", 20)), col("name", "text", 25), col("note", "text", 25)}}

var logTable = chain.Table{Schema: "public", Name: "log", ReplicaIdentity: "f",
	Columns: []chain.Column{col("at", "date", 1082), col("msg", "text", 25)}}

// created returns the schema change records creating tables.
func created(tables ...chain.Table) []chain.Change {
	out := make([]chain.Change, len(tables))
	for i := range tables {
		out[i] = chain.Change{Op: chain.OpSchema, Table: tables[i].QualifiedName(), Schema: &tables[i]}
	}
	return out
}

func TestInsertAppliedTwiceConverges(t *testing.T) {
	tg := openTarget(t)
	l := openLane(t, tg, nil, nil)
	applyAll(t, l, chaintest.Txn(1, created(itemsTable)...))
	insert := ins("public.items", txt("1", "first", "\x00")...)
	again := ins("public.items", txt("1", "second", "n")...)
	applyAll(t, l, chaintest.Txn(2, insert))
	applyAll(t, l, chaintest.Txn(2, insert, again))
	wantRows(t, tg, "SELECT id, name, note FROM items", "1|second|n")
}

func TestUpdateAndDeleteByKey(t *testing.T) {
	tg := openTarget(t)
	l := openLane(t, tg, nil, nil)
	applyAll(t, l, chaintest.Txn(1, append(created(itemsTable),
		ins("public.items", txt("1", "a", "keep")...),
		ins("public.items", txt("2", "b", "x")...))...))
	applyAll(t, l, chaintest.Txn(2,
		// A TOASTed note is left as it is; the key moves from 1 to 10.
		chain.Change{Op: chain.OpUpdate, Table: "public.items", OldKind: 'K', Old: txt("1", "\x00", "\x00"),
			New: []chain.Value{txt("10")[0], txt("A")[0], toasted}},
		chain.Change{Op: chain.OpDelete, Table: "public.items", OldKind: 'K', Old: txt("2", "\x00", "\x00")},
		chain.Change{Op: chain.OpUpdate, Table: "public.items", New: txt("10", "AA", "\x00")}))
	wantRows(t, tg, "SELECT id, name, quote(note) FROM items", "10|AA|NULL")
}

func TestKeylessDeleteRemovesOneOfTwin(t *testing.T) {
	tg := openTarget(t)
	l := openLane(t, tg, nil, nil)
	row := txt("2026-05-01", "same")
	applyAll(t, l, chaintest.Txn(1, append(created(logTable),
		ins("public.log", row...), ins("public.log", row...), ins("public.log", txt("2026-05-02", "other")...))...))
	applyAll(t, l, chaintest.Txn(2, chain.Change{Op: chain.OpDelete, Table: "public.log", OldKind: 'O', Old: row}))
	wantRows(t, tg, "SELECT at, msg FROM log ORDER BY rowid", "2026-05-01|same", "2026-05-02|other")

	applyAll(t, l, chaintest.Txn(3, chain.Change{Op: chain.OpUpdate, Table: "public.log", OldKind: 'O',
		Old: txt("2026-05-02", "other"), New: txt("2026-05-03", "changed")}))
	wantRows(t, tg, "SELECT at, msg FROM log ORDER BY rowid", "2026-05-01|same", "2026-05-03|changed")

	// Without the whole old row the change is refused, not guessed.
	c := chain.Change{Op: chain.OpDelete, Table: "public.log", OldKind: 'K', Old: row}
	if err := l.Apply(context.Background(), &c); err == nil {
		t.Fatal("a keyless delete without the old row applied")
	}
}

func TestTruncate(t *testing.T) {
	tg := openTarget(t)
	l := openLane(t, tg, nil, nil)
	applyAll(t, l, chaintest.Txn(1, append(created(itemsTable, logTable), ins("public.items", txt("1", "a", "b")...), ins("public.log", txt("2026-01-01", "m")...))...))
	applyAll(t, l, chaintest.Txn(2, chain.Change{Op: chain.OpTruncate, Tables: []string{"public.items", "public.log"}}))
	wantRows(t, tg, "SELECT (SELECT count(*) FROM items) + (SELECT count(*) FROM log)", "0")
}

func TestMarksWrittenAndReadBack(t *testing.T) {
	tg := openTarget(t)
	ctx := context.Background()
	l := openLane(t, tg, nil, nil)
	recs := chaintest.Txn(7, append(created(itemsTable), ins("public.items", txt("1", "a", "b")...))...)
	var marks target.MarkBatch
	for i := range recs {
		if err := l.Apply(ctx, &recs[i]); err != nil {
			t.Fatal(err)
		}
		if recs[i].Op != chain.OpBegin && recs[i].Op != chain.OpCommit {
			marks.Add("link-a", recs[i].Identity(), recs[i].Ordinal)
		}
	}
	marks.Add("link-a", chain.Identity{XID: 8, CommitLSN: 1 << 63}, 4)
	marks.Add("link-a", chain.Identity{XID: 8, CommitLSN: 1 << 63}, 6)
	// Transactions named by opaque IDs (format 2) with the same first ordinal.
	marks.Add("link-a", chain.Identity{Tx: "3e11fa47-71ca-11e1-9e33-c80aa9429562:23"}, 0)
	marks.Add("link-a", chain.Identity{Tx: "0-1-4711"}, 0)
	if err := l.Commit(ctx, target.Commit{Marks: &marks}); err != nil {
		t.Fatal(err)
	}
	got := map[chain.Identity][][2]uint32{}
	err := tg.State().ReadMarks(ctx, "s1", func(id chain.Identity, first, last uint32) {
		got[id] = append(got[id], [2]uint32{first, last})
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[chain.Identity][][2]uint32{
		{XID: 7, CommitLSN: 700}:                        {{0, 1}},
		{XID: 8, CommitLSN: 1 << 63}:                    {{4, 4}, {6, 6}},
		{Tx: "3e11fa47-71ca-11e1-9e33-c80aa9429562:23"}: {{0, 0}},
		{Tx: "0-1-4711"}:                                {{0, 0}},
	}
	if len(got) != len(want) {
		t.Fatalf("marks %v, want %v", got, want)
	}
	for id, r := range want {
		if len(got[id]) != len(r) || got[id][0] != r[0] || got[id][len(r)-1] != r[len(r)-1] {
			t.Fatalf("marks of %v: %v, want %v", id, got[id], r)
		}
	}

	// A position commit that prunes keeps only the named link's marks.
	var next target.MarkBatch
	next.Add("link-b", chain.Identity{XID: 9, CommitLSN: 900}, 0)
	if err := l.Commit(ctx, target.Commit{Marks: &next, Position: &target.StateRow{Token: "t", Checksum: "c"}, PruneMarksExcept: "link-b"}); err != nil {
		t.Fatal(err)
	}
	wantRows(t, tg, "SELECT stream_id, link_id, xid, commit_lsn, first_ordinal, ranges FROM sluice_cdc_apply_marks", "s1|link-b|9|900|0|[0,0]")
}

func TestLeaseErrorRollsBack(t *testing.T) {
	tg := openTarget(t)
	ctx := context.Background()
	setup := openLane(t, tg, nil, nil)
	applyAll(t, setup, chaintest.Txn(1, created(itemsTable)...))
	if err := tg.State().ReplaceState(ctx, "s1", &target.StateRow{Token: "mine", Checksum: "c"}); err != nil {
		t.Fatal(err)
	}
	fenced := errcode.New(errcode.BrokerFenced, "taken over")
	lease := func(row target.StateRow) error {
		if row.Token != "mine" {
			return fenced
		}
		return nil
	}
	l := openLane(t, tg, &chain.Schema{Tables: []chain.Table{itemsTable}}, lease)
	c := ins("public.items", txt("1", "a", "b")...)
	if err := l.Apply(ctx, &c); err != nil {
		t.Fatal(err)
	}
	// Another run takes the stream over before this one commits its
	// position: the lane's lock makes it wait, so it writes afterwards
	// here, on the lane's own connection, as the takeover would.
	if _, err := l.(*lane).conn.ExecContext(ctx, `UPDATE sluice_cdc_state SET token = 'theirs'`); err != nil {
		t.Fatal(err)
	}
	err := l.Commit(ctx, target.Commit{Position: &target.StateRow{Token: "mine", Checksum: "c2"}})
	if !errors.Is(err, fenced) {
		t.Fatalf("commit with a lost lease: %v", err)
	}
	wantRows(t, tg, "SELECT count(*) FROM items", "0")
	wantRows(t, tg, "SELECT token, checksum FROM sluice_cdc_state", "mine|c")
	// The lane stays failed: nothing of the rolled-back work is marked later.
	if err := l.Commit(ctx, target.Commit{}); !errors.Is(err, fenced) {
		t.Fatalf("a failed lane committed again: %v", err)
	}

	// A lease lost before the transaction begins refuses its first change.
	if err := tg.State().ReplaceState(ctx, "s1", &target.StateRow{Token: "theirs", Checksum: "c"}); err != nil {
		t.Fatal(err)
	}
	l2 := openLane(t, tg, &chain.Schema{Tables: []chain.Table{itemsTable}}, lease)
	if err := l2.Apply(ctx, &c); !errors.Is(err, fenced) {
		t.Fatalf("apply with a lost lease: %v", err)
	}
	wantRows(t, tg, "SELECT count(*) FROM items", "0")
}

func TestPositionAndRowsCommitTogether(t *testing.T) {
	tg := openTarget(t)
	ctx := context.Background()
	l := openLane(t, tg, nil, nil)
	recs := chaintest.Txn(1, append(created(itemsTable), ins("public.items", txt("1", "a", "b")...))...)
	for i := range recs {
		if err := l.Apply(ctx, &recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing is visible to another connection before the commit.
	if _, found, err := tg.State().ReadState(ctx, "s1"); err != nil || found {
		t.Fatalf("position before the commit: found %v, %v", found, err)
	}
	if err := l.Commit(ctx, target.Commit{Position: &target.StateRow{Token: "tok", Checksum: "sum"}}); err != nil {
		t.Fatal(err)
	}
	row, found, err := tg.State().ReadState(ctx, "s1")
	if err != nil || !found || row != (target.StateRow{Token: "tok", Checksum: "sum"}) {
		t.Fatalf("position %+v found %v: %v", row, found, err)
	}
	wantRows(t, tg, "SELECT id FROM items", "1")

	// Work closed without a commit leaves neither rows nor position.
	c := ins("public.items", txt("2", "b", "c")...)
	if err := l.Apply(ctx, &c); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	wantRows(t, tg, "SELECT id FROM items", "1")
}

func TestSchemaChanges(t *testing.T) {
	tg := openTarget(t)
	l := openLane(t, tg, nil, nil)
	v1 := chain.Table{Schema: "shop", Name: "orders", PrimaryKey: []string{"id"},
		Columns: []chain.Column{notNull(col("id", "integer", 23)), col("qty", "integer", 23), col("gone", "text", 25)}}
	applyAll(t, l, chaintest.Txn(1, append(created(v1), ins("shop.orders", txt("1", "5", "x")...), ins("shop.orders", txt("2", "7", "y")...))...))

	// Drop one column and add another: ALTER TABLE in place.
	v2 := v1
	v2.Columns = []chain.Column{v1.Columns[0], v1.Columns[1], col("added", "text", 25)}
	applyAll(t, l, chaintest.Txn(2, append(created(v2), ins("shop.orders", txt("3", "9", "z")...))...))
	wantRows(t, tg, "SELECT id, qty, quote(added) FROM shop__orders ORDER BY id", "1|5|NULL", "2|7|NULL", "3|9|'z'")

	// A type change SQLite cannot ALTER: the table is rebuilt, rows and key kept.
	v3 := v2
	v3.Columns = []chain.Column{v2.Columns[0], col("qty", "numeric(10,2)", 1700), v2.Columns[2]}
	applyAll(t, l, chaintest.Txn(3, append(created(v3), ins("shop.orders", txt("4", "1.50", "w")...), ins("shop.orders", txt("1", "5.00", "again")...))...))
	wantRows(t, tg, "SELECT id, quote(qty), quote(added) FROM shop__orders ORDER BY id",
		"1|'5.00'|'again'", "2|'7'|NULL", "3|'9'|'z'", "4|'1.50'|'w'")
	wantRows(t, tg, "SELECT name, type, pk FROM pragma_table_info('shop__orders') ORDER BY cid",
		"id|INTEGER|1", "qty|TEXT|0", "added|TEXT|0")
	wantRows(t, tg, "SELECT count(*) FROM sqlite_schema WHERE name LIKE '%sluice_rebuild%'", "0")

	// Re-applying the same schema change (a retried transaction) converges.
	applyAll(t, l, chaintest.Txn(3, created(v3)...))
	wantRows(t, tg, "SELECT count(*) FROM shop__orders", "4")
}

func TestTrackFollowsAnotherLane(t *testing.T) {
	tg := openTarget(t)
	l := openLane(t, tg, nil, nil)
	applyAll(t, l, chaintest.Txn(1, created(itemsTable)...))
	other := openLane(t, tg, nil, nil)
	rec := created(itemsTable)[0]
	other.Track(&rec)
	applyAll(t, other, chaintest.Txn(2, ins("public.items", txt("1", "a", "b")...)))
	wantRows(t, tg, "SELECT id FROM items", "1")
}

func TestRestoreIncrementalOnce(t *testing.T) {
	tg := openTarget(t)
	ctx := context.Background()
	s := &chain.Schema{Tables: []chain.Table{itemsTable}}
	if err := tg.Prepare(ctx, s, false); err != nil {
		t.Fatal(err)
	}
	ch := chaintest.Store(t)
	td := writeFull(t, ch, &itemsTable, 10, [][][]byte{{[]byte("1"), []byte("a"), nil}})
	if _, err := tg.LoadTable(ctx, ch, s, td, nil); err != nil {
		t.Fatal(err)
	}
	recs := chaintest.Txn(3, ins("public.items", txt("2", "b", "c")...),
		chain.Change{Op: chain.OpUpdate, Table: "public.items", New: txt("1", "A", "\x00")})
	m := chaintest.AddIncremental(t, ch, recs, 2)
	for i, want := range []int64{2, 0} {
		r, err := restoreApply(t, tg, ch, m, s, target.Subset{})
		if err != nil || r.Applied != want {
			t.Fatalf("attempt %d: applied %d changes, want %d; %v", i, r.Applied, want, err)
		}
	}
	wantRows(t, tg, "SELECT id, name FROM items ORDER BY id", "1|A", "2|b")
}

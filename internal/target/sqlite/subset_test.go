package sqlite

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// A restore of a subset creates and fills only the tables taken, and its
// incrementals apply only their changes: a table left out is never
// created, by the full or by a schema change, and a truncate touches only
// the tables taken.
func TestRestoreIncrementalOfASubset(t *testing.T) {
	tg := openTarget(t)
	ctx := context.Background()
	other := itemsTable
	other.Name = "other"
	full := &chain.Schema{Tables: []chain.Table{itemsTable, other}}
	sel, err := target.Subset{IncludeTables: []string{"items"}}.Select(full)
	if err != nil {
		t.Fatal(err)
	}
	s, left := sel.Schema(full)
	if len(left) != 1 || left[0] != "public.other" {
		t.Fatalf("left out %v, want public.other", left)
	}
	if err := tg.Prepare(ctx, s, false); err != nil {
		t.Fatal(err)
	}
	ch := chaintest.Store(t)
	td := writeFull(t, ch, &itemsTable, 10, [][][]byte{{[]byte("1"), []byte("a"), nil}})
	if _, err := tg.LoadTable(ctx, ch, s, td, nil); err != nil {
		t.Fatal(err)
	}
	later := itemsTable
	later.Name = "later"
	var recs []chain.Change
	recs = append(recs, chaintest.Txn(3, ins("public.items", txt("2", "b", "c")...), ins("public.other", txt("9", "x", "y")...))...)
	recs = append(recs, chaintest.Txn(4, created(later)...)...)
	recs = append(recs, chaintest.Txn(5, ins("public.later", txt("1", "l", "m")...))...)
	recs = append(recs, chaintest.Txn(6, chain.Change{Op: chain.OpTruncate, Tables: []string{"public.other", "public.items"}},
		ins("public.items", txt("3", "c", "d")...))...)
	m := chaintest.AddIncremental(t, ch, recs, 3)
	r, err := restoreApply(t, tg, ch, m, full, target.Subset{IncludeTables: []string{"items"}})
	if err != nil || r.Applied == 0 {
		t.Fatalf("applied %+v, %v", r, err)
	}
	wantRows(t, tg, "SELECT id, name FROM items ORDER BY id", "3|c")
	wantRows(t, tg, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sluice%' ORDER BY name", "items")
}

// The judgment leaves out the tables a subset does not take: a keyless
// table left out does not refuse the stream.
func TestJudgeLeavesOutTablesNotTaken(t *testing.T) {
	tg := openTarget(t)
	keyless := chain.Table{Schema: "public", Name: "log", Columns: []chain.Column{col("note", "text", 25)}}
	s := &chain.Schema{Tables: []chain.Table{itemsTable, keyless}}
	exec(t, tg, createTableSQL(&itemsTable, "items", false), `CREATE TABLE log (note TEXT)`)
	ch := chaintest.Store(t)
	recs := chaintest.Txn(1, ins("public.items", txt("1", "a", "b")...), ins("public.log", txt("x")...))
	for i := range recs {
		recs[i].Identified = false
	}
	m := chaintest.AddIncremental(t, ch, recs, 100)
	if _, err := tg.JudgeIncremental(context.Background(), ch, m, s, nil); !errcode.Is(err, errcode.BrokerKeylessTable) {
		t.Fatalf("without a subset: want BROKER-KEYLESS-TABLE, got %v", err)
	}
	sel, err := target.Subset{ExcludeTables: []string{"log"}}.Select(s)
	if err != nil {
		t.Fatal(err)
	}
	j, err := tg.JudgeIncremental(context.Background(), ch, m, s, sel)
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Tables) != 1 || j.Tables[0] != "public.items" {
		t.Errorf("judged tables %v, want public.items alone", j.Tables)
	}
}

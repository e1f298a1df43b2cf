package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// subsetRecords are five transactions over public.t (taken) and public.k
// (left out): mixed, only k, a truncate of both, a schema change of k with
// a row of t, and only k again (the incremental ends on a transaction that
// touches nothing taken).
func subsetRecords() []chain.Change {
	k := func(a string) chain.Change {
		return chain.Change{Op: chain.OpInsert, Table: "public.k", New: chaintest.Text(a, "x")}
	}
	kDef := testSchema().Tables[0]
	kDef.Columns = append(kDef.Columns, chain.Column{Name: "c", Type: "text"})
	var recs []chain.Change
	recs = append(recs, chaintest.Txn(1, ins("1", "a"), k("k1"), ins("2", "b"))...)
	recs = append(recs, chaintest.Txn(2, k("k2"), k("k3"))...)
	recs = append(recs, chaintest.Txn(3, chain.Change{Op: chain.OpTruncate, Tables: []string{"public.k", "public.t"}}, ins("3", "c"))...)
	recs = append(recs, chaintest.Txn(4, chain.Change{Op: chain.OpSchema, Table: "public.k", Schema: &kDef}, ins("4", "d"))...)
	recs = append(recs, chaintest.Txn(5, k("k4"))...)
	return recs
}

// withSubset gives the stream's position the subset sub.
func withSubset(t *testing.T, f *fakeTarget, sub target.Subset) {
	t.Helper()
	tok := f.token("s")
	tok.Subset = sub
	row, err := Row(tok)
	if err != nil {
		t.Fatal(err)
	}
	f.state["s"] = row
}

// A stream with a subset applies only the changes of the tables it takes:
// a truncate keeps only those, a schema change or a transaction of the
// others is skipped, and the position still moves past the whole
// incremental, serially and on lanes, with marks only for what was applied.
func TestSubsetAppliesOnlyTheTablesTaken(t *testing.T) {
	for _, sub := range []target.Subset{
		{IncludeTables: []string{"t"}},
		{ExcludeTables: []string{"public.k*"}},
	} {
		for _, lanes := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s, %d lanes", sub, lanes), func(t *testing.T) {
				ch, m := chaintest.WriteIncremental(t, subsetRecords(), 3)
				f := newFakeTarget()
				startAt(t, f, "full-1", "run-1")
				withSubset(t, f, sub)
				var truncated [][]string
				f.onApply = func(c *chain.Change) {
					if c.Op == chain.OpTruncate {
						truncated = append(truncated, slices.Clone(c.Tables))
					}
				}
				o := opts("run-1", lanes)
				o.Subset = sub
				res, err := ApplyIncremental(context.Background(), ch, m, testSchema(), f, o)
				if err != nil {
					t.Fatal(err)
				}
				// Applied: four inserts into t and the narrowed truncate.
				if res.Applied != 5 || res.Excluded != 5 || res.Skipped != 0 {
					t.Fatalf("result %+v, want 5 applied and 5 excluded", res)
				}
				for _, a := range f.committed {
					if a.op != chain.OpTruncate && a.table != "public.t" {
						t.Errorf("applied %c to %s, which the subset leaves out", a.op, a.table)
					}
				}
				if len(truncated) != 1 || !slices.Equal(truncated[0], []string{"public.t"}) {
					t.Errorf("truncates applied %v, want one of public.t alone", truncated)
				}
				tok := f.token("s")
				if tok.LastApplied != m.ID || tok.InProgress != nil || !tok.Subset.Equal(sub) {
					t.Fatalf("position %+v, want past %s keeping subset %s", tok, m.ID, sub)
				}
				for _, mk := range f.marks["s"] {
					if mk.id.XID == 2 || mk.id.XID == 5 {
						t.Errorf("mark %+v for a transaction that touched no table taken", mk)
					}
				}
			})
		}
	}
}

// A crash inside an incremental with a subset resumes from its checkpoint
// exactly once: the transactions before it are skipped again, those of
// tables left out included, and the rest applied once.
func TestSubsetCheckpointsAndResumesPastExcludedTransactions(t *testing.T) {
	ctx := context.Background()
	ch, m := chaintest.WriteIncremental(t, subsetRecords(), 4)
	f := newFakeTarget()
	startAt(t, f, "full-1", "run-1")
	sub := target.Subset{IncludeTables: []string{"public.t"}}
	withSubset(t, f, sub)
	// The fourth apply (insert 3 after the truncate) crashes.
	f.failAt = 4
	o := opts("run-1", 1)
	o.Subset, o.CheckpointChanges = sub, 1
	if _, err := ApplyIncremental(ctx, ch, m, testSchema(), f, o); !errors.Is(err, errCrash) {
		t.Fatalf("first run: want the crash, got %v", err)
	}
	tok := f.token("s")
	if tok.InProgress == nil || tok.InProgress.AppliedThrough != 5 {
		t.Fatalf("position %+v, want inside %s after transaction 1 (record 5)", tok, m.ID)
	}
	f.failAt = 0
	f.setOwner("s", "run-2")
	res, err := ApplyIncremental(ctx, ch, m, testSchema(), f, opts2("run-2", sub))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Resumed {
		t.Errorf("result %+v, want a resumed apply", res)
	}
	seen := map[[2]uint32]int{}
	for _, a := range f.committed {
		seen[[2]uint32{a.xid, a.ordinal}]++
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("change %v committed %d times", k, n)
		}
	}
	if len(f.committed) != 5 {
		t.Errorf("%d changes committed, want the 5 of public.t", len(f.committed))
	}
	if tok := f.token("s"); tok.LastApplied != m.ID || tok.InProgress != nil {
		t.Errorf("position %+v, want past %s", tok, m.ID)
	}
}

func opts2(owner string, sub target.Subset) Options {
	o := opts(owner, 1)
	o.Subset, o.CheckpointChanges = sub, 1
	return o
}

// An apply whose subset differs from the one the position was written
// under is refused before anything is applied; pattern order and
// repetitions do not count as a difference.
func TestSubsetChangedIsRefused(t *testing.T) {
	ch, m := chaintest.WriteIncremental(t, subsetRecords(), 3)
	for _, tc := range []struct {
		name          string
		recorded, run target.Subset
		refused       bool
	}{
		{"added to a stream of every table", target.Subset{}, target.Subset{IncludeTables: []string{"t"}}, true},
		{"dropped", target.Subset{ExcludeTables: []string{"k"}}, target.Subset{}, true},
		{"another pattern", target.Subset{IncludeTables: []string{"t"}}, target.Subset{IncludeTables: []string{"t", "k"}}, true},
		{"same patterns reordered", target.Subset{IncludeTables: []string{"t", "k"}}, target.Subset{IncludeTables: []string{"k", "t", "k"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeTarget()
			startAt(t, f, "full-1", "run-1")
			withSubset(t, f, tc.recorded)
			o := opts("run-1", 1)
			o.Subset = tc.run
			_, err := ApplyIncremental(context.Background(), ch, m, testSchema(), f, o)
			if tc.refused {
				if !errcode.Is(err, errcode.BrokerSubsetChanged) {
					t.Fatalf("want BROKER-SUBSET-CHANGED, got %v", err)
				}
				if len(f.committed) != 0 || f.token("s").LastApplied != "full-1" {
					t.Errorf("the refusal applied something: %d changes, position %+v", len(f.committed), f.token("s"))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A partition goes with its partitioned table, even one a schema change
// creates inside the incremental; a truncate naming only tables left out
// is dropped whole.
func TestSubsetPartitionsFollowTheirTable(t *testing.T) {
	parent := chain.Table{Schema: "public", Name: "events", PartitionKey: "RANGE (id)",
		Columns: []chain.Column{{Name: "id", Type: "integer", NotNull: true}}, PrimaryKey: []string{"id"}}
	p1 := parent
	p1.Name, p1.PartitionKey, p1.PartitionOf = "events_1", "", "public.events"
	p2 := p1
	p2.Name = "events_2"
	schema := &chain.Schema{Tables: []chain.Table{parent, p1, testSchema().Tables[0]}}
	sel, err := target.Subset{IncludeTables: []string{"events"}}.Select(schema)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Takes("public.events_1") || sel.Takes("public.k") {
		t.Fatalf("events_1 taken %t, k taken %t", sel.Takes("public.events_1"), sel.Takes("public.k"))
	}
	if _, ok := sel.Keep(&chain.Change{Op: chain.OpInsert, Table: "public.events_2"}); ok {
		t.Fatal("a row of events_2 kept before its schema change made it a partition of events")
	}
	if _, ok := sel.Keep(&chain.Change{Op: chain.OpSchema, Table: "public.events_2", Schema: &p2}); !ok {
		t.Fatal("the schema change creating partition events_2 was dropped")
	}
	if _, ok := sel.Keep(&chain.Change{Op: chain.OpInsert, Table: "public.events_2"}); !ok {
		t.Fatal("a row of the new partition events_2 was dropped")
	}
	if _, ok := sel.Keep(&chain.Change{Op: chain.OpTruncate, Tables: []string{"public.k"}}); ok {
		t.Fatal("a truncate of a table left out was kept")
	}
	sub, left := sel.Schema(schema)
	if len(sub.Tables) != 2 || !slices.Equal(left, []string{"public.k"}) {
		t.Fatalf("subset schema holds %d tables, left out %v; want events and events_1, k left out", len(sub.Tables), left)
	}
}

// The subset's schema drops the foreign keys that reference a table left
// out, and the sequences such a table owns.
func TestSubsetSchemaDropsReferencesToTablesLeftOut(t *testing.T) {
	schema := &chain.Schema{
		Tables: []chain.Table{
			{Schema: "public", Name: "orders", Constraints: []chain.Constraint{
				{Name: "orders_customer_fk", Type: "f", Definition: "FOREIGN KEY (customer_id) REFERENCES customers(id)"},
				{Name: "orders_item_fk", Type: "f", Definition: `FOREIGN KEY (item_id) REFERENCES "Shop".items(id) ON DELETE CASCADE`},
				{Name: "orders_qty_check", Type: "c", Definition: "CHECK (qty > 0)"},
			}},
			{Schema: "public", Name: "customers"},
			{Schema: "Shop", Name: "items"},
		},
		Sequences: []chain.Sequence{
			{Schema: "public", Name: "customers_id_seq", OwnedByTable: "customers"},
			{Schema: "public", Name: "orders_id_seq", OwnedByTable: "orders"},
			{Schema: "public", Name: "free_seq"},
		},
	}
	sel, err := target.Subset{ExcludeTables: []string{"public.customers"}}.Select(schema)
	if err != nil {
		t.Fatal(err)
	}
	sub, left := sel.Schema(schema)
	if !slices.Equal(left, []string{"public.customers"}) || len(sub.Tables) != 2 {
		t.Fatalf("left out %v, kept %d tables", left, len(sub.Tables))
	}
	var names []string
	for _, c := range sub.Tables[0].Constraints {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"orders_item_fk", "orders_qty_check"}) {
		t.Errorf("orders keeps constraints %v, want the reference to Shop.items and the check", names)
	}
	var seqs []string
	for _, q := range sub.Sequences {
		seqs = append(seqs, q.Name)
	}
	if !slices.Equal(seqs, []string{"orders_id_seq", "free_seq"}) {
		t.Errorf("sequences %v, want customers' own left out", seqs)
	}
	if len(schema.Tables[0].Constraints) != 3 {
		t.Error("the chain's schema was changed in place")
	}
}

package compact

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
)

// ops renders records as "op:key=value" for the folded rows.
func ops(recs []chain.Change) string {
	var out []string
	for _, c := range recs {
		s := string(rune(c.Op))
		img := c.New
		if c.Op == chain.OpDelete {
			img = c.Old
		}
		if len(img) > 0 {
			s += ":" + string(img[0].Data)
			if len(img) > 1 && img[1].Kind == chain.ValueText {
				s += "=" + string(img[1].Data)
			}
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func TestFoldPerKey(t *testing.T) {
	keyed := chaintest.KeyedTable()
	keyless := chain.Table{Schema: "public", Name: "k", Columns: keyed.Columns}
	twoUnique := chaintest.KeyedTable()
	twoUnique.Name = "u"
	twoUnique.Indexes = []chain.Index{{Name: "u_v", Columns: []string{"v"}, Unique: true}}
	schema := &chain.Schema{Tables: []chain.Table{keyless, keyed, twoUnique}}
	b := chaintest.NewBuilder(t, chaintest.Store(t), t0)
	on := func(table string, c chain.Change) chain.Change { c.Table = table; return c }
	unchanged := chaintest.Update(3, "")
	unchanged.New[1] = chain.Value{Kind: chain.ValueUnchanged}
	recs := append(b.Txn(
		chaintest.Insert(1, "a"), chaintest.Update(1, "b"), // insert then update: one insert
		chaintest.Insert(2, "x"), chaintest.Delete(2), // insert then delete: nothing
		chaintest.Update(3, "c"), unchanged, // updates: one update, the unchanged column kept
	), b.Txn(
		chaintest.Update(1, "c"),                        // across transactions
		on("public.k", chaintest.Insert(9, "kl")),       // a keyless table: a barrier
		chaintest.Delete(4), chaintest.Insert(4, "new"), // a replaced row: both kept
		on("public.u", chaintest.Insert(5, "u1")), on("public.u", chaintest.Update(5, "u2")), // two unique indexes: kept as they are
		chaintest.Update(3, "d"), chaintest.Delete(3), // updates then a delete: one delete
	)...)
	c := newCollapser(schema)
	for i := range recs {
		c.add(&recs[i])
	}
	out := c.records()
	// Before the barrier (the keyless insert) row 1 is one insert of its
	// last value and row 3 one update keeping "c" where the second left
	// the column alone; row 2 is gone. Row 3 then starts afresh.
	if got := ops(out); got != "B I:1=c U:3=c I:9=kl D:4 I:4=new I:5=u1 U:5=u2 D:3 C" {
		t.Fatalf("folded: %s", got)
	}
	for _, r := range out {
		if r.Identified || r.XID != 0 || r.Ordinal != 0 {
			t.Fatalf("a folded record keeps an identity: %+v", r)
		}
	}
	last := recs[len(recs)-1]
	if out[0].Op != chain.OpBegin || out[len(out)-1].Op != chain.OpCommit || out[len(out)-1].EndLSN != last.EndLSN || out[0].LSN != recs[0].LSN {
		t.Fatalf("frame: begin %+v commit %+v", out[0], out[len(out)-1])
	}
}

func TestSmartCompactionRecordsDroppedIdentities(t *testing.T) {
	ctx := context.Background()
	ch, b := twoSegments(t)
	cat := b.Cat
	first := cat.Segments[0].Incrementals[0].ID
	orig, _ := ch.GetManifest(ctx, first)
	res, err := Compact(ctx, ch, Options{Smart: true, Now: func() time.Time { return b.Now }})
	if err != nil || res.Segments[0].Rewritten != 5 || res.Segments[0].RecordsAfter >= res.Segments[0].RecordsBefore {
		t.Fatalf("smart compaction: %+v, %v", res.Segments, err)
	}
	after, _ := ch.LoadCatalog(ctx)
	m, err := ch.LinkManifest(ctx, after, first)
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != first || m.ApplyIdentity || m.Transactions != 1 || m.Changes != 2 || m.RecordsDigest() == orig.RecordsDigest() {
		t.Fatalf("smart-compacted incremental: identities %v, %d changes in %d transactions, digest %s (the original's %s)",
			m.ApplyIdentity, m.Changes, m.Transactions, m.RecordsDigest(), orig.RecordsDigest())
	}
	if err := ch.Verify(ctx, after, ""); err != nil {
		t.Fatal(err)
	}
	if f, err := ch.SeveredTransactions(ctx, after, nil); err != nil || len(f) != 0 {
		t.Fatalf("severed check after a smart compaction: %v %v", f, err)
	}
	// Compacted once, smart or plain, it is not compacted again.
	res, err = Compact(ctx, ch, Options{Smart: true, Now: func() time.Time { return b.Now }})
	if err != nil || res.Segments[0].Skipped != "compacted already" {
		t.Fatalf("again: %+v, %v", res.Segments, err)
	}
}

package mysql

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
)

func benchApplySchema() *chain.Schema {
	id := col("id", "bigint", 20)
	id.NotNull = true
	return &chain.Schema{Tables: []chain.Table{{Schema: "public", Name: "bench", PrimaryKey: []string{"id"},
		Columns: []chain.Column{id, col("a", "integer", 23), col("b", "text", 25), col("c", "timestamp with time zone", 1184), col("d", "numeric(12,2)", 1700)}}}}
}

// benchApplyChanges returns about n row changes to public.bench (60%
// inserts, 30% updates, 10% deletes of rows that exist at that point) in
// identified source transactions of 1 to 1000 changes.
func benchApplyChanges(n int) []chain.Change {
	r := rand.New(rand.NewPCG(1, 2))
	var out []chain.Change
	var live []int64
	next := int64(1)
	row := func(id int64) []chain.Value {
		return chaintest.Text(strconv.FormatInt(id, 10), strconv.Itoa(r.IntN(1_000_000)), "name-"+strconv.Itoa(r.IntN(1_000_000)),
			"2024-05-06 07:08:09.123456+00", strconv.Itoa(r.IntN(100000))+".25")
	}
	rows := 0
	for xid := uint32(1000); rows < n; xid++ {
		var txn []chain.Change
		size := 1 + r.IntN(1000)
		for ord := 0; ord < size && rows < n; ord++ {
			c := chain.Change{Table: "public.bench"}
			switch p := r.IntN(10); {
			case p < 6 || len(live) == 0:
				live = append(live, next)
				c.Op, c.New = chain.OpInsert, row(next)
				next++
			case p < 9:
				c.Op, c.New = chain.OpUpdate, row(live[r.IntN(len(live))])
				c.New[2] = chain.Value{Kind: chain.ValueUnchanged}
				c.OldKind, c.Old = 'K', chaintest.Text(string(c.New[0].Data), "\x00", "\x00", "\x00", "\x00")
			default:
				i := r.IntN(len(live))
				id := live[i]
				live[i] = live[len(live)-1]
				live = live[:len(live)-1]
				c.Op, c.OldKind, c.Old = chain.OpDelete, 'K', chaintest.Text(strconv.FormatInt(id, 10), "\x00", "\x00", "\x00", "\x00")
			}
			txn = append(txn, c)
			rows++
		}
		out = append(out, chaintest.Txn(xid, txn...)...)
	}
	return out
}

// BenchmarkApplyIncremental applies ~100k mixed row changes through the
// broker's dispatcher into MariaDB with 1 and 4 lanes, and reports row
// changes per second (go test -bench ApplyIncremental -benchtime 2x
// ./internal/target/mysql/).
func BenchmarkApplyIncremental(b *testing.B) {
	const n = 100_000
	recs := benchApplyChanges(n)
	ch, m := chaintest.WriteIncremental(b, recs, 20000)
	for _, lanes := range []int{1, 4} {
		b.Run("lanes="+strconv.Itoa(lanes), func(b *testing.B) {
			tg := openTarget(b)
			s := benchApplySchema()
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				if err := tg.Prepare(ctx, s, true); err != nil {
					b.Fatal(err)
				}
				if _, err := tg.LoadTable(ctx, chaintest.Store(b), s, chain.TableData{Table: "public.bench"}, nil); err != nil {
					b.Fatal(err)
				}
				row, err := apply.Row(apply.Token{Engine: apply.EngineBroker, Stream: testStream, ChainID: "c", LastApplied: testFull, Owner: testOwner})
				if err != nil {
					b.Fatal(err)
				}
				if err := tg.State().ReplaceState(ctx, testStream, &row); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := apply.ApplyIncremental(ctx, ch, m, s, tg, apply.Options{Stream: testStream, Owner: testOwner, ExpectedLast: testFull, Lanes: lanes}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "changes/s")
		})
	}
}

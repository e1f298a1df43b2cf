package sqlite

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/target"
)

var benchTable = chain.Table{Schema: "public", Name: "bench", PrimaryKey: []string{"id"},
	Columns: []chain.Column{notNull(col("id", "bigint", 20)), col("a", "integer", 23), col("b", "text", 25),
		col("c", "timestamp with time zone", 1184), col("d", "numeric(12,2)", 1700)}}

// benchWorkload returns about n row changes to public.bench in source
// transactions of 1 to 1000 changes: 60% inserts of new rows, 30% updates
// of live rows (one column left unchanged), 10% deletes of live rows. It
// returns the records, Begin and Commit included, and the row changes.
func benchWorkload(n int) ([]chain.Change, int) {
	r := rand.New(rand.NewPCG(3, 4))
	var recs []chain.Change
	var live []int64
	next, rows := int64(1), 0
	row := func(id int64) []chain.Value {
		return txt(strconv.FormatInt(id, 10), strconv.Itoa(r.IntN(1_000_000)), "name-"+strconv.Itoa(r.IntN(1_000_000)),
			"2024-05-06 07:08:09.123456+00", strconv.Itoa(r.IntN(100_000))+".25")
	}
	for xid := uint32(100); rows < n; xid++ {
		size := min(n-rows, 1+r.IntN(1000))
		txn := make([]chain.Change, 0, size)
		for range size {
			switch p := r.IntN(10); {
			case p < 6 || len(live) == 0:
				live = append(live, next)
				txn = append(txn, ins("public.bench", row(next)...))
				next++
			case p < 9:
				c := chain.Change{Op: chain.OpUpdate, Table: "public.bench", New: row(live[r.IntN(len(live))])}
				c.New[2] = toasted
				txn = append(txn, c)
			default:
				i := r.IntN(len(live))
				id := live[i]
				live[i] = live[len(live)-1]
				live = live[:len(live)-1]
				txn = append(txn, del("public.bench", txt(strconv.FormatInt(id, 10), "\x00", "\x00", "\x00", "\x00")))
			}
		}
		rows += size
		recs = append(recs, chaintest.Txn(xid, txn...)...)
	}
	return recs, rows
}

// benchApply applies recs through a lane of a new target, committing at
// the first source commit after every apply.DefaultCheckpointChanges row
// changes (as the broker does) and at the end, and returns the time the
// applying took.
func benchApply(b *testing.B, recs []chain.Change) time.Duration {
	b.Helper()
	ctx := context.Background()
	tg := openTarget(b)
	l := openLane(b, tg, nil, nil)
	applyAll(b, l, chaintest.Txn(1, created(benchTable)...))
	start := time.Now()
	pending := 0
	for i := range recs {
		if err := l.Apply(ctx, &recs[i]); err != nil {
			b.Fatal(err)
		}
		switch {
		case recs[i].Op != chain.OpCommit:
			pending++
		case pending >= apply.DefaultCheckpointChanges || i == len(recs)-1:
			if err := l.Commit(ctx, target.Commit{}); err != nil {
				b.Fatal(err)
			}
			pending = 0
		}
	}
	took := time.Since(start)
	if err := l.Close(ctx); err != nil {
		b.Fatal(err)
	}
	return took
}

// BenchmarkApply applies ~100k mixed row changes to a keyed table through
// a lane, in source transactions of 1–1000 changes, with
// row changes held back and sent as multi-row statements and with one
// statement a change, and reports both rates and their ratio.
func BenchmarkApply(b *testing.B) {
	recs, rows := benchWorkload(100_000)
	b.ResetTimer()
	var batched, single time.Duration
	for range b.N {
		batching = false
		single += benchApply(b, recs)
		batching = true
		batched += benchApply(b, recs)
	}
	rate := func(d time.Duration) float64 { return float64(rows) * float64(b.N) / d.Seconds() }
	b.ReportMetric(rate(batched), "batched-changes/s")
	b.ReportMetric(rate(single), "single-changes/s")
	b.ReportMetric(rate(batched)/rate(single), "speedup")
}

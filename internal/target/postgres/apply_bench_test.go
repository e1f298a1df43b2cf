package postgres

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/testenv"
)

const benchDDL = `CREATE TABLE public.bench (id bigint PRIMARY KEY, a integer, b text, c timestamptz, d numeric(12,2))`

func benchSchema() *chain.Schema {
	return &chain.Schema{Tables: []chain.Table{{Schema: "public", Name: "bench",
		Columns: []chain.Column{notNull(col("id", "bigint")), col("a", "integer"), col("b", "text"),
			col("c", "timestamp with time zone"), col("d", "numeric(12,2)")},
		PrimaryKey: []string{"id"}}}}
}

// benchChanges returns about n row changes to public.bench (60% inserts,
// 30% updates, 10% deletes, against rows that exist at that point) in
// identified source transactions of 1 to 1000 changes, and the number of
// row changes.
func benchChanges(n int) ([]chain.Change, int) {
	r := rand.New(rand.NewPCG(1, 2))
	var out []chain.Change
	var live []int64
	next := int64(1)
	rows := 0
	for xid := uint32(1000); rows < n; xid++ {
		size := 1 + r.IntN(1000)
		out = append(out, chain.Change{Op: chain.OpBegin, XID: xid, CommitLSN: uint64(xid), Identified: true})
		for ord := 0; ord < size && rows < n; ord++ {
			c := chain.Change{XID: xid, CommitLSN: uint64(xid), Ordinal: uint32(ord), Identified: true, Table: "public.bench"}
			p := r.IntN(10)
			switch {
			case p < 6 || len(live) == 0:
				id := next
				next++
				live = append(live, id)
				c.Op = chain.OpInsert
				c.New = benchRow(r, id)
			case p < 9:
				c.Op = chain.OpUpdate
				c.New = benchRow(r, live[r.IntN(len(live))])
				c.New[2] = toast
			default:
				i := r.IntN(len(live))
				id := live[i]
				live[i] = live[len(live)-1]
				live = live[:len(live)-1]
				c.Op = chain.OpDelete
				c.OldKind = 'K'
				c.Old = row(tv(strconv.FormatInt(id, 10)), null, null, null, null)
			}
			out = append(out, c)
			rows++
		}
		out = append(out, chain.Change{Op: chain.OpCommit, XID: xid, CommitLSN: uint64(xid), Identified: true})
	}
	return out, rows
}

func benchRow(r *rand.Rand, id int64) []chain.Value {
	return row(tv(strconv.FormatInt(id, 10)), tv(strconv.Itoa(r.IntN(1_000_000))),
		tv("name-"+strconv.Itoa(r.IntN(1_000_000))), tv("2024-05-06 07:08:09.123456+00"),
		tv(strconv.Itoa(r.IntN(100000))+".25"))
}

func benchTarget(b *testing.B) *pgx.Conn {
	b.Helper()
	admin := testenv.Admin(b) // skips (or fails under SLUICE_REQUIRE_SERVICES=1) without PostgreSQL
	admin.Close(context.Background())
	return targetDB(b, benchDDL)
}

// BenchmarkApply applies ~100k mixed row changes to a keyed table, in
// source transactions of 1–1000 changes, and reports row changes per second.
func BenchmarkApply(b *testing.B) {
	recs, rows := benchChanges(100_000)

	// The Applier alone, in one target transaction rolled back after each
	// round so every round starts from an empty table.
	b.Run("applier", func(b *testing.B) {
		conn := benchTarget(b)
		ctx := context.Background()
		b.ResetTimer()
		for range b.N {
			tx, err := conn.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			a := newApplier(benchSchema())
			for i := range recs {
				if err := a.Apply(ctx, tx, &recs[i]); err != nil {
					b.Fatal(err)
				}
			}
			if err := a.Flush(ctx, tx); err != nil {
				b.Fatal(err)
			}
			if err := tx.Rollback(ctx); err != nil {
				b.Fatal(err)
			}
			if err := a.Release(ctx, conn); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "changes/s")
	})

	// A restore's apply of an incremental end to end: chunks read from a file store, decoded,
	// applied and committed (the table is emptied between rounds, untimed),
	// with row changes held back and sent as set statements, and one
	// statement a change.
	for _, mode := range []string{"incremental", "incremental-unbatched"} {
		b.Run(mode, func(b *testing.B) {
			batching = mode == "incremental"
			defer func() { batching = true }()
			conn := benchTarget(b)
			ctx := context.Background()
			if !replicaRole(ctx, conn) {
				b.Fatal("the benchmark's role may not set session_replication_role")
			}
			ch, m := writeIncremental(b, recs, 20000)
			b.ResetTimer()
			for range b.N {
				if err := restoreIncremental(ctx, conn, ch, m, benchSchema(), nil); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if _, err := conn.Exec(ctx, "TRUNCATE public.bench"); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "changes/s")
		})
	}
}

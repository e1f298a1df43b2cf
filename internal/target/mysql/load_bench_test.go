package mysql

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
)

// BenchmarkLoad loads the same rows of a 9-column table into MariaDB
// through LOAD DATA LOCAL INFILE and through multi-row INSERTs, and
// reports rows/s of each (go test -bench Load -benchtime 3x
// ./internal/target/mysql/).
func BenchmarkLoad(b *testing.B) {
	id := col("id", "bigint", 20)
	id.NotNull = true
	tb := chain.Table{Schema: "public", Name: "items", PrimaryKey: []string{"id"}, Columns: []chain.Column{
		id, col("sku", "text", 25), col("qty", "integer", 23), col("price", "numeric(12,2)", 1700),
		col("weight", "double precision", 701), col("active", "boolean", 16), col("created", "timestamp with time zone", 1184),
		col("note", "text", 25), col("tag", "character varying(20)", 1043)}}
	s := &chain.Schema{Tables: []chain.Table{tb}}
	const rows = 100_000
	data := make([][][]byte, rows)
	for i := range data {
		data[i] = [][]byte{
			[]byte(fmt.Sprint(i + 1)), []byte(fmt.Sprintf("SKU-%08d", i)), []byte(fmt.Sprint(i % 1000)), []byte(fmt.Sprintf("%d.%02d", i%10000, i%100)),
			[]byte(fmt.Sprintf("%d.25", i%500)), []byte("t"), []byte("2026-01-02 03:04:05.123456+00"),
			[]byte("a note about the item, long enough to be realistic"), []byte("tag-x"),
		}
	}
	ch := chaintest.Store(b)
	td := chaintest.WriteFull(b, ch, &tb, 10_000, data)
	for _, mode := range []string{"infile", "insert"} {
		b.Run(mode, func(b *testing.B) {
			forceInsertLoad = mode == "insert"
			defer func() { forceInsertLoad = false }()
			tg := openTarget(b)
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				if err := tg.Prepare(ctx, s, true); err != nil {
					b.Fatal(err)
				}
				if n, err := tg.LoadTable(ctx, ch, s, td, nil); err != nil || n != rows {
					b.Fatalf("loaded %d rows: %v", n, err)
				}
			}
			b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

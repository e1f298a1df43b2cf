package mysql

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/source"
	"github.com/sluicehq/sluice/internal/testenv"
)

// BenchmarkFullBackup copies a 200,000-row table of common kinds (ints,
// decimal, text, datetime, double) into a folder chain; rows/s is the
// figure to compare across changes.
func BenchmarkFullBackup(b *testing.B) {
	db := testenv.CreateMySQLDB(b, "fullbench")
	pool := testenv.MySQL(b, db)
	for _, s := range []string{
		`CREATE TABLE t (id bigint PRIMARY KEY, a int, d decimal(12,2), v varchar(64), ts datetime(6), f double)`,
		`INSERT INTO t SELECT seq, seq % 1000, seq / 7, CONCAT('value-', seq), '2026-12-02 01:02:03.123456' + INTERVAL seq SECOND, seq / 3 FROM seq_1_to_200000`,
	} {
		if _, err := pool.Exec(s); err != nil {
			b.Fatal(err)
		}
	}
	src, err := source.Open(context.Background(), "mariadb", testenv.MySQLDSN(db), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		store, err := blobstore.Open(context.Background(), "file://"+b.TempDir(), blobstore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		m, err := src.FullBackup(context.Background(), chain.Open(store), source.FullOptions{AttemptID: fmt.Sprint("b", i)})
		if err != nil {
			b.Fatal(err)
		}
		if m.Rows != 200000 {
			b.Fatalf("%d rows", m.Rows)
		}
	}
	b.ReportMetric(float64(200000*b.N)/b.Elapsed().Seconds(), "rows/s")
}

package mysql

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/readback"
	"github.com/sluicehq/sluice/internal/value"
)

// `sluice verify` reads a MariaDB source's rows as neutral values, decoded
// as a full records them.
func TestSourceSnapshotReadsNeutralValues(t *testing.T) {
	f := newFixture(t, `CREATE TABLE t (id bigint unsigned PRIMARY KEY, d decimal(6,2), s set('a','b'), tm time, n int)`+";\n"+
		`INSERT INTO t VALUES (18446744073709551615, -12.50, 'a,b', '-01:00:00', NULL)`)
	ctx := context.Background()
	snap, err := f.src.(readback.SourceReader).OpenSourceSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close(ctx)
	s, err := snap.Schema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tb := s.Table(f.db + ".t")
	if tb == nil {
		t.Fatalf("no table t in %+v", s)
	}
	n, found, err := snap.Count(ctx, tb)
	if err != nil || !found || n != 1 {
		t.Fatalf("count %d %v %v", n, found, err)
	}
	var got []value.Value
	if err := snap.Scan(ctx, tb, func(row []value.Value) error { got = append(got, row...); return nil }); err != nil {
		t.Fatal(err)
	}
	if got[0].Uint != 18446744073709551615 || got[1].Text != "-12.50" || got[2].Text != "a,b" || got[3].Micros != -3600_000_000 || !got[4].Null {
		t.Fatalf("values %+v", got)
	}
}

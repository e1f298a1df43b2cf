package sqlite

import (
	"context"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
)

// A MySQL-family chain holds one database: its tables keep their bare
// names, and their indexes, which MySQL names per table, are named after
// their table so two tables' indexes of one name do not collide.
func TestMySQLFamilyTablesKeepTheirNames(t *testing.T) {
	tg := openTarget(t)
	ctx := context.Background()
	a := chaintest.MySQLKindsTable()
	b := chaintest.MySQLKindsTable()
	b.Name = "kinds2"
	s := &chain.Schema{Schemas: []string{"shop"}, Tables: []chain.Table{a, b}}
	if err := tg.Prepare(ctx, s, false); err != nil {
		t.Fatal(err)
	}
	for _, tb := range s.Tables {
		if _, err := tg.LoadTable(ctx, chaintest.Store(t), s, chain.TableData{Table: tb.QualifiedName()}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := tg.Finish(ctx, s); err != nil {
		t.Fatal(err)
	}
	want := []string{"kinds|table", "kinds2|table"}
	for _, tb := range s.Tables {
		for _, ix := range tb.Indexes {
			if ix.Expression {
				continue // a prefix index is not created (logged)
			}
			want = append(want, tb.Name+"__"+ix.Name+"|index")
		}
	}
	wantRows(t, tg, "SELECT name, type FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' AND name NOT LIKE 'sluice_%' ORDER BY name || '|' || type", sorted(want)...)
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	slices.Sort(out)
	return out
}

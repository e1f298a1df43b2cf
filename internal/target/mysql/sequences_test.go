package mysql

import (
	"context"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
)

// Recorded counters raise the AUTO_INCREMENT counter of a target table
// that has the column (a MySQL-family table's, a PostgreSQL serial's by its
// table) and never lower it; a table without the column, a free sequence
// and a missing table are skipped.
func TestRaiseSequences(t *testing.T) {
	ctx := context.Background()
	tg := openTarget(t)
	exec(t, tg,
		"CREATE TABLE orders (id bigint AUTO_INCREMENT PRIMARY KEY, v text)",
		"CREATE TABLE items (id int AUTO_INCREMENT PRIMARY KEY)",
		"CREATE TABLE plain (id int PRIMARY KEY)")
	s := &chain.Schema{
		Tables: []chain.Table{{Schema: "shop", Name: "orders", Dialect: chain.DialectMySQL}, {Schema: "shop", Name: "plain", Dialect: chain.DialectMySQL},
			{Schema: "public", Name: "items"}},
		Sequences: []chain.Sequence{{Schema: "public", Name: "items_id_seq", OwnedByTable: "items", OwnedByColumn: "id"}, {Schema: "public", Name: "free"}},
	}
	res, err := tg.RaiseSequences(ctx, s, map[string]int64{"shop.orders": 3000, "public.items_id_seq": 12, "shop.plain": 5,
		"public.free": 9, "shop.gone": 1}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"public.items_id_seq: unused → 12", "shop.orders: unused → 3000"}; !slices.Equal(res.Raised, want) {
		t.Errorf("raised %v, want %v", res.Raised, want)
	}
	if len(res.Skipped) != 3 {
		t.Errorf("skipped %v, want public.free, shop.gone and shop.plain", res.Skipped)
	}
	// Never lowered.
	if res, err = tg.RaiseSequences(ctx, s, map[string]int64{"shop.orders": 10}, 0, nil); err != nil || len(res.Raised) != 0 || len(res.Kept) != 1 {
		t.Fatalf("a lower value: %+v, %v", res, err)
	}
	exec(t, tg, "INSERT INTO orders (v) VALUES ('next')", "INSERT INTO items () VALUES ()")
	wantRows(t, tg.db, "SELECT id FROM orders", "3001")
	wantRows(t, tg.db, "SELECT id FROM items", "13")
	// A cutover's margin.
	res, err = tg.RaiseSequences(ctx, s, map[string]int64{"shop.orders": 3000}, 500, nil)
	if want := []string{"shop.orders: 3001 → 3500"}; err != nil || !slices.Equal(res.Raised, want) {
		t.Fatalf("with a margin: %+v, %v; want raised %v", res, err, want)
	}
	exec(t, tg, "INSERT INTO orders (v) VALUES ('after the margin')")
	wantRows(t, tg.db, "SELECT max(id) FROM orders", "3501")
}

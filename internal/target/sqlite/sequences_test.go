package sqlite

import (
	"context"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
)

// Recorded counters raise an AUTOINCREMENT table's sqlite_sequence row and
// never lower it; a rowid table (what the target creates), a free sequence
// and a missing table are skipped.
func TestRaiseSequences(t *testing.T) {
	ctx := context.Background()
	tg := openTarget(t)
	for _, stmt := range []string{
		`CREATE TABLE orders (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT)`,
		`CREATE TABLE fresh (id INTEGER PRIMARY KEY AUTOINCREMENT)`,
		`CREATE TABLE plain (id INTEGER PRIMARY KEY)`,
		`INSERT INTO orders (v) VALUES ('a')`,
	} {
		if _, err := tg.db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	s := &chain.Schema{
		Tables: []chain.Table{{Schema: "shop", Name: "orders", Dialect: chain.DialectMySQL}, {Schema: "public", Name: "fresh"},
			{Schema: "public", Name: "plain"}},
		Sequences: []chain.Sequence{{Schema: "public", Name: "fresh_id_seq", OwnedByTable: "fresh", OwnedByColumn: "id"},
			{Schema: "public", Name: "plain_id_seq", OwnedByTable: "plain", OwnedByColumn: "id"}, {Schema: "public", Name: "free"}},
	}
	res, err := tg.RaiseSequences(ctx, s, map[string]int64{"shop.orders": 3000, "public.fresh_id_seq": 7, "public.plain_id_seq": 5,
		"public.free": 9, "shop.gone": 1}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"public.fresh_id_seq: unused → 7", "shop.orders: 1 → 3000"}; !slices.Equal(res.Raised, want) {
		t.Errorf("raised %v, want %v", res.Raised, want)
	}
	if len(res.Skipped) != 3 {
		t.Errorf("skipped %v, want public.free, public.plain_id_seq and shop.gone", res.Skipped)
	}
	if res, err = tg.RaiseSequences(ctx, s, map[string]int64{"shop.orders": 10}, 0, nil); err != nil || len(res.Raised) != 0 || len(res.Kept) != 1 {
		t.Fatalf("a lower value: %+v, %v", res, err)
	}
	for _, stmt := range []string{`INSERT INTO orders (v) VALUES ('next')`, `INSERT INTO fresh DEFAULT VALUES`} {
		if _, err := tg.db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	wantRows(t, tg, "SELECT max(id) FROM orders", "3001")
	wantRows(t, tg, "SELECT id FROM fresh", "8")
	// A cutover's margin.
	res, err = tg.RaiseSequences(ctx, s, map[string]int64{"shop.orders": 3000}, 500, nil)
	if want := []string{"shop.orders: 3001 → 3500"}; err != nil || !slices.Equal(res.Raised, want) {
		t.Fatalf("with a margin: %+v, %v; want raised %v", res, err, want)
	}
	if _, err := tg.db.ExecContext(ctx, `INSERT INTO orders (v) VALUES ('after the margin')`); err != nil {
		t.Fatal(err)
	}
	wantRows(t, tg, "SELECT max(id) FROM orders", "3501")
}

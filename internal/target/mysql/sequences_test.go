package mysql

import (
	"context"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/value"
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

// A MySQL-family table's AUTO_INCREMENT column (recorded as identity d)
// is created AUTO_INCREMENT when it leads the primary key, so an
// application's insert on the target after a cutover takes the key after
// the raised counter; the column still takes the source's values as they
// are, 0 included. One behind another key column, and a PostgreSQL
// identity, stay plain. A schema change that modifies the column keeps
// its AUTO_INCREMENT, the chain's or an operator's.
func TestAutoIncrementColumnCarried(t *testing.T) {
	ctx := context.Background()
	tg := openTarget(t)
	auto := func(c chain.Column) chain.Column { c.NotNull, c.Identity = true, chain.IdentityByDefault; return c }
	ledger := chain.Table{Schema: "shop", Name: "ledger", Dialect: chain.DialectMySQL, PrimaryKey: []string{"id"},
		Columns: []chain.Column{auto(chaintest.MySQLColumn("id", "int(11)", chaintest.KindInt)), chaintest.MySQLColumn("note", "varchar(20)", value.Kind{Name: value.Text})}}
	behind := chain.Table{Schema: "shop", Name: "behind", Dialect: chain.DialectMySQL, PrimaryKey: []string{"a", "b"},
		Columns: []chain.Column{auto(chaintest.MySQLColumn("a", "int(11)", chaintest.KindInt)), auto(chaintest.MySQLColumn("b", "int(11)", chaintest.KindInt))}}
	behind.Columns[0].Identity = ""
	pgKind := value.Kind{Name: value.Int, Width: 64}
	pg := chain.Table{Schema: "public", Name: "pgident", PrimaryKey: []string{"id"},
		Columns: []chain.Column{{Name: "id", Type: "bigint", NotNull: true, Identity: chain.IdentityByDefault, Encoding: chain.EncodingText, Kind: &pgKind}}}
	s := &chain.Schema{Schemas: []string{"shop"}, Tables: []chain.Table{ledger, behind, pg}}
	if err := tg.Prepare(ctx, s, false); err != nil {
		t.Fatal(err)
	}
	for _, tb := range s.Tables {
		if _, err := tg.LoadTable(ctx, chaintest.Store(t), s, chain.TableData{Table: tb.QualifiedName()}, nil); err != nil {
			t.Fatal(err)
		}
	}
	extra := `SELECT TABLE_NAME, COLUMN_NAME, EXTRA FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND EXTRA LIKE '%auto_increment%' ORDER BY TABLE_NAME, COLUMN_NAME`
	wantRows(t, tg.db, extra, "ledger|id|auto_increment")

	exec(t, tg, "SET SESSION sql_mode = '"+sqlMode+"'", "INSERT INTO ledger VALUES (0, 'zero'), (41, 'source')")
	wantRows(t, tg.db, "SELECT id FROM ledger ORDER BY id", "0", "41")
	res, err := tg.RaiseSequences(ctx, s, map[string]int64{"shop.ledger": 3000}, 0, nil)
	if want := []string{"shop.ledger: 41 → 3000"}; err != nil || !slices.Equal(res.Raised, want) {
		t.Fatalf("raise: %+v, %v; want raised %v", res, err, want)
	}
	exec(t, tg, "INSERT INTO ledger (note) VALUES ('application')")
	wantRows(t, tg.db, "SELECT id FROM ledger WHERE note = 'application'", "3001")

	// The key widened on the source keeps AUTO_INCREMENT. An
	// AUTO_INCREMENT an operator gave a column is kept when a schema
	// change modifies it, and a column not leading the key gains none.
	wider := ledger
	wider.Columns = slices.Clone(ledger.Columns)
	wider.Columns[0] = auto(chaintest.MySQLColumn("id", "bigint(20)", chaintest.KindBigint))
	if err := converge(ctx, tg.db, tg.flavor, &ledger, &wider); err != nil {
		t.Fatal(err)
	}
	exec(t, tg, "ALTER TABLE behind MODIFY a int NOT NULL AUTO_INCREMENT")
	wideBehind := behind
	wideBehind.Columns = []chain.Column{chaintest.MySQLColumn("a", "bigint(20)", chaintest.KindBigint), auto(chaintest.MySQLColumn("b", "bigint(20)", chaintest.KindBigint))}
	wideBehind.Columns[0].NotNull = true
	if err := converge(ctx, tg.db, tg.flavor, &behind, &wideBehind); err != nil {
		t.Fatal(err)
	}
	wantRows(t, tg.db, `SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, EXTRA FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()
		AND TABLE_NAME IN ('ledger', 'behind', 'pgident') ORDER BY TABLE_NAME, COLUMN_NAME`,
		"behind|a|bigint(20)|auto_increment", "behind|b|bigint(20)|", "ledger|id|bigint(20)|auto_increment", "ledger|note|varchar(20)|", "pgident|id|bigint(20)|")
}

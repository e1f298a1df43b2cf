package mysql

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/value"
)

func TestNativeDecl(t *testing.T) {
	cases := []struct {
		k      value.Kind
		native string
		want   string // "" when the kind's mapping applies
	}{
		{chaintest.KindUInt, "int(10) unsigned", "INT UNSIGNED"},
		{chaintest.KindUTinyint, "tinyint(3) unsigned zerofill", "TINYINT UNSIGNED"},
		{chaintest.KindMediumint, "mediumint(9)", "MEDIUMINT"},
		{chaintest.KindBigint, "int(11)", ""},       // the kind disagrees
		{chaintest.KindUInt, "int(11)", ""},         // so does the sign
		{chaintest.KindSmallint, "year(4)", "YEAR"}, //
		{chaintest.KindSmallint, "year", "YEAR"},    //
		{chaintest.KindUSmallint, "year", ""},       //
		{value.Kind{Name: value.Decimal, Precision: 65, Scale: 30}, "decimal(65,30)", "DECIMAL(65,30)"},
		{value.Kind{Name: value.Decimal, Special: true}, "numeric", ""},
		{value.Kind{Name: value.Enum, Labels: []string{"a", "b'c"}}, "enum('a','b''c')", "enum('a','b''c')"},
		{value.Kind{Name: value.Enum}, "enum('a'); DROP TABLE x; -- ')", ""},
		{value.Kind{Name: value.Text}, "set('a','b','c')", "set('a','b','c')"},
		{value.Kind{Name: value.Text}, "char(3)", ""},
		{value.Kind{Name: value.Text}, "longtext", ""},
		{value.Kind{Name: value.Interval}, "time(6)", ""},
		{value.Kind{Name: value.Bytes}, "bit(10)", ""},
		{value.Kind{Name: value.UUID}, "uuid", ""},
	}
	for _, c := range cases {
		got, ok := nativeDecl(c.k, c.native)
		if !ok {
			got = ""
		}
		if got != c.want {
			t.Errorf("%s %q: %q, want %q", c.k, c.native, got, c.want)
		}
	}
}

// A table recorded from a MySQL-family source keeps its native integer,
// YEAR, DECIMAL, ENUM and SET types; every other column maps by kind.
func TestForeignTableColumnTypes(t *testing.T) {
	tg := openTarget(t)
	ctx := context.Background()
	tb := chaintest.MySQLKindsTable()
	s := &chain.Schema{Schemas: []string{"shop"}, Tables: []chain.Table{tb}}
	if err := tg.Prepare(ctx, s, false); err != nil {
		t.Fatal(err)
	}
	if _, err := tg.LoadTable(ctx, chaintest.Store(t), s, chain.TableData{Table: tb.QualifiedName()}, nil); err != nil {
		t.Fatal(err)
	}
	if err := tg.Finish(ctx, s); err != nil {
		t.Fatal(err)
	}
	wantRows(t, tg.db, `SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'kinds' AND COLUMN_NAME IN ('id','ti','tiu','mi','biu','dec','e','st','yr','tm','ts','u','bits')
		ORDER BY ORDINAL_POSITION`,
		"id|int(10) unsigned", "ti|tinyint(4)", "tiu|tinyint(3) unsigned", "mi|mediumint(9)", "biu|bigint(20) unsigned",
		"dec|decimal(65,30)", "bits|longblob", "e|enum('small','medium','large')", "st|set('a','b','c')",
		"ts|datetime(6)", "tm|varchar(64)", "yr|year(4)", "u|char(36)")
}

// A label added to a MySQL-family table's ENUM on the source arrives as a
// schema change, and the target's native ENUM takes it.
func TestForeignEnumLabelAdded(t *testing.T) {
	tg := openTarget(t)
	id := chaintest.MySQLColumn("id", "int(11)", chaintest.KindInt)
	id.NotNull = true
	size := func(native string, labels ...string) chain.Column {
		return chaintest.MySQLColumn("size", native, value.Kind{Name: value.Enum, Labels: labels})
	}
	tb := chain.Table{Schema: "shop", Name: "sized", Dialect: chain.DialectMySQL, PrimaryKey: []string{"id"},
		Columns: []chain.Column{id, size("enum('s','m')", "s", "m")}}
	s := &chain.Schema{Schemas: []string{"shop"}, Tables: []chain.Table{tb}}
	restoreEmpty(t, tg, s)
	next := tb
	next.Columns = []chain.Column{id, size("enum('s','m','xl')", "s", "m", "xl")}
	ch, m := chaintest.WriteIncremental(t, chaintest.GTIDTxn("0-1-5",
		ins(&tb, "1", "m"),
		chain.Change{Op: chain.OpSchema, Table: next.QualifiedName(), Schema: &next},
		ins(&next, "2", "xl")), 100)
	if err := applyOnce(tg, s, ch, m, 1); err != nil {
		t.Fatal(err)
	}
	wantRows(t, tg.db, `SELECT id, size FROM sized ORDER BY id`, "1|m", "2|xl")
	wantRows(t, tg.db, `SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sized' AND COLUMN_NAME = 'size'`,
		"enum('s','m','xl')")
}

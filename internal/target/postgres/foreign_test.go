package postgres

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/value"
)

func TestPgTypeOfKinds(t *testing.T) {
	cases := []struct {
		k    value.Kind
		want string
	}{
		{chaintest.KindTinyint, "smallint"}, {chaintest.KindUTinyint, "smallint"},
		{chaintest.KindSmallint, "smallint"}, {chaintest.KindUSmallint, "integer"},
		{chaintest.KindMediumint, "integer"}, {chaintest.KindUMediumint, "integer"},
		{chaintest.KindInt, "integer"}, {chaintest.KindUInt, "bigint"},
		{chaintest.KindBigint, "bigint"}, {chaintest.KindUBigint, "numeric(20,0)"},
		{value.Kind{Name: value.Decimal, Precision: 65, Scale: 30}, "numeric(65,30)"},
		{value.Kind{Name: value.Float, Width: 32}, "real"}, {value.Kind{Name: value.Float, Width: 64}, "double precision"},
		{value.Kind{Name: value.Enum, Labels: []string{"a"}}, "text"}, {value.Kind{Name: value.Bytes}, "bytea"},
		{value.Kind{Name: value.Timestamp}, "timestamp(6) without time zone"},
		{value.Kind{Name: value.TimestampTZ}, "timestamp(6) with time zone"},
		{value.Kind{Name: value.Interval}, "interval"}, {value.Kind{Name: value.JSON}, "json"},
		{value.Kind{Name: value.UUID}, "uuid"}, {value.Kind{Name: value.Date}, "date"},
	}
	for _, c := range cases {
		if got := pgType(c.k); got != c.want {
			t.Errorf("%s: %s, want %s", c.k, got, c.want)
		}
	}
}

// A foreign table becomes a PostgreSQL table built from its kinds and
// column lists: no MySQL text survives, generated columns and expression
// indexes are left out, index names are unique in the schema.
func TestNativeTable(t *testing.T) {
	tb := chaintest.MySQLKindsTable()
	gen := chaintest.MySQLColumn("twice", "int(11)", chaintest.KindInt)
	gen.Generated = "`i` * 2"
	tb.Columns = append(tb.Columns, gen)
	long := strings.Repeat("x", 60)
	tb.Indexes = append(tb.Indexes, chain.Index{Name: long + "1", Columns: []string{"i"}}, chain.Index{Name: long + "2", Columns: []string{"i"}},
		chain.Index{Name: "on_twice", Columns: []string{"twice"}})
	before := tb.Columns[1].Type
	n := nativeTable(&tb)
	if tb.Columns[1].Type != before || !tb.Foreign() {
		t.Fatal("nativeTable changed its argument")
	}
	if n.Foreign() || n.PrimaryKeyName != "" || len(n.Columns) != len(tb.Columns)-1 {
		t.Fatalf("native table: dialect %q, pk name %q, %d columns", n.Dialect, n.PrimaryKeyName, len(n.Columns))
	}
	for _, c := range n.Columns {
		if strings.ContainsAny(c.Type, "'`") || strings.Contains(c.Type, "unsigned") || c.Kind == nil || c.Generated != "" {
			t.Errorf("column %s: %+v", c.Name, c)
		}
	}
	var names []string
	for _, ix := range n.Indexes {
		names = append(names, ix.Name)
		if len(ix.Name) > pgIdentMax || !strings.HasPrefix(ix.Definition, "CREATE ") || !strings.Contains(ix.Definition, `"shop"."kinds"`) {
			t.Errorf("index %q: %s", ix.Name, ix.Definition)
		}
	}
	if len(names) != 4 || names[0] != "kinds_c" || names[1] != "kinds_e_yr" || names[2] == names[3] {
		t.Errorf("indexes %q", names)
	}
	if nativeTable(n) != n {
		t.Error("a native table is translated again")
	}
	s := &chain.Schema{Tables: []chain.Table{chaintest.KeyedTable()}}
	if nativeSchema(s) != s {
		t.Error("a schema without foreign tables is copied")
	}
}

// A foreign table restored, then changed by schema records through the
// batched apply path: created from kinds, its indexes under the target's
// names, a column retyped by its new kind and one added.
func TestForeignTableRestoreAndRetype(t *testing.T) {
	conn := targetDB(t, "")
	ctx := context.Background()
	tb := chaintest.MySQLKindsTable()
	// Without its unique index on c, the table's changes are batched (set
	// statements over arrays cast to each column's type).
	tb.Indexes = slices.DeleteFunc(tb.Indexes, func(ix chain.Index) bool { return ix.Unique })
	s := &chain.Schema{Schemas: []string{"shop"}, Tables: []chain.Table{tb}}
	ch := chaintest.Store(t)
	td := chaintest.WriteFullText(t, ch, &tb, 2, chaintest.MySQLKindsRows)
	if err := prepare(ctx, conn, s, false); err != nil {
		t.Fatal(err)
	}
	if _, err := loadTable(ctx, conn, ch, s, td, nil); err != nil {
		t.Fatal(err)
	}
	if err := finish(ctx, conn, s); err != nil {
		t.Fatal(err)
	}
	types := `SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
		WHERE a.attrelid = 'shop.kinds'::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attname IN ('ti','tiu','siu','miu','i','biu','dec','f','e','j','tm','ts','dtm','yr') ORDER BY a.attnum`
	wantRows(t, conn, types, "ti|smallint", "tiu|smallint", "siu|integer", "miu|integer", "i|integer", "biu|numeric(20,0)",
		"dec|numeric(65,30)", "f|real", "e|text", "j|json", "dtm|timestamp(6) without time zone", "ts|timestamp(6) with time zone", "tm|interval", "yr|smallint")
	wantRows(t, conn, `SELECT indexname FROM pg_indexes WHERE schemaname = 'shop' ORDER BY 1`, "kinds_e_yr", "kinds_pkey")
	wantRows(t, conn, `SELECT id, tm::text, biu::text FROM shop.kinds ORDER BY id`,
		"1|PT-838H-59M-59S|9223372036854775807", "2|PT838H59M59S|0", "3|<null>|<null>")

	next := tb
	next.Columns = slices.Clone(tb.Columns)
	next.Columns[4] = chaintest.MySQLColumn("siu", "int(10) unsigned", chaintest.KindUInt)
	next.Columns = append(next.Columns, chaintest.MySQLColumn("extra", "mediumint(8) unsigned", chaintest.KindUMediumint))
	a := newApplier(s)
	a.HoldBack(true)
	key := func(id string) []chain.Value {
		v := make([]string, len(next.Columns))
		for i := range v {
			v[i] = "\x00"
		}
		v[0] = id
		return chaintest.Text(v...)
	}
	full6 := append(slices.Clone(chaintest.MySQLKindsRows[0]), "16777215")
	full6[0], full6[4], full6[9] = "6", "4294967295", chaintest.MySQLUint64Max
	row6 := chaintest.Text(full6...)
	row7 := key("7")
	row7[4] = tv("0")
	applyTx(t, conn, a, chaintest.GTIDTxn("0-1-7",
		chain.Change{Op: chain.OpSchema, Table: next.QualifiedName(), Schema: &next},
		chain.Change{Op: chain.OpInsert, Table: next.QualifiedName(), New: row6},
		chain.Change{Op: chain.OpInsert, Table: next.QualifiedName(), New: row7},
		chain.Change{Op: chain.OpDelete, Table: next.QualifiedName(), OldKind: 'O', Old: key("3")},
	)...)
	wantRows(t, conn, `SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'shop.kinds'::regclass AND attname IN ('siu', 'extra') ORDER BY attnum`,
		"bigint", "integer")
	wantRows(t, conn, `SELECT id, siu, biu::text, extra FROM shop.kinds ORDER BY id`,
		"1|65535|9223372036854775807|<null>", "2|0|0|<null>", "6|4294967295|18446744073709551615|16777215", "7|0|<null>|<null>")
	wantRows(t, conn, `SELECT tm::text, dec::text, f::text, e, j::text, ts::text, bits::text FROM shop.kinds WHERE id = 6`,
		`PT-838H-59M-59S|99999999999999999999999999999999999.999999999999999999999999999999|1.5|large|{"a": [1, 2], "b": null}|2038-01-19 03:14:07.999999+00|\x03ff`)
	if ts := a.tables["shop.kinds"]; ts == nil || ts.batch <= 0 {
		t.Error("the table's changes were not batched")
	}
	// A failing change of a GTID-named transaction is named by its GTID.
	err := tryApply(conn, a, chaintest.GTIDTxn("0-1-8", chain.Change{Op: chain.OpInsert, Table: next.QualifiedName(), New: key("\x00")})...)
	if err == nil || !strings.Contains(err.Error(), "transaction 0-1-8, change 0") {
		t.Errorf("a NULL key: %v", err)
	}
	after := a.Schema().Table("shop.kinds")
	if after == nil || after.Foreign() || after.Columns[4].Type != "bigint" {
		t.Fatalf("applier's schema after the change: %+v", after)
	}
}

// A lane that does not apply a schema change itself tracks it (Track) as
// this target stores the table, so its set statements cast to PostgreSQL
// types, never to the source's (bigint(20)[] is not SQL).
func TestTrackedForeignSchemaChangeIsNative(t *testing.T) {
	a := newApplier(nil)
	tb := chaintest.MySQLKindsTable()
	a.Track(&chain.Change{Op: chain.OpSchema, Table: tb.QualifiedName(), Schema: &tb})
	ts := a.tables[tb.QualifiedName()]
	if ts == nil {
		t.Fatal("the schema change was not tracked")
	}
	for _, c := range ts.cols {
		if c.Type != pgType(c.NeutralKind()) {
			t.Errorf("column %s tracked as %q, want %q", c.Name, c.Type, pgType(c.NeutralKind()))
		}
	}
}

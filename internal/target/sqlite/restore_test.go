package sqlite

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
)

// kindsTable has a column of every neutral kind; kindsRow is a row of
// them as PostgreSQL sends them, and kindsWant what SQLite must hold
// (quote() of each column).
var kindsTable = chain.Table{Schema: "public", Name: "kinds", PrimaryKey: []string{"id"}, Columns: []chain.Column{
	notNull(binCol("id", "bigint", 20)),
	col("i2", "smallint", 21),
	col("num", "numeric(30,5)", 1700),
	col("numnan", "numeric", 1700),
	binCol("f8", "double precision", 701),
	col("f4", "real", 700),
	binCol("b", "boolean", 16),
	binCol("t", "text", 25),
	binCol("by", "bytea", 17),
	col("byt", "bytea", 17),
	col("d", "date", 1082),
	col("dbc", "date", 1082),
	col("dinf", "date", 1082),
	col("ts", "timestamp without time zone", 1114),
	col("tstz", "timestamp with time zone", 1184),
	col("tsinf", "timestamp with time zone", 1184),
	col("tm", "time without time zone", 1083),
	col("tmtz", "time with time zone", 1266),
	col("iv", "interval", 1186),
	col("u", "uuid", 2950),
	col("j", "jsonb", 3802),
	col("e", "public.mood", 16390),
	col("arr", "integer[]", 1007),
	col("tarr", "text[]", 1009),
	col("arr2", "integer[]", 1007),
	col("ip", "inet", 869),
}}

var kindsSchema = &chain.Schema{Tables: []chain.Table{kindsTable}, Enums: []chain.Enum{{Schema: "public", Name: "mood", Labels: []string{"sad", "happy"}}}}

func kindsRow(id int64) [][]byte {
	return [][]byte{
		pgInt8(id),
		[]byte("-32768"),
		[]byte("12345678901234567890.12345"),
		[]byte("NaN"),
		pgFloat8(math.Inf(1)),
		[]byte("1.5"),
		pgBool(true),
		[]byte("héllo 'q'"),
		{0x00, 0x01, 0xff},
		[]byte(`\x00ff`),
		[]byte("2024-02-29"),
		[]byte("0044-03-15 BC"),
		[]byte("infinity"),
		[]byte("2024-02-29 13:14:15.5"),
		[]byte("2024-02-29 13:14:15.123456+00"),
		[]byte("-infinity"),
		[]byte("13:14:15"),
		[]byte("13:14:15+05:30"),
		[]byte("P1Y2M3DT4H5M6.5S"),
		[]byte("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
		[]byte(`{"a": [1, 2]}`),
		[]byte("happy"),
		[]byte("{1,NULL,3}"),
		[]byte(`{"a b",c,NULL}`),
		[]byte("{{1,2},{3,4}}"),
		[]byte("10.0.0.1/8"),
	}
}

var kindsWant = []string{
	"1",
	"-32768",
	"'12345678901234567890.12345'",
	"'NaN'",
	"9.0e+999", // quote()'s spelling of a REAL +Inf
	"1.5",
	"1",
	"'héllo ''q'''",
	"X'0001FF'",
	"X'00FF'",
	"'2024-02-29'",
	"'-0043-03-15'",
	"'infinity'",
	"'2024-02-29 13:14:15.500000'",
	"'2024-02-29T13:14:15.123456Z'",
	"'-infinity'",
	"'13:14:15.000000'",
	"'13:14:15.000000+05:30'",
	"'P1Y2M3DT4H5M6.5S'",
	"'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'",
	`'{"a": [1, 2]}'`,
	"'happy'",
	"'[1,null,3]'",
	`'["a b","c",null]'`,
	"'[[1,2],[3,4]]'",
	"'10.0.0.1/8'",
}

func quotedColumns(tb *chain.Table) string {
	parts := make([]string, len(tb.Columns))
	for i, c := range tb.Columns {
		parts[i] = "quote(" + quoteIdent(c.Name) + ")"
	}
	return strings.Join(parts, ", ")
}

func TestRestoreEveryKind(t *testing.T) {
	tg := openTarget(t)
	ch := chaintest.Store(t)
	nulls := make([][]byte, len(kindsTable.Columns))
	nulls[0] = pgInt8(2)
	td := writeFull(t, ch, &kindsTable, 1, [][][]byte{kindsRow(1), nulls})
	restore(t, tg, ch, kindsSchema, map[string]chain.TableData{td.Table: td})

	nullWant := make([]string, len(kindsWant))
	for i := range nullWant {
		nullWant[i] = "NULL"
	}
	nullWant[0] = "2"
	wantRows(t, tg, "SELECT "+quotedColumns(&kindsTable)+" FROM kinds ORDER BY id",
		strings.Join(kindsWant, "|"), strings.Join(nullWant, "|"))
	// Decimals are TEXT, never REAL; the float infinity is a REAL.
	wantRows(t, tg, "SELECT typeof(num), typeof(f8), typeof(by), typeof(b) FROM kinds WHERE id = 1", "text|real|blob|integer")
	var f float64
	if err := tg.db.QueryRow("SELECT f8 FROM kinds WHERE id = 1").Scan(&f); err != nil || !math.IsInf(f, 1) {
		t.Fatalf("f8 reads back as %v (%v), want +Inf", f, err)
	}
}

// TestChangesRenderLikeTheFull applies the kinds row as a change record
// (all text) and expects the same stored values as the full's load.
func TestChangesRenderLikeTheFull(t *testing.T) {
	tg := openTarget(t)
	row := kindsRow(1)
	vals := make([]chain.Value, len(row))
	for i, v := range row {
		vals[i] = chain.Value{Kind: chain.ValueText, Data: v}
	}
	vals[0] = txt("1")[0]
	vals[4] = txt("Infinity")[0]
	vals[6] = txt("t")[0]
	vals[8] = txt(`\x0001ff`)[0]
	if err := tg.Prepare(context.Background(), kindsSchema, false); err != nil {
		t.Fatal(err)
	}
	rec := chain.Change{Op: chain.OpSchema, Table: kindsTable.QualifiedName(), Schema: &kindsTable}
	l := openLane(t, tg, &chain.Schema{Enums: kindsSchema.Enums}, nil)
	applyAll(t, l, chaintest.Txn(5, rec, ins("public.kinds", vals...)))
	wantRows(t, tg, "SELECT "+quotedColumns(&kindsTable)+" FROM kinds", strings.Join(kindsWant, "|"))
}

func TestNumericStaysExact(t *testing.T) {
	tg := openTarget(t)
	tb := chain.Table{Schema: "public", Name: "money", Columns: []chain.Column{col("n", "numeric", 1700)}}
	s := &chain.Schema{Tables: []chain.Table{tb}}
	ch := chaintest.Store(t)
	td := writeFull(t, ch, &tb, 10, [][][]byte{{[]byte("12345678901234567890.12345")}, {[]byte("-0.000000000000000000001")}})
	restore(t, tg, ch, s, map[string]chain.TableData{td.Table: td})
	wantRows(t, tg, "SELECT n, typeof(n) FROM money ORDER BY rowid", "12345678901234567890.12345|text", "-0.000000000000000000001|text")
	// An arithmetic reader would round it; the stored text is exact.
	wantRows(t, tg, "SELECT n = '12345678901234567890.12345' FROM money WHERE rowid = 1", "1")
}

func TestNaNFloatRefused(t *testing.T) {
	tb := chain.Table{Schema: "public", Name: "floats", Columns: []chain.Column{binCol("f", "double precision", 701)}}
	s := &chain.Schema{Tables: []chain.Table{tb}}

	t.Run("full", func(t *testing.T) {
		tg := openTarget(t)
		ch := chaintest.Store(t)
		td := writeFull(t, ch, &tb, 10, [][][]byte{{pgFloat8(1)}, {pgFloat8(math.NaN())}})
		if err := tg.Prepare(context.Background(), s, false); err != nil {
			t.Fatal(err)
		}
		_, err := tg.LoadTable(context.Background(), ch, s, td, nil)
		wantCode(t, err, errcode.TargetValueRefused)
		for _, want := range []string{"public.floats", "column f", "NaN"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("refusal %q does not name %q", err, want)
			}
		}
		// The whole load rolled back, its CREATE TABLE included.
		wantRows(t, tg, "SELECT count(*) FROM sqlite_schema WHERE name = 'floats'", "0")
	})
	t.Run("change", func(t *testing.T) {
		tg := openTarget(t)
		// The lane's schema knows the table; the schema change record
		// creates it on the target.
		l := openLane(t, tg, s, nil)
		rec := chain.Change{Op: chain.OpSchema, Table: tb.QualifiedName(), Schema: &tb}
		ctx := context.Background()
		if err := l.Apply(ctx, &rec); err != nil {
			t.Fatal(err)
		}
		c := ins("public.floats", txt("NaN")...)
		err := l.Apply(ctx, &c)
		wantCode(t, err, errcode.TargetValueRefused)
		if !strings.Contains(err.Error(), "public.floats, column f") {
			t.Errorf("refusal %q does not name the table and column", err)
		}
	})
}

func TestPrepareRefusesTablesWithRows(t *testing.T) {
	tg := openTarget(t)
	ch := chaintest.Store(t)
	tb := chain.Table{Schema: "public", Name: "items", Columns: []chain.Column{col("id", "bigint", 20)}}
	s := &chain.Schema{Tables: []chain.Table{tb}}
	td := writeFull(t, ch, &tb, 10, [][][]byte{{[]byte("1")}})
	restore(t, tg, ch, s, map[string]chain.TableData{td.Table: td})

	wantCode(t, tg.Prepare(context.Background(), s, false), errcode.TargetNotEmpty)
	if err := tg.Prepare(context.Background(), s, true); err != nil {
		t.Fatal(err)
	}
	wantRows(t, tg, "SELECT count(*) FROM sqlite_schema WHERE name = 'items'", "0")
}

func TestFinishKeepsColumnIndexesOnly(t *testing.T) {
	tg := openTarget(t)
	ch := chaintest.Store(t)
	tb := chain.Table{Schema: "app", Name: "users", PrimaryKey: []string{"id"},
		Columns: []chain.Column{notNull(col("id", "integer", 23)), notNull(col("email", "text", 25)), col("name", "text", 25)},
		Indexes: []chain.Index{
			{Name: "users_email_key", Columns: []string{"email"}, Unique: true},
			{Name: "users_name_idx", Columns: []string{"name"}},
			{Name: "users_lower_idx", Unique: true, Expression: true},
			{Name: "users_active_idx", Columns: []string{"name"}, Unique: true, Partial: true},
		}}
	s := &chain.Schema{Tables: []chain.Table{tb}}
	td := writeFull(t, ch, &tb, 10, [][][]byte{{[]byte("1"), []byte("a@x"), nil}})
	restore(t, tg, ch, s, map[string]chain.TableData{td.Table: td})
	wantRows(t, tg, `SELECT name, "unique" FROM pragma_index_list('app__users') WHERE origin = 'c' ORDER BY name`,
		"app__users_email_key|1", "app__users_name_idx|0")
}

func TestNameCollisionsRefused(t *testing.T) {
	tg := openTarget(t)
	one := []chain.Column{col("x", "text", 25)}
	for name, s := range map[string]*chain.Schema{
		"schema mapping": {Tables: []chain.Table{{Schema: "public", Name: "a__b", Columns: one}, {Schema: "a", Name: "b", Columns: one}}},
		"case":           {Tables: []chain.Table{{Schema: "public", Name: "Items", Columns: one}, {Schema: "public", Name: "items", Columns: one}}},
		"columns":        {Tables: []chain.Table{{Schema: "public", Name: "t", Columns: []chain.Column{col("X", "text", 25), col("x", "text", 25)}}}},
		"control table":  {Tables: []chain.Table{{Schema: "public", Name: "sluice_cdc_state", Columns: one}}},
		"reserved":       {Tables: []chain.Table{{Schema: "public", Name: "sqlite_stat9", Columns: one}}},
	} {
		t.Run(name, func(t *testing.T) {
			wantCode(t, tg.Prepare(context.Background(), s, false), errcode.SourceSchemaUnsupported)
		})
	}
}

// TestUserTypesInBinary: in a chain recorded without kinds, a binary enum
// column loads its labels, and a binary column of another user-defined
// type (a domain over bigint here) is refused, never stored as garbage.
func TestUserTypesInBinary(t *testing.T) {
	tb := chain.Table{Schema: "public", Name: "typed", Columns: []chain.Column{binCol("mood", "public.mood", 16390), binCol("amount", "public.posint", 16400)}}
	s := &chain.Schema{Tables: []chain.Table{tb}, Enums: kindsSchema.Enums,
		Types: []chain.UserType{{Schema: "public", Name: "posint", Kind: chain.TypeDomain, Definition: "CREATE DOMAIN public.posint AS bigint"}}}
	ch := chaintest.Store(t)

	tg := openTarget(t)
	td := writeFull(t, ch, &tb, 10, [][][]byte{{[]byte("sad"), nil}})
	restore(t, tg, ch, s, map[string]chain.TableData{td.Table: td})
	wantRows(t, tg, "SELECT mood, quote(amount) FROM typed", "sad|NULL")

	tg = openTarget(t)
	td = writeFull(t, ch, &tb, 10, [][][]byte{{[]byte("sad"), pgInt8(5)}})
	if err := tg.Prepare(context.Background(), s, false); err != nil {
		t.Fatal(err)
	}
	_, err := tg.LoadTable(context.Background(), ch, s, td, nil)
	wantCode(t, err, errcode.TargetValueRefused)
	if !strings.Contains(err.Error(), "column amount") {
		t.Fatalf("refusal %q does not name the column", err)
	}
}

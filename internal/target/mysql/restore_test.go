package mysql

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
	"github.com/sluicehq/sluice/internal/value"
)

func binCol(name, typ string, oid uint32) chain.Column {
	c := col(name, typ, oid)
	c.Encoding = chain.EncodingBinary
	return c
}

func notNull(c chain.Column) chain.Column {
	c.NotNull = true
	return c
}

func pgInt8(v int64) []byte     { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
func pgFloat8(f float64) []byte { return binary.BigEndian.AppendUint64(nil, math.Float64bits(f)) }

// kindsTable has a column of every neutral kind a PostgreSQL source
// records, some in binary as a full records them.
var kindsTable = chain.Table{Schema: "public", Name: "kinds", PrimaryKey: []string{"id"}, Columns: []chain.Column{
	notNull(binCol("id", "bigint", 20)),
	col("i2", "smallint", 21),
	col("num", "numeric(30,5)", 1700),
	col("numu", "numeric", 1700),
	binCol("f8", "double precision", 701),
	col("f4", "real", 700),
	col("b", "boolean", 16),
	binCol("t", "text", 25),
	col("vc", "character varying(12)", 1043),
	col("ch", "character(4)", 1042),
	binCol("by", "bytea", 17),
	col("d", "date", 1082),
	col("ts", "timestamp without time zone", 1114),
	col("tstz", "timestamp with time zone", 1184),
	col("tm", "time without time zone", 1083),
	col("tmtz", "time with time zone", 1266),
	col("iv", "interval", 1186),
	col("u", "uuid", 2950),
	col("j", "jsonb", 3802),
	col("e", "public.mood", 16390),
	col("arr", "integer[]", 1007),
	col("tarr", "text[]", 1009),
	col("ip", "inet", 869),
}}

var kindsSchema = &chain.Schema{Tables: []chain.Table{kindsTable}, Enums: []chain.Enum{{Schema: "public", Name: "mood", Labels: []string{"sad", "happy"}}}}

func kindsRow(id int64) [][]byte {
	return [][]byte{
		pgInt8(id), []byte("-32768"), []byte("1234567890123456789012345.12345"), []byte("1.50"),
		pgFloat8(-2.25e100), []byte("1.1"), []byte("t"), []byte("héllo\t'q'\n\\"), []byte("twelve chars"), []byte("ab  "),
		{0x00, 0x01, 0xff}, []byte("2024-02-29"), []byte("2024-02-29 13:14:15.5"), []byte("2024-02-29 13:14:15.123456+00"),
		[]byte("24:00:00"), []byte("13:14:15+05:30"), []byte("P1Y2M3DT4H5M6.5S"), []byte("ECCBC87E-4B5C-E2FE-2830-8FD9F2A7BAF3"),
		[]byte(`{"a": [1, 2]}`), []byte("happy"), []byte("{1,NULL,3}"), []byte(`{"a b",c,NULL}`), []byte("10.0.0.1/8"),
	}
}

// restoreRows restores s with the given rows of its one table.
func restoreRows(t *testing.T, tg *Target, s *chain.Schema, rows [][][]byte) {
	t.Helper()
	ctx := context.Background()
	ch := chaintest.Store(t)
	tb := &s.Tables[0]
	td := chaintest.WriteFull(t, ch, tb, 2, rows)
	if err := tg.Prepare(ctx, s, false); err != nil {
		t.Fatal(err)
	}
	if _, err := tg.LoadTable(ctx, ch, s, td, nil); err != nil {
		t.Fatal(err)
	}
	if err := tg.Finish(ctx, s); err != nil {
		t.Fatal(err)
	}
}

// A full's row of every kind loads into the documented MySQL types and
// reads back, through its kind, as the value the source recorded, through
// LOAD DATA LOCAL INFILE and through multi-row INSERTs alike.
func TestRestoreEveryKind(t *testing.T) {
	t.Run("infile", restoreEveryKind)
	t.Run("inserts", func(t *testing.T) {
		forceInsertLoad = true
		defer func() { forceInsertLoad = false }()
		restoreEveryKind(t)
	})
}

func restoreEveryKind(t *testing.T) {
	tg := openTarget(t)
	nulls := make([][]byte, len(kindsTable.Columns))
	nulls[0] = pgInt8(2)
	restoreRows(t, tg, kindsSchema, [][][]byte{kindsRow(1), nulls, kindsRow(3)})
	wantRows(t, tg.db, `SELECT GROUP_CONCAT(CONCAT(COLUMN_NAME, ' ', COLUMN_TYPE) ORDER BY ORDINAL_POSITION SEPARATOR ', ')
		FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'kinds'`,
		"id bigint(20), i2 smallint(6), num decimal(30,5), numu decimal(65,30), f8 double, f4 float, b tinyint(1), t longtext, "+
			"vc varchar(12), ch varchar(4), by longblob, d date, ts datetime(6), tstz datetime(6), tm time(6), tmtz varchar(32), "+
			"iv varchar(64), u char(36), j longtext, e varchar(255), arr longtext, tarr longtext, ip longtext")
	wantRows(t, tg.db, "SELECT num, numu, b, ch, HEX(`by`), d, ts, tstz, tm, tmtz, iv, u, arr, tarr FROM kinds WHERE id = 1",
		"1234567890123456789012345.12345|1.500000000000000000000000000000|1|ab  |0001FF|2024-02-29|2024-02-29 13:14:15.500000|"+
			"2024-02-29 13:14:15.123456|24:00:00.000000|13:14:15.000000+05:30|P1Y2M3DT4H5M6.5S|eccbc87e-4b5c-e2fe-2830-8fd9f2a7baf3|"+
			`[1,null,3]|["a b","c",null]`)
	got, err := tg.ReadRows(context.Background(), withKinds(kindsSchema, &kindsTable))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d rows read back, want 3", len(got))
	}
	want := []string{"1", "-32768", "1234567890123456789012345.12345", "1.5", "-2.25e+100", "1.1", "t", "héllo\t'q'\n\\", "twelve chars", "ab  ",
		`\x0001ff`, "2024-02-29", "2024-02-29 13:14:15.5", "2024-02-29 13:14:15.123456+00", "24:00:00", "13:14:15+05:30",
		"P1Y2M3DT4H5M6.5S", "eccbc87e-4b5c-e2fe-2830-8fd9f2a7baf3", `{"a": [1, 2]}`, "happy", "{1,NULL,3}", `{"a b",c,NULL}`, "10.0.0.1/8"}
	kt := withKinds(kindsSchema, &kindsTable)
	for i, v := range got[0] {
		b, err := value.EncodePGText(kt.Columns[i].NeutralKind(), v)
		if err != nil {
			t.Fatalf("column %s: %v", kt.Columns[i].Name, err)
		}
		if string(b) != want[i] {
			t.Errorf("column %s reads back as %q, want %q", kt.Columns[i].Name, b, want[i])
		}
	}
	for i, v := range got[1][1:] {
		if !v.Null {
			t.Errorf("column %s of the NULL row reads back as %+v", kt.Columns[i+1].Name, v)
		}
	}
}

// A value the mapping cannot hold refuses the whole load, naming table,
// column and value; nothing is left half-loaded.
func TestLoadRefusesNaN(t *testing.T) {
	tg := openTarget(t)
	tb := chain.Table{Schema: "public", Name: "floats", Columns: []chain.Column{binCol("f", "double precision", 701)}}
	s := &chain.Schema{Tables: []chain.Table{tb}}
	ch := chaintest.Store(t)
	td := chaintest.WriteFull(t, ch, &tb, 10, [][][]byte{{pgFloat8(1)}, {pgFloat8(math.NaN())}})
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
	wantRows(t, tg.db, "SELECT COUNT(*) FROM floats", "0")
}

// Finish adds UNIQUE and plain indexes over columns and the foreign keys
// that translate, skips what is PostgreSQL SQL, and a second Finish (a
// retried restore) adds nothing twice.
func TestFinishIndexesAndForeignKeys(t *testing.T) {
	tg := openTarget(t)
	users := chain.Table{Schema: "app", Name: "users", PrimaryKey: []string{"id"},
		Columns: []chain.Column{notNull(col("id", "integer", 23)), notNull(col("email", "text", 25)), col("name", "text", 25)},
		Indexes: []chain.Index{
			{Name: "users_email_key", Columns: []string{"email"}, Unique: true},
			{Name: "users_name_idx", Columns: []string{"name"}},
			{Name: "users_lower_idx", Unique: true, Expression: true},
			{Name: "users_active_idx", Columns: []string{"name"}, Unique: true, Partial: true},
		}}
	orders := chain.Table{Schema: "app", Name: "orders", PrimaryKey: []string{"id"},
		Columns: []chain.Column{notNull(col("id", "integer", 23)), col("user_id", "integer", 23)},
		Constraints: []chain.Constraint{
			{Name: "orders_user_fk", Type: "f", Definition: "FOREIGN KEY (user_id) REFERENCES app.users(id) ON DELETE CASCADE"},
			{Name: "orders_positive", Type: "c", Definition: "CHECK (id > 0)"},
		}}
	s := &chain.Schema{Tables: []chain.Table{users, orders}}
	ctx := context.Background()
	ch := chaintest.Store(t)
	if err := tg.Prepare(ctx, s, false); err != nil {
		t.Fatal(err)
	}
	for _, tb := range s.Tables {
		td := chaintest.WriteFull(t, ch, &tb, 10, nil)
		if _, err := tg.LoadTable(ctx, ch, s, td, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := tg.Finish(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	wantRows(t, tg.db, `SELECT INDEX_NAME, NON_UNIQUE FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'app__users' ORDER BY INDEX_NAME`,
		"PRIMARY|0", "users_email_key|0", "users_name_idx|1")
	wantRows(t, tg.db, `SELECT CONSTRAINT_NAME, REFERENCED_TABLE_NAME, DELETE_RULE FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = DATABASE()`,
		"orders_user_fk|app__users|CASCADE")
}

// An incremental a restore applies (one lane, one transaction) is split by
// its schema change's implicit commit; a crash after the DDL resumes from
// the position and marks, applying nothing twice.
func TestRestoreIncrementalResumesAcrossASchemaChange(t *testing.T) {
	tg := openTarget(t)
	kl := keylessTable()
	s := &chain.Schema{Tables: []chain.Table{kl}}
	restoreEmpty(t, tg, s)
	next := keylessTable()
	next.Columns = append(next.Columns, col("c", "text", 25))
	recs := chaintest.Txn(60, ins(&kl, "1", "x"),
		chain.Change{Op: chain.OpSchema, Table: kl.QualifiedName(), Schema: &next},
		ins(&next, "2", "y", "z"))
	ch, m := chaintest.WriteIncremental(t, recs, 2)
	ctx := context.Background()
	crashAt(t, true)
	opts := apply.RestoreOptions(testStream, testOwner, testFull, target.Subset{}, 0, "")
	if _, err := apply.ApplyIncremental(ctx, ch, m, s, tg, opts); !errors.Is(err, errCrash) {
		t.Fatalf("first restore: %v, want the injected crash", err)
	}
	testHookImplicit = nil
	r, err := apply.ApplyIncremental(ctx, ch, m, s, tg, opts)
	if err != nil || r.Applied == 0 || r.Skipped == 0 {
		t.Fatalf("second restore: %+v, %v; want it resumed, applying the rest", r, err)
	}
	wantRows(t, tg.db, "SELECT a, b, c FROM kl ORDER BY a", "1|x|NULL", "2|y|z")
	if r, err := apply.ApplyIncremental(ctx, ch, m, s, tg, opts); err != nil || r.Applied != 0 {
		t.Fatalf("third restore: %+v, %v; want it skipped", r, err)
	}
}

func TestNamesMySQLCannotHoldRefused(t *testing.T) {
	tg := openTarget(t)
	one := []chain.Column{col("x", "text", 25)}
	for name, s := range map[string]*chain.Schema{
		"schema mapping": {Tables: []chain.Table{{Schema: "public", Name: "a__b", Columns: one}, {Schema: "a", Name: "b", Columns: one}}},
		"case":           {Tables: []chain.Table{{Schema: "public", Name: "Items", Columns: one}, {Schema: "public", Name: "items", Columns: one}}},
		"columns":        {Tables: []chain.Table{{Schema: "public", Name: "t", Columns: []chain.Column{col("X", "text", 25), col("x", "text", 25)}}}},
		"control table":  {Tables: []chain.Table{{Schema: "public", Name: "sluice_cdc_state", Columns: one}}},
		"too long":       {Tables: []chain.Table{{Schema: "public", Name: strings.Repeat("t", 65), Columns: one}}},
	} {
		t.Run(name, func(t *testing.T) {
			wantCode(t, tg.Prepare(context.Background(), s, false), errcode.SourceSchemaUnsupported)
		})
	}
}

func TestPrepareRefusesTablesWithRows(t *testing.T) {
	tg := openTarget(t)
	k := keyedTable()
	s := &chain.Schema{Tables: []chain.Table{k}}
	restoreRows(t, tg, s, [][][]byte{{[]byte("1"), []byte("a")}})
	wantCode(t, tg.Prepare(context.Background(), s, false), errcode.TargetNotEmpty)
	if err := tg.Prepare(context.Background(), s, true); err != nil {
		t.Fatal(err)
	}
	wantRows(t, tg.db, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'k'", "0")
}

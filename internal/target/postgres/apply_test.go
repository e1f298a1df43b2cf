package postgres

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/testenv"
)

// targetDB creates a test database, runs setup in it and returns a target
// connection to it (empty search_path, as Connect gives).
func targetDB(t testing.TB, setup string) *pgx.Conn {
	t.Helper()
	db := testenv.CreateDB(t, "apply")
	if setup != "" {
		testenv.Exec(t, db, setup)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := connect(ctx, testenv.DSN(db))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// applyTx applies changes with a in one transaction and commits it.
func applyTx(t testing.TB, conn *pgx.Conn, a *applier, changes ...chain.Change) {
	t.Helper()
	if err := tryApply(conn, a, changes...); err != nil {
		t.Fatal(err)
	}
}

func tryApply(conn *pgx.Conn, a *applier, changes ...chain.Change) error {
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	for i := range changes {
		if err := a.Apply(ctx, tx, &changes[i]); err != nil {
			return err
		}
	}
	if err := a.Flush(ctx, tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// rowsOf returns the rows of query, each row's columns as text joined by
// "|" (NULL prints as "<null>").
func rowsOf(t testing.TB, conn *pgx.Conn, query string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), query, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals := rows.RawValues()
		parts := make([]string, len(vals))
		for i, v := range vals {
			if v == nil {
				parts[i] = "<null>"
			} else {
				parts[i] = string(v)
			}
		}
		out = append(out, strings.Join(parts, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return out
}

func wantRows(t testing.TB, conn *pgx.Conn, query string, want ...string) {
	t.Helper()
	got := rowsOf(t, conn, query)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s:\n got %q\nwant %q", query, got, want)
	}
}

// Value constructors.
func tv(s string) chain.Value { return chain.Value{Kind: chain.ValueText, Data: []byte(s)} }

var (
	null  = chain.Value{Kind: chain.ValueNull}
	toast = chain.Value{Kind: chain.ValueUnchanged}
)

func row(vals ...chain.Value) []chain.Value { return vals }

func ins(table string, vals ...chain.Value) chain.Change {
	return chain.Change{Op: chain.OpInsert, Table: table, New: vals}
}

func upd(table string, oldKind byte, old, new []chain.Value) chain.Change {
	return chain.Change{Op: chain.OpUpdate, Table: table, OldKind: oldKind, Old: old, New: new}
}

func del(table string, oldKind byte, old []chain.Value) chain.Change {
	return chain.Change{Op: chain.OpDelete, Table: table, OldKind: oldKind, Old: old}
}

func col(name, typ string) chain.Column {
	return chain.Column{Name: name, Type: typ, Encoding: chain.EncodingText}
}

func notNull(c chain.Column) chain.Column { c.NotNull = true; return c }

const itemsDDL = `CREATE TABLE public.items (id integer PRIMARY KEY, name text, note text, n integer,
	twice integer GENERATED ALWAYS AS (n * 2) STORED)`

func itemsSchema() *chain.Schema {
	return &chain.Schema{Tables: []chain.Table{{
		Schema: "public", Name: "items",
		Columns: []chain.Column{notNull(col("id", "integer")), col("name", "text"), col("note", "text"), col("n", "integer"),
			{Name: "twice", Type: "integer", Generated: "(n * 2)", Encoding: chain.EncodingText}},
		PrimaryKey: []string{"id"},
	}}}
}

func TestApplyKeyed(t *testing.T) {
	conn := targetDB(t, itemsDDL)
	a := newApplier(itemsSchema())
	const q = `SELECT id, name, note, n, twice FROM public.items ORDER BY id`

	// Applying the same insert twice leaves one row; a changed re-insert
	// converges on the new values.
	first := ins("public.items", tv("1"), tv("one"), tv("long note"), tv("5"))
	applyTx(t, conn, a, first, first)
	wantRows(t, conn, q, "1|one|long note|5|10")
	applyTx(t, conn, a, ins("public.items", tv("1"), tv("uno"), tv("long note"), tv("6")), first)
	wantRows(t, conn, q, "1|one|long note|5|10")

	// Update without an old image: found by the new image's key. An
	// unchanged TOAST value keeps the target's.
	applyTx(t, conn, a, upd("public.items", 0, nil, row(tv("1"), tv("ONE"), toast, tv("7"))))
	wantRows(t, conn, q, "1|ONE|long note|7|14")

	// Key change: the old key ('K', other columns null) finds the row.
	applyTx(t, conn, a, upd("public.items", 'K', row(tv("1"), null, null, null), row(tv("2"), tv("two"), toast, null)))
	wantRows(t, conn, q, "2|two|long note|<null>|<null>")

	// A whole old row ('O') on a keyed table is matched by its key.
	applyTx(t, conn, a,
		ins("public.items", tv("3"), tv(""), null, tv("1")),
		upd("public.items", 'O', row(tv("3"), tv(""), null, tv("1")), row(tv("3"), tv("three"), tv(""), tv("1"))))
	wantRows(t, conn, q, "2|two|long note|<null>|<null>", "3|three||1|2")

	// Delete by the old key; updates and deletes of missing rows change
	// nothing and are counted.
	applyTx(t, conn, a,
		del("public.items", 'K', row(tv("2"), null, null, null)),
		del("public.items", 'K', row(tv("2"), null, null, null)),
		upd("public.items", 0, nil, row(tv("9"), tv("x"), tv("y"), tv("1"))))
	wantRows(t, conn, q, "3|three||1|2")
	if got := a.Unmatched(); got != 2 {
		t.Errorf("Unmatched = %d, want 2", got)
	}

	// Wrong image widths and unknown tables are refused before anything is sent.
	for _, c := range []chain.Change{
		ins("public.items", tv("4")),
		ins("public.nope", tv("4")),
		del("public.items", 0, nil),
	} {
		if err := tryApply(conn, a, c); err == nil {
			t.Errorf("%c %s %v: no error", c.Op, c.Table, c.New)
		}
	}
	if err := a.Release(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
	wantRows(t, conn, `SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'sluice_apply_%'`, "0")
}

// A table keyed by a unique index (no primary key), an identity column
// GENERATED ALWAYS, and a key-only old image carrying the index's columns.
func TestApplyUniqueIndexAndIdentity(t *testing.T) {
	conn := targetDB(t, `CREATE TABLE public.users (id bigint GENERATED ALWAYS AS IDENTITY, email text NOT NULL, name text);
		CREATE UNIQUE INDEX users_email ON public.users (email);
		CREATE TABLE public.seq (id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text)`)
	s := &chain.Schema{Tables: []chain.Table{
		{Schema: "public", Name: "users",
			Columns: []chain.Column{{Name: "id", Type: "bigint", NotNull: true, Identity: "a"}, notNull(col("email", "text")), col("name", "text")},
			Indexes: []chain.Index{{Name: "users_email", Columns: []string{"email"}, Unique: true}}},
		{Schema: "public", Name: "seq",
			Columns:    []chain.Column{{Name: "id", Type: "integer", NotNull: true, Identity: "a"}, col("v", "text")},
			PrimaryKey: []string{"id"}},
	}}
	a := newApplier(s)
	applyTx(t, conn, a,
		ins("public.users", tv("10"), tv("a@x"), tv("A")),
		ins("public.users", tv("10"), tv("a@x"), tv("A2")),
		upd("public.users", 'K', row(null, tv("a@x"), null), row(tv("10"), tv("b@x"), tv("B"))),
		ins("public.seq", tv("5"), tv("five")),
		upd("public.seq", 0, nil, row(tv("5"), tv("FIVE"))),
	)
	wantRows(t, conn, `SELECT id, email, name FROM public.users`, "10|b@x|B")
	wantRows(t, conn, `SELECT id, v FROM public.seq`, "5|FIVE")
	applyTx(t, conn, a, del("public.users", 'K', row(null, tv("b@x"), null)))
	wantRows(t, conn, `SELECT count(*) FROM public.users`, "0")
}

func TestApplyKeyless(t *testing.T) {
	conn := targetDB(t, `CREATE TABLE public.log (a integer, b text, j json, t timestamptz)`)
	s := &chain.Schema{Tables: []chain.Table{{Schema: "public", Name: "log",
		Columns: []chain.Column{col("a", "integer"), col("b", "text"), col("j", "json"), col("t", "timestamp with time zone")}}}}
	a := newApplier(s)
	const q = `SELECT a, b, j, t FROM public.log ORDER BY a, b NULLS FIRST`
	if _, err := conn.Exec(context.Background(), "SET TimeZone = 'UTC'"); err != nil {
		t.Fatal(err)
	}
	same := row(tv("1"), tv("dup"), tv(`{"k": [1, 2]}`), tv("2024-01-02 03:04:05+00"))
	applyTx(t, conn, a,
		ins("public.log", same...),
		ins("public.log", same...),
		ins("public.log", tv("2"), null, null, null),
	)
	wantRows(t, conn, q,
		`1|dup|{"k": [1, 2]}|2024-01-02 03:04:05+00`,
		`1|dup|{"k": [1, 2]}|2024-01-02 03:04:05+00`,
		"2|<null>|<null>|<null>")

	// Only one of two identical rows changes. The old image's timestamp is
	// in another zone's text form: the match compares values, not the
	// source's spelling. The json is compared by its text.
	applyTx(t, conn, a, upd("public.log", 'O',
		row(tv("1"), tv("dup"), tv(`{"k": [1, 2]}`), tv("2024-01-02 05:04:05+02")),
		row(tv("1"), tv("changed"), toast, tv("2024-01-02 03:04:05+00"))))
	wantRows(t, conn, q,
		`1|changed|{"k": [1, 2]}|2024-01-02 03:04:05+00`,
		`1|dup|{"k": [1, 2]}|2024-01-02 03:04:05+00`,
		"2|<null>|<null>|<null>")

	// NULLs in the old image match NULLs; a json spelled differently does
	// not match (json keeps its text), so nothing changes.
	applyTx(t, conn, a,
		upd("public.log", 'O', row(tv("2"), null, null, null), row(tv("2"), tv(""), tv("[]"), null)),
		del("public.log", 'O', row(tv("1"), tv("dup"), tv(`{"k":[1,2]}`), tv("2024-01-02 03:04:05+00"))))
	if a.Unmatched() != 1 {
		t.Errorf("Unmatched = %d, want 1", a.Unmatched())
	}
	wantRows(t, conn, q,
		`1|changed|{"k": [1, 2]}|2024-01-02 03:04:05+00`,
		`1|dup|{"k": [1, 2]}|2024-01-02 03:04:05+00`,
		"2||[]|<null>")

	// Delete one of the rows, with an unchanged TOAST value skipped in the match.
	applyTx(t, conn, a, del("public.log", 'O', row(tv("1"), tv("dup"), toast, tv("2024-01-02 03:04:05+00"))))
	wantRows(t, conn, q,
		`1|changed|{"k": [1, 2]}|2024-01-02 03:04:05+00`,
		"2||[]|<null>")

	// Without the whole old row, updates and deletes are refused, naming the table.
	for _, c := range []chain.Change{
		upd("public.log", 0, nil, row(tv("2"), null, null, null)),
		upd("public.log", 'K', row(tv("2"), null, null, null), row(tv("2"), null, null, null)),
		del("public.log", 'K', row(tv("2"), null, null, null)),
	} {
		err := tryApply(conn, a, c)
		if err == nil || !strings.Contains(err.Error(), "public.log") || !strings.Contains(err.Error(), "REPLICA IDENTITY FULL") {
			t.Errorf("%c without a whole old row: %v", c.Op, err)
		}
	}
}

func TestApplyValues(t *testing.T) {
	conn := targetDB(t, `CREATE TYPE public.mood AS ENUM ('sad', 'ok');
		CREATE TABLE public.v (id bigint PRIMARY KEY, j json, jb jsonb, ia integer[], ta text[], s text, b bytea,
			n numeric(40,20), m public.mood, ma public.mood[], f double precision);
		CREATE TABLE public.vk (j json, jb jsonb, ia integer[], ta text[], s text, f double precision)`)
	cols := []chain.Column{notNull(col("id", "bigint")), col("j", "json"), col("jb", "jsonb"), col("ia", "integer[]"),
		col("ta", "text[]"), col("s", "text"), col("b", "bytea"), col("n", "numeric(40,20)"), col("m", "public.mood"),
		col("ma", "public.mood[]"), col("f", "double precision")}
	s := &chain.Schema{Enums: []chain.Enum{{Schema: "public", Name: "mood", Labels: []string{"sad", "ok"}}}, Tables: []chain.Table{
		{Schema: "public", Name: "v", Columns: cols, PrimaryKey: []string{"id"}},
		{Schema: "public", Name: "vk", Columns: []chain.Column{col("j", "json"), col("jb", "jsonb"), col("ia", "integer[]"),
			col("ta", "text[]"), col("s", "text"), col("f", "double precision")}},
	}}
	a := newApplier(s)
	big := "9007199254740993"
	applyTx(t, conn, a,
		ins("public.v", tv(big), tv(`{"a": 1,  "b": [true, null]}`), tv(`{"b": 2, "a": 1}`), tv("{1,NULL,3}"),
			tv(`{"",NULL,"x,y","q\"z"}`), tv(""), tv(`\x00ff`), tv("12345678901234567890.12345678901234567890"),
			tv("ok"), tv("{sad,ok}"), tv("NaN")),
		ins("public.v", tv("2"), null, null, null, null, null, null, null, null, null, tv("-Infinity")),
		ins("public.vk", tv(`{"x": 1}`), tv(`{"y": [1, 2]}`), tv("{}"), tv("{NULL}"), tv(""), tv("1.5")),
		ins("public.vk", tv(`{"x": 1}`), tv(`{"y": [1, 2]}`), tv("{}"), tv("{NULL}"), null, tv("1.5")),
	)
	wantRows(t, conn, `SELECT id, j, jb, ia, ta, s, b, n, m, ma, f, s IS NULL FROM public.v ORDER BY id`,
		`2|<null>|<null>|<null>|<null>|<null>|<null>|<null>|<null>|<null>|-Infinity|t`,
		big+`|{"a": 1,  "b": [true, null]}|{"a": 1, "b": 2}|{1,NULL,3}|{"",NULL,"x,y","q\"z"}||\x00ff|12345678901234567890.12345678901234567890|ok|{sad,ok}|NaN|f`)

	// Keyless matching over json, jsonb, arrays and empty string vs NULL:
	// the row with s = '' is the one deleted, the one with NULL stays.
	applyTx(t, conn, a,
		del("public.vk", 'O', row(tv(`{"x": 1}`), tv(`{"y":[1,2]}`), tv("{}"), tv("{NULL}"), tv(""), tv("1.5"))),
		upd("public.v", 'K', row(tv(big), null, null, null, null, null, null, null, null, null, null),
			row(tv(big), tv("[]"), toast, toast, toast, tv(""), toast, tv("0"), tv("sad"), toast, tv("Infinity"))))
	wantRows(t, conn, `SELECT j, s IS NULL FROM public.vk`, `{"x": 1}|t`)
	wantRows(t, conn, `SELECT id, j, jb, ia, s, n, m, ma, f FROM public.v WHERE id = `+big,
		big+`|[]|{"a": 1, "b": 2}|{1,NULL,3}||0.00000000000000000000|sad|{sad,ok}|Infinity`)
}

func TestApplyTruncate(t *testing.T) {
	conn := targetDB(t, `CREATE TABLE public.parent (id serial PRIMARY KEY);
		CREATE TABLE public.child (id integer PRIMARY KEY, parent integer REFERENCES public.parent);
		CREATE TABLE public.other (id integer PRIMARY KEY)`)
	s := &chain.Schema{Tables: []chain.Table{
		{Schema: "public", Name: "parent", Columns: []chain.Column{notNull(col("id", "integer"))}, PrimaryKey: []string{"id"}},
		{Schema: "public", Name: "child", Columns: []chain.Column{notNull(col("id", "integer")), col("parent", "integer")}, PrimaryKey: []string{"id"}},
		{Schema: "public", Name: "other", Columns: []chain.Column{notNull(col("id", "integer"))}, PrimaryKey: []string{"id"}},
	}}
	a := newApplier(s)
	testenvExec(t, conn, `INSERT INTO public.parent DEFAULT VALUES; INSERT INTO public.parent DEFAULT VALUES`)
	applyTx(t, conn, a, ins("public.child", tv("1"), tv("1")), ins("public.other", tv("1")))

	// Without CASCADE the referenced table cannot be truncated alone.
	if err := tryApply(conn, newApplier(s), chain.Change{Op: chain.OpTruncate, Tables: []string{"public.parent"}}); err == nil {
		t.Fatal("truncate of a referenced table without CASCADE succeeded")
	}
	applyTx(t, conn, a, chain.Change{Op: chain.OpTruncate, Tables: []string{"public.parent", "public.other"}, TruncateFlags: 3})
	wantRows(t, conn, `SELECT (SELECT count(*) FROM public.parent), (SELECT count(*) FROM public.child), (SELECT count(*) FROM public.other)`, "0|0|0")
	testenvExec(t, conn, `INSERT INTO public.parent DEFAULT VALUES`)
	wantRows(t, conn, `SELECT id FROM public.parent`, "1")
}

func testenvExec(t testing.TB, conn *pgx.Conn, sql string) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestApplySchemaChanges(t *testing.T) {
	conn := targetDB(t, `CREATE TABLE public.t (id integer PRIMARY KEY, a integer, gone text)`)
	t0 := chain.Table{Schema: "public", Name: "t",
		Columns:    []chain.Column{notNull(col("id", "integer")), col("a", "integer"), col("gone", "text")},
		PrimaryKey: []string{"id"}}
	a := newApplier(&chain.Schema{Tables: []chain.Table{t0}})
	applyTx(t, conn, a, ins("public.t", tv("1"), tv("10"), tv("x")))

	// A new table in a new schema, keyed by its primary key.
	fresh := &chain.Table{Schema: "app", Name: "new", Columns: []chain.Column{notNull(col("k", "text")), col("v", "jsonb")},
		PrimaryKey: []string{"k"}}
	// t loses "gone", gains "b", and "a" becomes bigint.
	t1 := t0
	t1.Columns = []chain.Column{notNull(col("id", "integer")), col("a", "bigint"), col("b", "text[]")}
	applyTx(t, conn, a,
		chain.Change{Op: chain.OpSchema, Table: "app.new", Schema: fresh},
		ins("app.new", tv("k1"), tv(`{"z": 1}`)),
		ins("app.new", tv("k1"), tv(`{"z": 2}`)),
		chain.Change{Op: chain.OpSchema, Table: "public.t", Schema: &t1},
		ins("public.t", tv("2"), tv("3000000000"), tv("{a,b}")),
		upd("public.t", 0, nil, row(tv("1"), tv("4000000000"), null)),
	)
	wantRows(t, conn, `SELECT k, v FROM app.new`, `k1|{"z": 2}`)
	wantRows(t, conn, `SELECT * FROM public.t ORDER BY id`, "1|4000000000|<null>", "2|3000000000|{a,b}")
	wantRows(t, conn, `SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'public.t'::regclass AND attname = 'a'`, "bigint")

	// The applier's schema follows the changes.
	got := a.Schema()
	if len(got.Tables) != 2 || got.Tables[0].QualifiedName() != "app.new" || len(got.Tables[1].Columns) != 3 || got.Tables[1].Columns[1].Type != "bigint" {
		t.Fatalf("Schema() = %+v", got.Tables)
	}
	// Applying the same definition again changes nothing and still works.
	applyTx(t, conn, a, chain.Change{Op: chain.OpSchema, Table: "public.t", Schema: &t1}, ins("public.t", tv("3"), tv("1"), null))
	wantRows(t, conn, `SELECT count(*) FROM public.t`, "3")
}

// A failing set statement of held rows is sent again row by row, so the
// error still names the change that failed; nothing of the flush stays.
func TestHeldRowsErrorNamesChange(t *testing.T) {
	conn := targetDB(t, `CREATE TABLE public.c (id integer PRIMARY KEY, v integer CHECK (v > 0))`)
	if !replicaRole(context.Background(), conn) {
		t.Fatal("the test's role may not set session_replication_role")
	}
	a := newApplier(&chain.Schema{Tables: []chain.Table{{Schema: "public", Name: "c",
		Columns: []chain.Column{notNull(col("id", "integer")), col("v", "integer")}, PrimaryKey: []string{"id"}}}})
	a.HoldBack(true)
	var changes []chain.Change
	for i := range 50 {
		c := ins("public.c", tv(strconv.Itoa(i+1)), tv("1"))
		c.XID, c.Ordinal = 88, uint32(i)
		if i == 37 {
			c.New[1] = tv("-1")
		}
		changes = append(changes, c)
	}
	err := tryApply(conn, a, changes...)
	if err == nil || !strings.Contains(err.Error(), "insert to public.c (xid 88, change 37)") || !strings.Contains(err.Error(), "23514") {
		t.Fatalf("err = %v", err)
	}
	wantRows(t, conn, `SELECT count(*) FROM public.c`, "0")
}

// A failing statement surfaces at Flush with the table and operation, and
// poisons the applier.
func TestApplyErrorNamesChange(t *testing.T) {
	conn := targetDB(t, `CREATE TABLE public.c (id integer PRIMARY KEY, v integer CHECK (v > 0))`)
	a := newApplier(&chain.Schema{Tables: []chain.Table{{Schema: "public", Name: "c",
		Columns: []chain.Column{notNull(col("id", "integer")), col("v", "integer")}, PrimaryKey: []string{"id"}}}})
	c := ins("public.c", tv("1"), tv("-1"))
	c.XID, c.Ordinal = 77, 3
	err := tryApply(conn, a, ins("public.c", tv("2"), tv("1")), c)
	if err == nil || !strings.Contains(err.Error(), "insert to public.c (xid 77, change 3)") || !strings.Contains(err.Error(), "23514") {
		t.Fatalf("err = %v", err)
	}
	if err2 := tryApply(conn, a, ins("public.c", tv("3"), tv("1"))); err2 == nil {
		t.Fatal("a failed applier accepted more changes")
	}
	wantRows(t, conn, `SELECT count(*) FROM public.c`, "0")
}

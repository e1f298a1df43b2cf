package mysql

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/filter"
	"github.com/sluicehq/sluice/internal/source"
	"github.com/sluicehq/sluice/internal/testenv"
)

// maskKey is the mask key of the tests' keyed strategies.
const maskKey = "0123456789abcdef-mask-key-of-the-tests"

// compileFilter compiles a spec whose keyed masks read maskKey from K.
func compileFilter(t *testing.T, s filter.Spec) *filter.Filter {
	t.Helper()
	s.MaskKeyEnv = "K"
	f, err := filter.Compile(s, func(name string) (string, bool) { return maskKey, name == "K" })
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// hmacHex is the first n hex characters of HMAC-SHA256(maskKey, v),
// computed here rather than by the filter package.
func hmacHex(v string, n int) string {
	m := hmac.New(sha256.New, []byte(maskKey))
	m.Write([]byte(v))
	return hex.EncodeToString(m.Sum(nil))[:n]
}

func hashMask(v string) string { return hmacHex(v, 64) }

func emailMask(v string) string {
	at := strings.LastIndexByte(v, '@')
	return hmacHex(v[:at], 16) + v[at:]
}

// storeKeys lists every object of the fixture's store.
func (f *fixture) storeKeys() []string {
	f.t.Helper()
	objs, err := f.ch.Store().List(context.Background(), "")
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, o.Key)
	}
	return out
}

// captureFiltered reads the source's changes from start up to its current
// position under filter flt, and returns them rendered (Begin and Commit
// left out), the window and where the capture's next window would start.
func (f *fixture) captureFiltered(start string, schema *chain.Schema, flt *filter.Filter) ([]string, source.Window, position) {
	f.t.Helper()
	ctx := context.Background()
	cat, err := f.ch.LoadCatalog(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	capt, err := f.src.OpenCapture(ctx, source.CaptureOptions{Source: cat.Source, Start: start, Schema: schema, Filter: flt})
	if err != nil {
		f.t.Fatal(err)
	}
	defer capt.Close()
	until, err := capt.CurrentPosition(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	win, err := capt.Next(ctx, source.Limits{Until: until, Idle: 3 * time.Second}, func(c *chain.Change) error {
		if c.Op != chain.OpBegin && c.Op != chain.OpCommit {
			out = append(out, renderChange(c))
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return out, win, capt.(*capture).pos
}

// filteredSchema has tables a filter takes whole, shaped, or leaves out.
const filteredSchema = `CREATE TABLE orders (id int PRIMARY KEY, email varchar(100), name varchar(80), secret varchar(20),
  qty int NOT NULL, d date, note text)` + ";\n" + `
CREATE TABLE customers (id bigint PRIMARY KEY, phone varchar(20), nick varchar(20), bio text)` + ";\n" + `
CREATE TABLE audit_log (id int PRIMARY KEY, what text)` + ";\n" + `
CREATE TABLE scratch_1 (a int)` + ";\n" + `
INSERT INTO orders VALUES (1, 'alice@example.com', 'Alice', 's3cr3t', 5, '2024-03-04', 'n1'),
  (2, NULL, 'Bob', 'hunter2', 6, NULL, 'n2')` + ";\n" + `
INSERT INTO customers VALUES (10, '555-123-4567', 'Charlie', 'likes cats'), (11, NULL, 'D', NULL)` + ";\n" + `
INSERT INTO audit_log VALUES (1, 'AUDITVALUE')` + ";\n" + `
INSERT INTO scratch_1 VALUES (1)`

func filteredSpec(db string) filter.Spec {
	return filter.Spec{
		IncludeTables:  []string{db + ".*"},
		ExcludeTables:  []string{"audit_*", db + ".scratch_?"},
		ExcludeColumns: []string{db + ".orders.secret"},
		Masks: []string{
			db + ".orders.email=email", db + ".orders.name=hash", db + ".orders.qty=fixed:7", db + ".orders.d=fixed:2020-1-2",
			db + ".customers.phone=keep-last:4", db + ".customers.nick=truncate:2", db + ".customers.bio=null",
		},
	}
}

// A filtered full holds the included tables only, without the excluded
// column, every masked value masked by its strategy, and records its
// filter; a capture under the same filter delivers the same shapes and
// masks, follows the included tables' schema changes (an excluded
// column's never shows), captures a new matching table and nothing of the
// tables the filter leaves out.
func TestFilteredFullAndCapture(t *testing.T) {
	f := newFixture(t, filteredSchema)
	flt := compileFilter(t, filteredSpec(f.db))
	m := f.full(source.FullOptions{Filter: flt})

	var names []string
	for _, tb := range m.Schema.Tables {
		names = append(names, tb.Name)
	}
	if !slices.Equal(names, []string{"customers", "orders"}) {
		t.Fatalf("recorded tables %q", names)
	}
	var data []string
	for _, td := range m.Tables {
		data = append(data, td.Table)
	}
	if !slices.Equal(data, []string{f.db + ".customers", f.db + ".orders"}) {
		t.Fatalf("table data %q", data)
	}
	var cols []string
	for _, c := range m.Schema.Table(f.db + ".orders").Columns {
		cols = append(cols, c.Name)
	}
	if !slices.Equal(cols, []string{"id", "email", "name", "qty", "d", "note"}) {
		t.Fatalf("orders recorded with columns %q", cols)
	}
	if want := flt.Record(); !m.Filters.Equal(want) || len(m.Filters.Masks) != 7 {
		t.Fatalf("manifest filters %+v, want %+v", m.Filters, want)
	}
	for _, mr := range m.Filters.Masks {
		keyed := strings.HasSuffix(mr.Column, ".email") || strings.HasSuffix(mr.Column, ".name")
		if keyed != (mr.KeyID == filter.KeyID([]byte(maskKey))) {
			t.Errorf("mask record %+v", mr)
		}
	}

	wantOrders := []string{
		"1|" + emailMask("alice@example.com") + "|" + hashMask("Alice") + "|7|2020-01-02|n1",
		"2|NULL|" + hashMask("Bob") + "|7|2020-01-02|n2",
	}
	if got := f.rows(m, "orders"); !slices.Equal(got, wantOrders) {
		t.Fatalf("orders rows\n got %q\nwant %q", got, wantOrders)
	}
	wantCustomers := []string{"10|********4567|Ch|NULL", "11|NULL|D|NULL"}
	if got := f.rows(m, "customers"); !slices.Equal(got, wantCustomers) {
		t.Fatalf("customers rows\n got %q\nwant %q", got, wantCustomers)
	}

	// No chunk of the full holds an excluded or masked original.
	for _, td := range m.Tables {
		for _, ref := range td.Chunks {
			_, body, err := f.ch.ReadChunk(context.Background(), ref)
			if err != nil {
				t.Fatal(err)
			}
			for _, orig := range []string{"alice", "Alice", "s3cr3t", "hunter2", "2024-03-04", "555-123", "Charlie", "likes cats", "AUDITVALUE"} {
				if bytes.Contains(body, []byte(orig)) {
					t.Errorf("a chunk of %s holds %q", td.Table, orig)
				}
			}
		}
	}

	pool := testenv.MySQL(t, f.db)
	f.exec(`INSERT INTO orders VALUES (3, 'carol@x.org', 'Carol', 'pw3', 1, '2024-01-01', 'n3')` + ";\n" +
		`UPDATE orders SET email = 'dave@y.org', secret = 'pw4' WHERE id = 1` + ";\n" +
		`INSERT INTO audit_log VALUES (2, 'AUDIT2')`)
	tx, err := pool.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`INSERT INTO audit_log VALUES (3, 'AUDIT3')`, `INSERT INTO customers VALUES (12, '0123456789', 'Eve', 'bio')`} {
		if _, err := tx.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	f.exec(`TRUNCATE TABLE audit_log` + ";\n" +
		`ALTER TABLE orders MODIFY secret varchar(40)` + ";\n" +
		`INSERT INTO orders VALUES (4, NULL, 'Fay', 'pw5', 2, NULL, 'n4')`)
	changes, win, _ := f.captureFiltered(m.EndPosition, m.Schema, flt)
	o, c, c2 := f.db+".orders", f.db+".customers", f.db+".customers2"
	want := []string{
		"I " + o + " 3|" + emailMask("carol@x.org") + "|" + hashMask("Carol") + "|7|2020-01-02|n3",
		"U " + o + " " + wantOrders[0] + " -> 1|" + emailMask("dave@y.org") + "|" + hashMask("Alice") + "|7|2020-01-02|n1",
		"I " + c + " 12|******6789|Ev|NULL",
		"I " + o + " 4|NULL|" + hashMask("Fay") + "|7|2020-01-02|n4",
	}
	if strings.Join(changes, "\n") != strings.Join(want, "\n") {
		t.Fatalf("changes:\n%s\nwant:\n%s", strings.Join(changes, "\n"), strings.Join(want, "\n"))
	}
	// The excluded column's change is no schema change; the transactions
	// that touched only left-out tables delivered nothing.
	if win.Schema != nil || win.Transactions != 4 {
		t.Fatalf("window %+v, want 4 transactions and no schema change", win)
	}

	f.exec(`ALTER TABLE orders ADD COLUMN extra int` + ";\n" +
		`INSERT INTO orders VALUES (5, 'gil@z.net', NULL, 'pw6', 3, '2025-05-05', 'n5', 42)` + ";\n" +
		`ALTER TABLE audit_log ADD COLUMN z int` + ";\n" +
		`INSERT INTO audit_log (id, what) VALUES (4, 'AUDIT4')` + ";\n" +
		`CREATE TABLE customers2 (id int PRIMARY KEY, v varchar(10))` + ";\n" +
		`INSERT INTO customers2 VALUES (1, 'c2')` + ";\n" +
		`CREATE TABLE scratch_2 (a int)` + ";\n" +
		`INSERT INTO scratch_2 VALUES (2)` + ";\n" +
		`TRUNCATE TABLE scratch_2` + ";\n" +
		`TRUNCATE TABLE customers`)
	changes, win, _ = f.captureFiltered(win.End, m.Schema, flt)
	want = []string{
		"S " + o + " (id int(11), email varchar(100), name varchar(80), qty int(11), d date, note text, extra int(11))",
		"I " + o + " 5|" + emailMask("gil@z.net") + "|NULL|7|2020-01-02|n5|42",
		"S " + c2 + " (id int(11), v varchar(10))",
		"I " + c2 + " 1|c2",
		"T " + c,
	}
	if strings.Join(changes, "\n") != strings.Join(want, "\n") {
		t.Fatalf("changes:\n%s\nwant:\n%s", strings.Join(changes, "\n"), strings.Join(want, "\n"))
	}
	if win.Schema == nil || win.Transactions != 3 {
		t.Fatalf("window %+v, want 3 transactions and a schema", win)
	}
	names = nil
	for _, tb := range win.Schema.Tables {
		names = append(names, tb.Name)
		for _, col := range tb.Columns {
			if col.Name == "secret" {
				t.Errorf("the window's schema records the excluded column %s.secret", tb.Name)
			}
		}
	}
	if !slices.Equal(names, []string{"customers", "customers2", "orders"}) {
		t.Fatalf("window schema tables %q", names)
	}
}

// A transaction that touches only tables the filter leaves out delivers
// nothing, yet the capture's position moves past it.
func TestExcludedOnlyTransactionMovesThePosition(t *testing.T) {
	f := newFixture(t, filteredSchema)
	flt := compileFilter(t, filteredSpec(f.db))
	m := f.full(source.FullOptions{Filter: flt})
	f.exec(`INSERT INTO audit_log VALUES (2, 'AUDIT2')` + ";\n" + `INSERT INTO scratch_1 VALUES (2)`)
	changes, win, pos := f.captureFiltered(m.EndPosition, m.Schema, flt)
	if len(changes) != 0 || win.Transactions != 0 {
		t.Fatalf("excluded tables delivered %q (%d transactions)", changes, win.Transactions)
	}
	start, _ := parsePosition(m.EndPosition)
	if pos.lsn() <= start.lsn() || pos.gtid == start.gtid {
		t.Fatalf("the capture's position stayed at %s (start %s)", pos, start)
	}
	// The next window starts past them: only the included change follows.
	f.exec(`INSERT INTO customers VALUES (13, NULL, NULL, NULL)`)
	changes, win, _ = f.captureFiltered(pos.String(), m.Schema, flt)
	if !slices.Equal(changes, []string{"I " + f.db + ".customers 13|NULL|NULL|NULL"}) || win.Transactions != 1 {
		t.Fatalf("after the excluded transactions: %q (%d transactions)", changes, win.Transactions)
	}
}

// A rotation's full is shaped and records its filter like a chain's first.
func TestFilteredRotationFull(t *testing.T) {
	f := newFixture(t, filteredSchema)
	flt := compileFilter(t, filteredSpec(f.db))
	m := f.full(source.FullOptions{Filter: flt})
	r, cleanup, err := f.src.(*engine).RotationFull(context.Background(), f.ch, source.FullOptions{AttemptID: "a2", Filter: flt}, m.Source)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if !r.Filters.Equal(flt.Record()) || len(r.Schema.Tables) != 2 || len(r.Tables) != 2 {
		t.Fatalf("rotation full: filters %+v, %d tables recorded, %d copied", r.Filters, len(r.Schema.Tables), len(r.Tables))
	}
	if got := f.rows(r, "customers"); !slices.Equal(got, []string{"10|********4567|Ch|NULL", "11|NULL|D|NULL"}) {
		t.Fatalf("rotation's customers rows %q", got)
	}
}

// What a filter cannot do is refused before the snapshot is taken and
// before anything is written to the store, with the filter's own codes.
func TestFilterRefusalsWriteNothing(t *testing.T) {
	f := newFixture(t, `CREATE TABLE t (id int PRIMARY KEY, u varchar(10) UNIQUE, n int, ti tinyint, d date, nn varchar(5) NOT NULL,
  dt datetime, dc decimal(6,2), e enum('a','b'))`)
	tb := func(c string) string { return f.db + ".t." + c }
	for _, tc := range []struct {
		name string
		spec filter.Spec
		code errcode.Code
	}{
		{"key column", filter.Spec{ExcludeColumns: []string{tb("id")}}, errcode.FilterKeyColumn},
		{"unique column", filter.Spec{ExcludeColumns: []string{tb("u")}}, errcode.FilterKeyColumn},
		{"missing column", filter.Spec{ExcludeColumns: []string{tb("nope")}}, errcode.FilterInvalid},
		{"missing table", filter.Spec{Masks: []string{f.db + ".nope.x=null"}}, errcode.FilterInvalid},
		{"text on int", filter.Spec{Masks: []string{tb("n") + "=fixed:abc"}}, errcode.MaskUnsupported},
		{"beyond tinyint", filter.Spec{Masks: []string{tb("ti") + "=fixed:300"}}, errcode.MaskUnsupported},
		{"no such date", filter.Spec{Masks: []string{tb("d") + "=fixed:2020-02-30"}}, errcode.MaskUnsupported},
		{"not a date", filter.Spec{Masks: []string{tb("d") + "=fixed:tomorrow"}}, errcode.MaskUnsupported},
		{"decimal too wide", filter.Spec{Masks: []string{tb("dc") + "=fixed:12345"}}, errcode.MaskUnsupported},
		{"not a label", filter.Spec{Masks: []string{tb("e") + "=fixed:c"}}, errcode.MaskUnsupported},
		{"hash on int", filter.Spec{Masks: []string{tb("n") + "=hash"}, MaskKeyEnv: "K"}, errcode.MaskUnsupported},
		{"null on NOT NULL", filter.Spec{Masks: []string{tb("nn") + "=null"}}, errcode.MaskUnsupported},
		{"truncate on unique", filter.Spec{Masks: []string{tb("u") + "=truncate:2"}}, errcode.MaskUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flt := compileFilter(t, tc.spec)
			snapshot := func(context.Context) error { t.Error("the snapshot was taken"); return nil }
			_, err := f.src.FullBackup(context.Background(), f.ch, source.FullOptions{AttemptID: "a1", Filter: flt, AfterSnapshot: snapshot})
			if got := errcodeOf(err); got != string(tc.code) {
				t.Fatalf("error %v (code %q), want %s", err, got, tc.code)
			}
			if keys := f.storeKeys(); len(keys) != 0 {
				t.Fatalf("a refused full wrote %q", keys)
			}
		})
	}
}

// Fixed values come back in the form the chain carries for the column's
// kind, as the server reads them.
func TestFixedValuesAreCanonical(t *testing.T) {
	f := newFixture(t, `CREATE TABLE t (id int PRIMARY KEY, n int, bu bigint unsigned, d date, dt datetime(3), ts timestamp NULL,
  dc decimal(6,2), fl double, tm time, y year, e enum('Low','High'), s set('a','b','c'), v varchar(5), j json, vb varbinary(4), u uuid)`)
	enc := fixedEncoder(context.Background(), testDB(t, f))
	schema, _, err := readSchema(context.Background(), testDB(t, f), f.db)
	if err != nil {
		t.Fatal(err)
	}
	col := func(name string) chain.Column {
		for _, c := range schema.Tables[0].Columns {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no column %s", name)
		return chain.Column{}
	}
	for _, tc := range []struct{ col, in, want string }{
		{"n", "-42", "-42"},
		{"bu", "18446744073709551615", "18446744073709551615"},
		{"d", "2020-1-2", "2020-01-02"},
		{"dt", "2020-01-02 03:04", "2020-01-02 03:04:00"},
		{"dt", "2020-01-02 03:04:05.5", "2020-01-02 03:04:05.5"},
		{"ts", "2020-01-02 03:04:05", "2020-01-02 03:04:05+00"},
		{"dc", "1.5", "1.50"},
		{"dc", "-1234.5e-1", "-123.45"},
		{"fl", "0.1", "0.1"},
		{"tm", "-01:02:03", "PT-1H-2M-3S"},
		{"y", "2024", "2024"},
		{"e", "high", "High"},
		{"s", "c,a,a", "a,c"},
		{"v", "héllo", "héllo"},
		{"j", `{"a": 1}`, `{"a": 1}`},
		{"vb", "ab", `\x6162`},
		{"u", "123E4567-E89B-12D3-A456-426614174000", "123e4567-e89b-12d3-a456-426614174000"},
	} {
		got, encoded, err := enc(col(tc.col), tc.in)
		if err != nil || got != tc.want || encoded != nil {
			t.Errorf("fixed %q on %s = %q %q %v, want %q", tc.in, tc.col, got, encoded, err, tc.want)
		}
	}
	for _, tc := range []struct{ col, in string }{
		{"n", "1.5"}, {"n", "99999999999"}, {"bu", "-1"}, {"d", "0000-00-00x"}, {"dt", "2020-13-01 00:00"},
		{"ts", "1960-01-01 00:00:00"}, {"dc", "1.555"}, {"tm", "900:00:00"}, {"y", "1800"}, {"s", "a,d"},
		{"v", "toolong"}, {"j", "{"}, {"vb", "abcde"}, {"u", "zz"},
	} {
		if got, _, err := enc(col(tc.col), tc.in); err == nil {
			t.Errorf("fixed %q on %s was taken as %q", tc.in, tc.col, got)
		}
	}
}

// A column or table the chain could not carry is no obstacle once the
// filter leaves it out, in the full and in the capture.
func TestLeftOutUnsupportedColumnsAreNoObstacle(t *testing.T) {
	f := newFixture(t, `CREATE TABLE t (id int PRIMARY KEY, legacy varchar(10) CHARACTER SET latin1, v int)`+";\n"+
		`CREATE TABLE old_latin (a varchar(5) CHARACTER SET latin1)`+";\n"+
		`INSERT INTO t VALUES (1, 'x', 2)`)
	_, err := f.src.FullBackup(context.Background(), f.ch, source.FullOptions{AttemptID: "a0"})
	if got := errcodeOf(err); got != string(errcode.SourceSchemaUnsupported) {
		t.Fatalf("unfiltered full: %v", err)
	}
	flt := compileFilter(t, filter.Spec{ExcludeTables: []string{"old_*"}, ExcludeColumns: []string{f.db + ".t.legacy"}})
	m := f.full(source.FullOptions{Filter: flt})
	if got := f.rows(m, "t"); !slices.Equal(got, []string{"1|2"}) {
		t.Fatalf("rows %q", got)
	}
	f.exec(`INSERT INTO t VALUES (2, 'y', 3)` + ";\n" + `INSERT INTO old_latin VALUES ('z')`)
	changes, win, _ := f.captureFiltered(m.EndPosition, m.Schema, flt)
	if !slices.Equal(changes, []string{"I " + f.db + ".t 2|3"}) || win.Schema != nil {
		t.Fatalf("changes %q, window schema %v", changes, win.Schema)
	}
}

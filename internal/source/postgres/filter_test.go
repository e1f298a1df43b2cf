package postgres

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/filter"
	"github.com/sluicehq/sluice/internal/source"
	"github.com/sluicehq/sluice/internal/testenv"
)

// testMaskKey is the mask key the filter tests resolve from testMaskEnv.
const (
	testMaskEnv = "SLUICE_TEST_MASK_KEY"
	testMaskKey = "0123456789abcdef0123456789abcdef"
)

// compileFilter compiles spec with the test mask key, failing the test on
// error.
func compileFilter(t *testing.T, spec filter.Spec) *filter.Filter {
	t.Helper()
	f, err := compileFilterErr(spec)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func compileFilterErr(spec filter.Spec) (*filter.Filter, error) {
	if len(spec.Masks) > 0 && spec.MaskKeyEnv == "" {
		spec.MaskKeyEnv = testMaskEnv
	}
	return filter.Compile(spec, func(name string) (string, bool) {
		if name == testMaskEnv {
			return testMaskKey, true
		}
		return "", false
	})
}

// hmacHex is the first n hex characters of HMAC-SHA256(testMaskKey, v),
// computed here independently of the filter package.
func hmacHex(v string, n int) string {
	m := hmac.New(sha256.New, []byte(testMaskKey))
	m.Write([]byte(v))
	return hex.EncodeToString(m.Sum(nil))[:n]
}

// chunkRows decodes every tuple of one table of a full, copying the values
// (nil for NULL).
func chunkRows(t *testing.T, ch *chain.Chain, m *chain.Manifest, table string) [][][]byte {
	t.Helper()
	var out [][][]byte
	for _, td := range m.Tables {
		if td.Table != table {
			continue
		}
		for _, ref := range td.Chunks {
			hdr, body, err := ch.ReadChunk(context.Background(), ref)
			if err != nil {
				t.Fatal(err)
			}
			it := chain.NewTupleIter(body, hdr.Columns)
			for it.Next() {
				row := make([][]byte, len(it.Values()))
				for i, v := range it.Values() {
					if v != nil {
						row[i] = append([]byte{}, v...)
					}
				}
				out = append(out, row)
			}
			if it.Err() != nil {
				t.Fatal(it.Err())
			}
		}
	}
	return out
}

// chunkBytes returns every chunk body of a full, decompressed, joined.
func chunkBytes(t *testing.T, ch *chain.Chain, m *chain.Manifest) []byte {
	t.Helper()
	var all []byte
	for _, td := range m.Tables {
		for _, ref := range td.Chunks {
			_, body, err := ch.ReadChunk(context.Background(), ref)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, body...)
		}
	}
	return all
}

func tableNames(s *chain.Schema) []string {
	var out []string
	for _, t := range s.Tables {
		out = append(out, t.QualifiedName())
	}
	sort.Strings(out)
	return out
}

func findTable(t *testing.T, s *chain.Schema, name string) *chain.Table {
	t.Helper()
	for i := range s.Tables {
		if s.Tables[i].QualifiedName() == name {
			return &s.Tables[i]
		}
	}
	t.Fatalf("table %s is not in the schema (%v)", name, tableNames(s))
	return nil
}

func columnNames(tb *chain.Table) []string {
	var out []string
	for _, c := range tb.Columns {
		out = append(out, c.Name)
	}
	return out
}

func dropSlotAtEnd(t *testing.T, slot string) {
	t.Helper()
	admin := testenv.Admin(t)
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = admin.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot)
		admin.Close(ctx)
	})
}

func currentLSN(t *testing.T, db string) string {
	t.Helper()
	conn := readerSession(t, db)
	var pos string
	if err := conn.QueryRow(context.Background(), `SELECT pg_current_wal_lsn()::text`).Scan(&pos); err != nil {
		t.Fatal(err)
	}
	return pos
}

const filterTables = `
CREATE SCHEMA app;
CREATE TABLE app.orders (id int PRIMARY KEY, email text, secret text, note text);
CREATE TABLE app.items (id int PRIMARY KEY, name text);
CREATE TABLE app.audit_log (id int PRIMARY KEY, what text);
CREATE TABLE public.other (id int PRIMARY KEY, v text);
INSERT INTO app.orders VALUES (1, 'ann@example.com', 'TOPSECRET-1', 'n1'), (2, 'bob@example.org', 'TOPSECRET-2', 'n2');
INSERT INTO app.items VALUES (1, 'widget');
INSERT INTO app.audit_log VALUES (1, 'AUDITVALUE');
INSERT INTO public.other VALUES (1, 'OTHERVALUE');`

// A filtered full (through the engine interface) holds only the tables the
// patterns include, without the excluded column, and records its filter.
func TestFilteredFullHoldsOnlyWhatCrosses(t *testing.T) {
	db := testenv.CreateDB(t, "filterfull")
	testenv.Exec(t, db, filterTables)
	ctx := context.Background()
	f := compileFilter(t, filter.Spec{IncludeTables: []string{"app.*"}, ExcludeTables: []string{"*_log"},
		ExcludeColumns: []string{"app.orders.secret"}})
	src, err := source.Open(ctx, "postgres", testenv.DSN(db), nil)
	if err != nil {
		t.Fatal(err)
	}
	ch := openChain(t)
	m, err := src.FullBackup(ctx, ch, source.FullOptions{ChainLog: true, AttemptID: "a1", Filter: f})
	if err != nil {
		t.Fatal(err)
	}
	dropSlotAtEnd(t, m.Source.Slot)

	if got, want := tableNames(m.Schema), []string{"app.items", "app.orders"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("schema tables %v, want %v", got, want)
	}
	var data []string
	for _, td := range m.Tables {
		data = append(data, td.Table)
	}
	sort.Strings(data)
	if want := []string{"app.items", "app.orders"}; !reflect.DeepEqual(data, want) {
		t.Fatalf("manifest tables %v, want %v", data, want)
	}
	if got := columnNames(findTable(t, m.Schema, "app.orders")); !reflect.DeepEqual(got, []string{"id", "email", "note"}) {
		t.Fatalf("app.orders recorded with columns %v", got)
	}
	rows := chunkRows(t, ch, m, "app.orders")
	if len(rows) != 2 || len(rows[0]) != 3 || string(rows[0][2]) != "n1" && string(rows[1][2]) != "n1" {
		t.Fatalf("app.orders chunks: %q", rows)
	}
	all := chunkBytes(t, ch, m)
	for _, v := range []string{"TOPSECRET", "AUDITVALUE", "OTHERVALUE"} {
		if bytes.Contains(all, []byte(v)) {
			t.Errorf("the full's chunks hold %q, which the filter leaves out", v)
		}
	}
	if m.Filters == nil || !m.Filters.Equal(f.Record()) {
		t.Fatalf("manifest filters %+v, want %+v", m.Filters, f.Record())
	}
	// The stored manifest (the one the catalog names) carries them too.
	stored, err := ch.GetManifest(ctx, m.ID)
	if err != nil || !stored.Filters.Equal(f.Record()) {
		t.Fatalf("stored manifest filters %+v, %v", stored.Filters, err)
	}

	// A rotation's full shapes alike and records the filter.
	rot, cleanup, err := src.RotationFull(ctx, ch, source.FullOptions{AttemptID: "r1", Filter: f}, m.Source)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if got := tableNames(rot.Schema); !reflect.DeepEqual(got, []string{"app.items", "app.orders"}) || !rot.Filters.Equal(f.Record()) {
		t.Fatalf("rotation full: tables %v, filters %+v", got, rot.Filters)
	}
	if bytes.Contains(chunkBytes(t, ch, rot), []byte("TOPSECRET")) {
		t.Errorf("the rotation full's chunks hold the excluded column")
	}
}

// noSlotOrPublication checks the source was left untouched: no slot on db
// and no publication in it.
func noSlotOrPublication(t *testing.T, db string) {
	t.Helper()
	ctx := context.Background()
	admin := testenv.Admin(t)
	defer admin.Close(ctx)
	var slots int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE database = $1`, db).Scan(&slots); err != nil {
		t.Fatal(err)
	}
	var pubs int
	if err := readerSession(t, db).QueryRow(ctx, `SELECT count(*) FROM pg_publication`).Scan(&pubs); err != nil {
		t.Fatal(err)
	}
	if slots != 0 || pubs != 0 {
		t.Fatalf("a refused full left %d slots and %d publications on the source", slots, pubs)
	}
}

// What the filter refuses is refused before the source is touched.
func TestFilterRefusalsComeBeforeAnySlot(t *testing.T) {
	db := testenv.CreateDB(t, "filterrefuse")
	testenv.Exec(t, db, filterTables+`
		CREATE TABLE app.typed (id int PRIMARY KEY, n int, d date, u text UNIQUE);`)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		spec filter.Spec
		code errcode.Code
	}{
		{"key column excluded", filter.Spec{ExcludeColumns: []string{"app.orders.id"}}, errcode.FilterKeyColumn},
		{"unique column excluded", filter.Spec{ExcludeColumns: []string{"app.typed.u"}}, errcode.FilterKeyColumn},
		{"fixed value an int refuses", filter.Spec{Masks: []string{"app.typed.n=fixed:forty-two"}}, errcode.MaskUnsupported},
		{"fixed value a date refuses", filter.Spec{Masks: []string{"app.typed.d=fixed:2020-13-45"}}, errcode.MaskUnsupported},
		{"hash on an int", filter.Spec{Masks: []string{"app.typed.n=hash"}}, errcode.MaskUnsupported},
		{"truncate on a unique column", filter.Spec{Masks: []string{"app.typed.u=truncate:2"}}, errcode.MaskUnsupported},
		{"column the table lacks", filter.Spec{ExcludeColumns: []string{"app.orders.nope"}}, errcode.FilterInvalid},
		{"table left out by the patterns", filter.Spec{IncludeTables: []string{"app.items"}, ExcludeColumns: []string{"app.orders.note"}}, errcode.FilterInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := compileFilter(t, tc.spec)
			_, err := FullBackup(ctx, openChain(t), FullBackupOptions{DSN: testenv.DSN(db), ChainSlot: true, AttemptID: "a1", Filter: f})
			if !errcode.Is(err, tc.code) {
				t.Fatalf("want %s, got %v", tc.code, err)
			}
			noSlotOrPublication(t, db)
		})
	}
}

// maskTable has a column for each strategy; REPLICA IDENTITY FULL so a
// captured update carries a whole old image too.
const maskTable = `
CREATE TABLE public.p (id int PRIMARY KEY, h text, e varchar(200), n text, f text, tr text, kl text, fi int NOT NULL, fd date,
	plain text, gen text GENERATED ALWAYS AS (upper(plain)) STORED);
ALTER TABLE public.p REPLICA IDENTITY FULL;`

var maskSpec = filter.Spec{Masks: []string{
	"public.p.h=hash", "public.p.e=email", "public.p.n=null", "public.p.f=fixed:FIXED", "public.p.tr=truncate:3",
	"public.p.kl=keep-last:4", "public.p.fi=fixed:42", "public.p.fd=fixed:2020-01-02",
}}

// maskedText is what each column of public.p (after id) holds, as text,
// for a row inserted by maskRow with suffix s; nil is NULL.
func maskedText(s string) []*string {
	str := func(v string) *string { return &v }
	return []*string{
		str(hmacHex("hash-"+s, 64)),
		str(hmacHex("mail."+s, 16) + "@example.com"),
		nil,
		str("FIXED"),
		str("tru"),
		str("*****" + "5678"),
		str("42"),
		str("2020-01-02"),
		str("plain-" + s),
	}
}

const maskRow = `INSERT INTO public.p (id, h, e, n, f, tr, kl, fi, fd, plain) VALUES
	(%[1]d, 'hash-%[2]s', 'mail.%[2]s@example.com', 'NULLME-%[2]s', 'ORIGF-%[2]s', 'truncated-%[2]s', '123455678', 7, '1999-09-09', 'plain-%[2]s'),
	(%[1]d + 1, NULL, NULL, NULL, NULL, NULL, NULL, 8, NULL, NULL)`

// originals are values of maskRow that no chunk or change may hold.
var originals = []string{"hash-", "mail.", "NULLME", "ORIGF", "truncated", "123455678", "1999-09-09"}

// Every strategy masks the full's chunks (binary where the column is) and
// captured row images, new and old.
func TestMasksInFullAndCapture(t *testing.T) {
	db := testenv.CreateDB(t, "masks")
	testenv.Exec(t, db, maskTable)
	testenv.Exec(t, db, fmt.Sprintf(maskRow, 1, "a"))
	ctx := context.Background()
	f := compileFilter(t, maskSpec)
	ch := openChain(t)
	m, err := FullBackup(ctx, ch, FullBackupOptions{DSN: testenv.DSN(db), ChainSlot: true, AttemptID: "a1", Filter: f})
	if err != nil {
		t.Fatal(err)
	}
	dropSlotAtEnd(t, m.Source.Slot)
	if len(m.Filters.Masks) != 8 || m.Filters.Masks[0].Column != "public.p.e" || m.Filters.Masks[0].KeyID != filter.KeyID([]byte(testMaskKey)) {
		t.Fatalf("manifest filters %+v", m.Filters)
	}
	for _, mr := range m.Filters.Masks {
		if strings.Contains(mr.KeyID, testMaskKey) || (mr.Strategy != "hash" && mr.Strategy != "email" && mr.KeyID != "") {
			t.Fatalf("mask record %+v", mr)
		}
	}

	rows := chunkRows(t, ch, m, "public.p")
	if len(rows) != 2 {
		t.Fatalf("%d rows of public.p in the full", len(rows))
	}
	sort.Slice(rows, func(i, j int) bool { return bytes.Compare(rows[i][0], rows[j][0]) < 0 })
	want := maskedText("a")
	// Binary chunks: int4 42 and the date 2020-01-02 (days since 2000-01-01).
	fortyTwo := binary.BigEndian.AppendUint32(nil, 42)
	date := binary.BigEndian.AppendUint32(nil, 7306)
	for i, w := range want {
		got := rows[0][i+1]
		switch i {
		case 6:
			if !bytes.Equal(got, fortyTwo) {
				t.Errorf("full: fi = %x, want int4 42", got)
			}
		case 7:
			if !bytes.Equal(got, date) {
				t.Errorf("full: fd = %x, want the date 2020-01-02", got)
			}
		default:
			if (w == nil) != (got == nil) || (w != nil && *w != string(got)) {
				t.Errorf("full: column %d = %q, want %v", i+1, got, deref(w))
			}
		}
	}
	// NULLs stay NULL, except under fixed.
	nulls := rows[1]
	for i, v := range nulls[1:] {
		fixed := i == 3 || i == 6 || i == 7
		if fixed == (v == nil) {
			t.Errorf("full, NULL row: column %d = %q", i+1, v)
		}
	}
	all := chunkBytes(t, ch, m)
	for _, o := range originals {
		if bytes.Contains(all, []byte(o)) {
			t.Errorf("the full's chunks hold the original %q", o)
		}
	}

	// The capture: an insert, and an update whose old image is whole.
	testenv.Exec(t, db, fmt.Sprintf(maskRow, 10, "b"))
	testenv.Exec(t, db, `UPDATE public.p SET plain = 'changed' WHERE id = 10`)
	until := currentLSN(t, db)
	capt, err := OpenCapture(ctx, CaptureOptions{DSN: testenv.DSN(db), Slot: m.Source.Slot, Source: m.Source, Filter: f}, m.EndPosition, m.Schema)
	if err != nil {
		t.Fatal(err)
	}
	defer capt.Close()
	var images [][]chain.Value
	var ops []chain.Op
	var raw []byte
	win, err := capt.Next(ctx, source.Limits{Until: until}, func(c *chain.Change) error {
		if c.Op == chain.OpSchema {
			t.Errorf("capture recorded a schema change of %s: the masked table did not change", c.Table)
		}
		if c.Table != "public.p" {
			return nil
		}
		for _, img := range [][]chain.Value{c.New, c.Old} {
			if img == nil {
				continue
			}
			cp := make([]chain.Value, len(img))
			for i, v := range img {
				cp[i] = chain.Value{Kind: v.Kind, Data: append([]byte(nil), v.Data...)}
				raw = append(raw, v.Data...)
			}
			images = append(images, cp)
			ops = append(ops, c.Op)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if win.Transactions != 2 || len(images) != 4 {
		t.Fatalf("window %+v, %d images (%v)", win, len(images), ops)
	}
	check := func(what string, img []chain.Value, w []*string) {
		t.Helper()
		if len(img) != 10 {
			t.Fatalf("%s: %d values, want 10", what, len(img))
		}
		for i, ww := range w {
			v := img[i+1]
			if ww == nil {
				if v.Kind != chain.ValueNull {
					t.Errorf("%s: column %d = %v %q, want NULL", what, i+1, v.Kind, v.Data)
				}
				continue
			}
			if v.Kind != chain.ValueText || string(v.Data) != *ww {
				t.Errorf("%s: column %d = %v %q, want %q", what, i+1, v.Kind, v.Data, *ww)
			}
		}
	}
	wantB := maskedText("b")
	check("insert", images[0], wantB)
	wantNull := []*string{nil, nil, nil, wantB[3], nil, nil, wantB[6], wantB[7], nil}
	check("insert of NULLs", images[1], wantNull)
	changed := "changed"
	wantNew := append(append([]*string{}, wantB[:8]...), &changed)
	check("update new", images[2], wantNew)
	check("update old", images[3], wantB)
	for _, o := range originals {
		if bytes.Contains(raw, []byte(o)) {
			t.Errorf("a captured change holds the original %q", o)
		}
	}
}

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// A capture under table and column filters drops what the filter leaves
// out, keeps the transactions, captures a new table that matches and
// nothing of one that does not.
func TestFilteredCapture(t *testing.T) {
	db := testenv.CreateDB(t, "filtercapture")
	testenv.Exec(t, db, filterTables)
	ctx := context.Background()
	f := compileFilter(t, filter.Spec{IncludeTables: []string{"app.*"}, ExcludeTables: []string{"*_log"},
		ExcludeColumns: []string{"app.orders.secret"}, Masks: []string{"app.orders.email=email"}})
	ch := openChain(t)
	m, err := FullBackup(ctx, ch, FullBackupOptions{DSN: testenv.DSN(db), ChainSlot: true, AttemptID: "a1", Filter: f})
	if err != nil {
		t.Fatal(err)
	}
	dropSlotAtEnd(t, m.Source.Slot)

	// A transaction that touches only tables left out.
	testenv.Exec(t, db, `INSERT INTO public.other VALUES (2, 'OTHERVALUE'); INSERT INTO app.audit_log VALUES (2, 'AUDITVALUE')`)
	afterExcluded := currentLSN(t, db)
	capt, err := OpenCapture(ctx, CaptureOptions{DSN: testenv.DSN(db), Slot: m.Source.Slot, Source: m.Source, Filter: f}, m.EndPosition, m.Schema)
	if err != nil {
		t.Fatal(err)
	}
	defer capt.Close()
	var begins, commits int
	w1, err := capt.Next(ctx, source.Limits{Until: afterExcluded}, func(c *chain.Change) error {
		switch c.Op {
		case chain.OpBegin:
			begins++
		case chain.OpCommit:
			commits++
		default:
			t.Errorf("a change of a table left out was captured: %s %s", c.Op, c.Table)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if w1.Transactions != 1 || w1.Changes != 0 || begins != 1 || commits != 1 || w1.End == m.EndPosition || w1.Schema != nil {
		t.Fatalf("window of the excluded-only transaction: %+v (begins %d, commits %d)", w1, begins, commits)
	}
	if err := capt.Confirm(ctx, w1.End); err != nil {
		t.Fatal(err)
	}

	testenv.Exec(t, db, `
		INSERT INTO app.orders VALUES (3, 'cat@example.net', 'TOPSECRET-3', 'n3');
		UPDATE app.orders SET note = 'n3b', secret = 'TOPSECRET-3b' WHERE id = 3;
		ALTER TABLE app.orders ALTER COLUMN secret TYPE varchar(100);
		UPDATE app.orders SET note = 'n3c' WHERE id = 3;`)
	testenv.Exec(t, db, `
		CREATE TABLE app.fresh (id int PRIMARY KEY, v text);
		INSERT INTO app.fresh VALUES (1, 'fresh');
		CREATE TABLE public.nomatch (id int PRIMARY KEY, v text);
		INSERT INTO public.nomatch VALUES (1, 'NOMATCHVALUE');
		CREATE TABLE app.fresh_log (id int PRIMARY KEY, v text);
		INSERT INTO app.fresh_log VALUES (1, 'NOMATCHVALUE');`)
	testenv.Exec(t, db, `ALTER TABLE app.orders ADD COLUMN extra int; INSERT INTO app.orders VALUES (4, 'dan@example.com', 'TOPSECRET-4', 'n4', 44)`)
	testenv.Exec(t, db, `TRUNCATE app.items, public.other`)
	testenv.Exec(t, db, `TRUNCATE public.other, app.audit_log`)
	until := currentLSN(t, db)

	type seen struct {
		op     chain.Op
		table  string
		tables []string
		values []string
		schema *chain.Table
	}
	var got []seen
	var raw []byte
	w2, err := capt.Next(ctx, source.Limits{Until: until}, func(c *chain.Change) error {
		if c.Op == chain.OpBegin || c.Op == chain.OpCommit {
			return nil
		}
		s := seen{op: c.Op, table: c.Table, tables: append([]string(nil), c.Tables...), schema: c.Schema}
		for _, v := range c.New {
			s.values = append(s.values, string(v.Data))
			raw = append(raw, v.Data...)
		}
		for _, v := range c.Old {
			raw = append(raw, v.Data...)
		}
		got = append(got, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if w2.Transactions != 5 {
		t.Errorf("window: %d transactions, want 5 (the last truncates only tables left out)", w2.Transactions)
	}
	email := func(local, domain string) string { return hmacHex(local, 16) + "@" + domain }
	var summary []string
	for _, s := range got {
		line := string(s.op) + " " + s.table
		switch s.op {
		case chain.OpTruncate:
			line += " " + strings.Join(s.tables, ",")
		case chain.OpSchema:
			line += " (" + strings.Join(columnNames(s.schema), ",") + ")"
		default:
			line += " " + strings.Join(s.values, ",")
		}
		summary = append(summary, line)
	}
	want := []string{
		string(chain.OpInsert) + " app.orders 3," + email("cat", "example.net") + ",n3",
		string(chain.OpUpdate) + " app.orders 3," + email("cat", "example.net") + ",n3b",
		string(chain.OpUpdate) + " app.orders 3," + email("cat", "example.net") + ",n3c",
		string(chain.OpSchema) + " app.fresh (id,v)",
		string(chain.OpInsert) + " app.fresh 1,fresh",
		string(chain.OpSchema) + " app.orders (id,email,note,extra)",
		string(chain.OpInsert) + " app.orders 4," + email("dan", "example.com") + ",n4,44",
		string(chain.OpTruncate) + "  app.items",
	}
	if !reflect.DeepEqual(summary, want) {
		t.Fatalf("captured:\n  %s\nwant:\n  %s", strings.Join(summary, "\n  "), strings.Join(want, "\n  "))
	}
	for _, o := range []string{"TOPSECRET", "OTHERVALUE", "AUDITVALUE", "NOMATCHVALUE", "cat@", "dan@"} {
		if bytes.Contains(raw, []byte(o)) {
			t.Errorf("a captured change holds %q", o)
		}
	}
	if w2.Schema == nil {
		t.Fatal("the window recorded no schema")
	}
	if names := tableNames(w2.Schema); !reflect.DeepEqual(names, []string{"app.fresh", "app.items", "app.orders"}) {
		t.Errorf("tracked schema tables %v", names)
	}
	if cols := columnNames(findTable(t, w2.Schema, "app.orders")); !reflect.DeepEqual(cols, []string{"id", "email", "note", "extra"}) {
		t.Errorf("tracked app.orders columns %v", cols)
	}
}

// Dropping, on the source, a column the filter excludes or masks keeps the
// capture going: the next images simply lack it, and the schema change
// records the table without it.
func TestFilteredColumnsDroppedMidStream(t *testing.T) {
	db := testenv.CreateDB(t, "filterdrop")
	testenv.Exec(t, db, filterTables)
	ctx := context.Background()
	f := compileFilter(t, filter.Spec{IncludeTables: []string{"app.orders"},
		ExcludeColumns: []string{"app.orders.secret"}, Masks: []string{"app.orders.email=email", "app.orders.note=truncate:1"}})
	ch := openChain(t)
	m, err := FullBackup(ctx, ch, FullBackupOptions{DSN: testenv.DSN(db), ChainSlot: true, AttemptID: "a1", Filter: f})
	if err != nil {
		t.Fatal(err)
	}
	dropSlotAtEnd(t, m.Source.Slot)
	testenv.Exec(t, db, `INSERT INTO app.orders VALUES (3, 'cat@example.net', 'TOPSECRET-3', 'note3')`)
	testenv.Exec(t, db, `ALTER TABLE app.orders DROP COLUMN secret, DROP COLUMN note`)
	testenv.Exec(t, db, `INSERT INTO app.orders VALUES (4, 'dan@example.com')`)
	until := currentLSN(t, db)
	capt, err := OpenCapture(ctx, CaptureOptions{DSN: testenv.DSN(db), Slot: m.Source.Slot, Source: m.Source, Filter: f}, m.EndPosition, m.Schema)
	if err != nil {
		t.Fatal(err)
	}
	defer capt.Close()
	var summary []string
	_, err = capt.Next(ctx, source.Limits{Until: until}, func(c *chain.Change) error {
		switch c.Op {
		case chain.OpInsert:
			var vals []string
			for _, v := range c.New {
				vals = append(vals, string(v.Data))
			}
			summary = append(summary, "insert "+strings.Join(vals, ","))
		case chain.OpSchema:
			summary = append(summary, "schema "+strings.Join(columnNames(c.Schema), ","))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"insert 3," + hmacHex("cat", 16) + "@example.net,n",
		"schema id,email",
		"insert 4," + hmacHex("dan", 16) + "@example.com",
	}
	if !reflect.DeepEqual(summary, want) {
		t.Fatalf("captured %q, want %q", summary, want)
	}
}

// A partition crosses, is cut and masked as the root of its tree: in the
// full (whose schema names the partitions) and in the capture, for a
// partition attached while the stream runs too; a partitioned table left
// out leaves its partitions out.
func TestFilterFollowsPartitionTrees(t *testing.T) {
	db := testenv.CreateDB(t, "filterparts")
	testenv.Exec(t, db, `
		CREATE SCHEMA app;
		CREATE TABLE app.events (id int, at date NOT NULL, email text, secret text, PRIMARY KEY (id, at)) PARTITION BY RANGE (at);
		CREATE TABLE app.events_2026 PARTITION OF app.events FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
		CREATE TABLE app.logs (id int PRIMARY KEY, at date NOT NULL, v text) PARTITION BY LIST (id);
		CREATE TABLE app.logs_1 PARTITION OF app.logs FOR VALUES IN (1, 2, 3);
		INSERT INTO app.events VALUES (1, '2026-05-01', 'ann@example.org', 'TOPSECRET-1');
		INSERT INTO app.logs VALUES (1, '2026-05-01', 'LOGVALUE-1');`)
	ctx := context.Background()
	f := compileFilter(t, filter.Spec{IncludeTables: []string{"app.events"},
		ExcludeColumns: []string{"app.events.secret"}, Masks: []string{"app.events.email=email"}})
	ch := openChain(t)
	m, err := FullBackup(ctx, ch, FullBackupOptions{DSN: testenv.DSN(db), ChainSlot: true, AttemptID: "a1", Filter: f})
	if err != nil {
		t.Fatal(err)
	}
	dropSlotAtEnd(t, m.Source.Slot)
	if names := tableNames(m.Schema); !reflect.DeepEqual(names, []string{"app.events", "app.events_2026"}) {
		t.Fatalf("full's tables %v, want the partitioned table and its partition only", names)
	}
	if cols := columnNames(findTable(t, m.Schema, "app.events_2026")); !reflect.DeepEqual(cols, []string{"id", "at", "email"}) {
		t.Fatalf("the partition's columns %v, want the root's excluded column left out", cols)
	}
	rows := chunkRows(t, ch, m, "app.events_2026")
	if len(rows) != 1 || string(rows[0][2]) != hmacHex("ann", 16)+"@example.org" {
		t.Fatalf("the partition's rows %q, want the e-mail masked", rows)
	}
	if raw := chunkBytes(t, ch, m); bytes.Contains(raw, []byte("TOPSECRET")) || bytes.Contains(raw, []byte("LOGVALUE")) || bytes.Contains(raw, []byte("ann@")) {
		t.Fatal("the full's chunks hold a value the filter keeps out")
	}

	testenv.Exec(t, db, `
		CREATE TABLE app.events_2027 PARTITION OF app.events FOR VALUES FROM ('2027-01-01') TO ('2028-01-01');
		INSERT INTO app.events VALUES (2, '2027-02-01', 'bob@example.com', 'TOPSECRET-2'), (3, '2026-02-01', 'cy@example.com', 'TOPSECRET-3');
		INSERT INTO app.logs VALUES (2, '2026-05-01', 'LOGVALUE-2');`)
	until := currentLSN(t, db)
	capt, err := OpenCapture(ctx, CaptureOptions{DSN: testenv.DSN(db), Slot: m.Source.Slot, Source: m.Source, Filter: f}, m.EndPosition, m.Schema)
	if err != nil {
		t.Fatal(err)
	}
	defer capt.Close()
	var got []string
	if _, err := capt.Next(ctx, source.Limits{Until: until}, func(c *chain.Change) error {
		switch c.Op {
		case chain.OpInsert:
			var vals []string
			for _, v := range c.New {
				vals = append(vals, string(v.Data))
			}
			got = append(got, c.Table+" "+strings.Join(vals, ","))
		case chain.OpSchema:
			got = append(got, "schema "+c.Schema.QualifiedName()+" ("+strings.Join(columnNames(c.Schema), ",")+")")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	want := []string{
		"app.events_2026 3,2026-02-01," + hmacHex("cy", 16) + "@example.com",
		"app.events_2027 2,2027-02-01," + hmacHex("bob", 16) + "@example.com",
		"schema app.events_2027 (id,at,email)",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("captured:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
)

var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// The binary forms read from the chain's text are the values PostgreSQL
// means by that text; text they cannot read exactly is refused (the column
// then goes as a text literal).
func TestBinaryValues(t *testing.T) {
	for _, c := range []struct {
		in   string
		zone bool
		want time.Time
	}{
		{"2024-01-01 00:00:00+00", true, time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"2000-02-13 01:02:03.456789+00", true, time.Date(2000, 2, 13, 1, 2, 3, 456789000, time.UTC)},
		{"1999-12-31 23:59:59.5-05:30", true, time.Date(2000, 1, 1, 5, 29, 59, 500000000, time.UTC)},
		{"1850-06-01 12:00:00+00:19:32", true, time.Date(1850, 6, 1, 11, 40, 28, 0, time.UTC)},
		{"0001-01-01 00:00:00", false, time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"2024-02-29 10:11:12.1", false, time.Date(2024, 2, 29, 10, 11, 12, 100000000, time.UTC)},
	} {
		us, ok := parseTimestamp([]byte(c.in), c.zone)
		if want := c.want.Sub(pgEpoch).Microseconds(); !ok || us != want {
			// Sub saturates beyond ~292 years; compute by days then.
			days := c.want.Unix()/86400 - pgEpoch.Unix()/86400
			rem := c.want.Unix()%86400*1_000_000 + int64(c.want.Nanosecond()/1000)
			if !ok || us != days*86_400_000_000+rem {
				t.Errorf("%q: %d %v, want %d", c.in, us, ok, days*86_400_000_000+rem)
			}
		}
	}
	for _, in := range []string{"infinity", "2024-01-01 00:00:00 BC+00", "2024-13-01 00:00:00+00", "2023-02-29 00:00:00+00",
		"12024-01-01 00:00:00+00", "2024-01-01 00:00:00", "2024-01-01 00:00:00.1234567+00", "2024-01-01T00:00:00+00"} {
		if _, ok := parseTimestamp([]byte(in), true); ok {
			t.Errorf("%q read as a timestamptz", in)
		}
	}
	if d, ok := parseDate([]byte("1999-12-31")); !ok || d != -1 {
		t.Errorf("1999-12-31: %d %v", d, ok)
	}
	for _, c := range []struct {
		oid  uint32
		in   string
		want []byte
	}{
		{oidInt8, "-9223372036854775808", []byte{0x80, 0, 0, 0, 0, 0, 0, 0}},
		{oidInt4, "-2", []byte{0xff, 0xff, 0xff, 0xfe}},
		{oidInt2, "258", []byte{1, 2}},
		{oidBool, "t", []byte{1}},
		{oidUUID, "0123abcd-ef01-2345-6789-abcdef012345", []byte{0x01, 0x23, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45}},
		{oidBytea, `\x00ff`, []byte{0, 0xff}},
		{oidJSONB, `{"a": "\""}`, append([]byte{1}, `{"a": "\""}`...)},
		{oidText, `a"b\c`, []byte(`a"b\c`)},
		{oidFloat8, "0.1", binary.BigEndian.AppendUint64(nil, 0x3fb999999999999a)},
		{oidFloat8, "-Infinity", binary.BigEndian.AppendUint64(nil, 0xfff0000000000000)},
	} {
		got, ok := appendBinaryValue(nil, c.oid, []byte(c.in))
		if !ok || string(got) != string(c.want) {
			t.Errorf("%d %q: %x %v, want %x", c.oid, c.in, got, ok, c.want)
		}
	}
	for _, c := range []struct {
		oid uint32
		in  string
	}{{oidInt4, "2147483648"}, {oidInt2, "40000"}, {oidInt8, "9223372036854775808"}, {oidInt8, "1e3"}, {oidBool, "true"},
		{oidUUID, "{0123abcd-ef01-2345-6789-abcdef012345}"}, {oidBytea, `\001`}, {oidDate, "infinity"}, {oidFloat8, "1,5"}} {
		if got, ok := appendBinaryValue(nil, c.oid, []byte(c.in)); ok {
			t.Errorf("%d %q read as %x", c.oid, c.in, got)
		}
	}
}

// Held rows of every type whose arrays go binary reach the table as the
// same rows sent one statement each (text parameters), NULLs and values
// the binary forms refuse (infinity, BC, escape-format bytea) included.
func TestHeldRowsBinaryArrays(t *testing.T) {
	const ddl = `(id bigint PRIMARY KEY, s smallint, i integer, b boolean, f4 real, f8 double precision, t text,
		vc varchar(10), ch char(3), by bytea, j json, jb jsonb, u uuid, d date, ts timestamp(3), tz timestamptz)`
	conn := targetDB(t, `CREATE TABLE public.held `+ddl+`; CREATE TABLE public.one `+ddl)
	if !replicaRole(context.Background(), conn) {
		t.Fatal("the test's role may not set session_replication_role")
	}
	cols := []chain.Column{notNull(oidCol("id", "bigint", 20)), oidCol("s", "smallint", 21), oidCol("i", "integer", 23),
		oidCol("b", "boolean", 16), oidCol("f4", "real", 700), oidCol("f8", "double precision", 701), oidCol("t", "text", 25),
		oidCol("vc", "character varying(10)", 1043), oidCol("ch", "character(3)", 1042), oidCol("by", "bytea", 17),
		oidCol("j", "json", 114), oidCol("jb", "jsonb", 3802), oidCol("u", "uuid", 2950), oidCol("d", "date", 1082),
		oidCol("ts", "timestamp(3) without time zone", 1114), oidCol("tz", "timestamp with time zone", 1184)}
	schema := &chain.Schema{Tables: []chain.Table{
		{Schema: "public", Name: "held", Columns: cols, PrimaryKey: []string{"id"}},
		{Schema: "public", Name: "one", Columns: cols, PrimaryKey: []string{"id"}},
	}}
	rows := [][]chain.Value{
		row(tv("1"), tv("-32768"), tv("2147483647"), tv("t"), tv("1.1"), tv("0.1"), tv(`a"b\c,{}`), tv("ünï"), tv("ab "),
			tv(`\x00ff`), tv(`{"k": "v\""}`), tv(`{"b": [1, 2.50]}`), tv("0123abcd-ef01-2345-6789-abcdef012345"),
			tv("1999-12-31"), tv("2000-01-01 00:00:00.1235"), tv("1850-06-01 12:00:00+00:19:32")),
		row(tv("2"), null, null, tv("f"), tv("NaN"), tv("-Infinity"), tv(""), tv(""), null, tv(`\x`), tv(`null`), tv(`[]`),
			null, tv("infinity"), tv("0044-03-15 12:00:00 BC"), tv("2024-06-30 23:59:59.999999-09:30")),
		row(tv("-9223372036854775808"), tv("7"), tv("-1"), null, tv("3.4028235e+38"), tv("1e-300"), null, null, tv("x  "),
			tv(`abc\000`), null, null, null, tv("5874897-12-31"), tv("294276-12-31 23:59:59"), tv("-infinity")),
	}
	// Rows whose every value has a binary form, so that those go binary.
	for i, v := range [][3]string{{"1850-06-01 12:00:00+00:19:32", "2000-01-01 00:00:00.1235", `\x`},
		{"2024-06-30 23:59:59.999999-09:30", "0001-01-01 00:00:00", `\x00ff`}, {"2000-01-01 00:00:00+14", "9999-12-31 23:59:59.9994", `\xAB`}} {
		rows = append(rows, row(tv(fmt.Sprint(10+i)), tv("1"), tv("2"), tv("t"), tv("1"), tv("2"), tv("x"), tv("y"), tv("z"),
			tv(v[2]), tv("{}"), tv("{}"), tv("0123abcd-ef01-2345-6789-abcdef01234"+fmt.Sprint(i)), tv(v[1][:10]), tv(v[1]), tv(v[0])))
	}
	held := NewApplier(schema)
	held.HoldBack(true)
	one := NewApplier(schema)
	var hc, oc []chain.Change
	for _, r := range rows {
		hc = append(hc, ins("public.held", r...))
		oc = append(oc, ins("public.one", r...))
	}
	// An update of every column but the key, held too.
	up := row(tv("1"), tv("5"), tv("6"), tv("f"), tv("-0"), tv("2.5"), tv("u"), tv("v"), tv("w"), tv(`\xab`), tv(`1`), tv(`2`),
		tv("ffffffff-ffff-ffff-ffff-ffffffffffff"), tv("2024-02-29"), tv("2024-02-29 01:02:03"), tv("2024-02-29 01:02:03+05:45"))
	hc = append(hc, upd("public.held", 'K', row(tv("1"), null, null, null, null, null, null, null, null, null, null, null, null, null, null, null), up))
	oc = append(oc, upd("public.one", 'K', row(tv("1"), null, null, null, null, null, null, null, null, null, null, null, null, null, null, null), up))
	// The first three rows in a transaction of their own: their columns
	// with values of no binary form go as text, the others' go binary.
	applyTx(t, conn, held, hc[:3]...)
	applyTx(t, conn, held, hc[3:]...)
	applyTx(t, conn, one, oc...)
	const q = `SELECT id, s, i, b, f4, f8, t, vc, ch, by, j, jb, u, d, ts, tz AT TIME ZONE 'UTC' FROM public.%s ORDER BY id`
	want := rowsOf(t, conn, fmt.Sprintf(q, "one"))
	wantRows(t, conn, fmt.Sprintf(q, "held"), want...)
	if len(want) != 6 {
		t.Fatalf("%d rows: %q", len(want), want)
	}
}

package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	// Tests reach the real PostgreSQL to build databases, workloads and comparisons.
	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/testenv"
)

// matrixColumn is one column of the type matrix: its SQL type and the values
// rows cycle through. A value starting with "=" is an SQL expression; any
// other is a string literal cast to the column's type. Unless noArray is
// set the column has a twin of its array type (name + "_a") holding, by row,
// its values with a NULL between them, an empty array, a two-dimensional
// array with a NULL element, or NULL.
type matrixColumn struct {
	name, typ string
	vals      []string
	noArray   bool
}

// matrixColumns holds every built-in type family with values at its edges.
// reg* types are left out: their values are OIDs of the source's catalog.
var matrixColumns = []matrixColumn{
	{name: "i2", typ: "int2", vals: []string{"0", "32767", "-32768", "1"}},
	{name: "i4", typ: "int4", vals: []string{"0", "2147483647", "-2147483648", "42"}},
	{name: "i8", typ: "int8", vals: []string{"9007199254740993", "9223372036854775807", "-9223372036854775808", "-9007199254740993", "0"}},
	{name: "num", typ: "numeric", vals: []string{"NaN", "Infinity", "-Infinity", "-0.000000000000000000000000000001",
		"123456789012345678901234567890.123456789012345678901234567890", "-5", "0.00", "1e-16383",
		"=(repeat('9', 131072) || '.' || repeat('9', 16383))::numeric", "-1e131071", "100000000000000000000"}},
	{name: "num_fixed", typ: "numeric(1000,500)", vals: []string{"=(repeat('9', 500) || '.' || repeat('9', 500))::numeric(1000,500)",
		"-0.5", "0", "=('-' || repeat('1', 500) || '.' || repeat('0', 499) || '1')::numeric(1000,500)"}},
	{name: "num52", typ: "numeric(5,2)", vals: []string{"999.99", "-999.99", "0.01", "-0.00"}},
	{name: "f4", typ: "float4", vals: []string{"NaN", "Infinity", "-Infinity", "-0", "1.4e-45", "3.4028235e38", "1.1754942e-38", "0.1", "-3.1415927"}},
	{name: "f8", typ: "float8", vals: []string{"NaN", "Infinity", "-Infinity", "-0", "4.9e-324", "1.7976931348623157e308",
		"2.225073858507201e-308", "0.1", "-2.718281828459045"}},
	{name: "mny", typ: "money", vals: []string{"92233720368547758.07", "-92233720368547758.08", "0", "1.23"}},
	{name: "bo", typ: "bool", vals: []string{"true", "false"}},
	{name: "tx", typ: "text", vals: []string{"plain", "", "emoji 🚀👩‍👩‍👧‍👦 flag 🏳️‍🌈", "combining e\u0301 a\u0308 o\u0302\u0323",
		"RTL שלום עולם مرحبا بالعالم \u200f", "tab\tnewline\nbackslash\\ quote' \"dq\" {braces} ,comma", "NULL", "{}", " lead and trail ",
		"=chr(1) || chr(127) || chr(65533) || chr(1114111)"}},
	{name: "vc", typ: "varchar(10)", vals: []string{"", "ünïcødé", "0123456789", "🚀🚀🚀", "NULL"}},
	{name: `Unbounded "varchar" ü`, typ: "varchar", vals: []string{"x", ""}},
	{name: "bpc", typ: "char(5)", vals: []string{"", "ab", "abcde", "é  ", " "}},
	{name: "qc", typ: `"char"`, vals: []string{"a", "", `\377`, " ", `"`, `\`}},
	{name: "nm", typ: "name", vals: []string{"pg_catalog", "ünï", strings.Repeat("x", 63), "", "with space"}},
	{name: "by", typ: "bytea", vals: []string{`\x`, `\x00`, `\x000102ff00`, `\xdeadbeef`, "=decode(repeat('00ff', 3000), 'hex')"}},
	// Larger than the broker's batch once printed as hex.
	{name: "huge", typ: "bytea", noArray: true, vals: []string{"=(SELECT string_agg(sha256(g::text::bytea), '') FROM generate_series(1, 160000) g)", `\x01`, `\x`}},
	{name: "d", typ: "date", vals: []string{"infinity", "-infinity", "4713-01-01 BC", "5874897-12-31", "2000-02-29", "0001-01-01", "1970-01-01"}},
	{name: "tm", typ: "time", vals: []string{"00:00", "23:59:59.999999", "24:00:00", "12:34:56.789012"}},
	{name: "tm0", typ: "time(0)", noArray: true, vals: []string{"12:34:56", "00:00"}},
	{name: "ttz", typ: "timetz", vals: []string{"00:00+15:59", "23:59:59.999999-15:59", "24:00:00+00", "12:00:00.000001+05:30"}},
	{name: "ts", typ: "timestamp", vals: []string{"infinity", "-infinity", "4713-01-01 00:00:00 BC", "294276-12-31 23:59:59.999999",
		"2000-01-01 00:00:00.000001", "1999-12-31 23:59:59.999999", "4714-11-24 00:00:00 BC"}},
	{name: "ts3", typ: "timestamp(3)", noArray: true, vals: []string{"2020-01-01 00:00:00.123", "1900-06-30 12:00:00"}},
	{name: "tstz", typ: "timestamptz", vals: []string{"infinity", "-infinity", "4714-11-24 00:00:00+00 BC", "294276-12-31 23:59:59.999999+00",
		"2021-03-14 02:30:00.123456 America/New_York", "1969-12-31 23:59:59.999999+00", "2000-01-01 00:00:00+14"}},
	{name: "tstz0", typ: "timestamptz(0)", noArray: true, vals: []string{"2020-01-01 00:00:00+00", "1500-01-01 00:00:00+03"}},
	{name: "iv", typ: "interval", vals: []string{"0", "178956970 years 7 months 2147483647 days 2562047788:00:54.775807",
		"='-178956970 years -8 months -2147483648 days -2562047788 hours -54.775808 seconds'::interval", "1 mon -1 day 00:00:00.000001", "-00:00:00.000001", "1 year 2 mons 3 days 04:05:06.789"}},
	{name: "ivym", typ: "interval year to month", noArray: true, vals: []string{"1 year 2 months", "-3 months"}},
	{name: "u", typ: "uuid", vals: []string{"00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}},
	{name: "js", typ: "json", vals: []string{"{}", "[]", `{"a":{"b":[1,2,{"c":null}]},"e":"\u00e9\u0000"}`, `  {"dup":1, "dup":2}  `,
		`"str"`, "null", "1e400", `{"emoji":"\ud83d\ude80","raw":"🚀"}`}},
	{name: "jb", typ: "jsonb", vals: []string{"{}", "[]", `{"a":{"b":[1,2,{"c":null}]},"z":[[],{}]}`, `{"u":"\u00e9\ud83d\ude80 שלום"}`,
		`"x"`, "null", "123456789012345678901234567890.5", `{"k":"","NULL":null}`}},
	{name: "xm", typ: "xml", vals: []string{"<a/>", `<?xml version="1.0"?><r a="1">t&amp;<b>ü</b></r>`, "text only", "", "<x>🚀</x><!-- c --><y/>"}},
	{name: "ip", typ: "inet", vals: []string{"0.0.0.0", "255.255.255.255/32", "192.168.1.5/24", "::1", "2001:db8::ff00:42:8329/64", "::ffff:1.2.3.4"}},
	{name: "cd", typ: "cidr", vals: []string{"10.0.0.0/8", "0.0.0.0/0", "2001:db8::/32", "192.168.100.128/25", "::/0"}},
	{name: "mac", typ: "macaddr", vals: []string{"00:00:00:00:00:00", "ff:ff:ff:ff:ff:ff", "08:00:2b:01:02:03"}},
	{name: "mac8", typ: "macaddr8", vals: []string{"08:00:2b:01:02:03:04:05", "00:00:00:00:00:00:00:00", "ff:ff:ff:ff:ff:ff:ff:ff"}},
	{name: "pt", typ: "point", vals: []string{"(0,0)", "(1.5,-2.5)", "(NaN,Infinity)", "(-0,1e308)", "(0.1,4.9e-324)"}},
	{name: "ln", typ: "line", vals: []string{"{1,-1,0}", "{0,1,-5}", "{0.1,-1e300,3}"}},
	{name: "ls", typ: "lseg", vals: []string{"[(0,0),(1,1)]", "[(-1e300,1e-300),(3,4)]"}},
	{name: "bx", typ: "box", vals: []string{"(1,1),(0,0)", "(-1,-1),(-2,-2)", "(0.1,0.2),(0.1,0.2)"}},
	{name: "ph", typ: "path", vals: []string{"[(0,0),(1,1),(2,0)]", "((0,0),(1,1),(2,0))", "[(0.1,-0.1)]"}},
	{name: "pg", typ: "polygon", vals: []string{"((0,0),(1,1),(1,0))", "((0,0))", "((1e-300,1e300),(3,4))"}},
	{name: "ci", typ: "circle", vals: []string{"<(0,0),1>", "<(1.5,-1.5),0>", "<(0.1,0.2),1e300>"}},
	{name: "bt", typ: "bit(4)", vals: []string{"0000", "1111", "1010"}},
	{name: "vb", typ: "varbit", vals: []string{"", "1", "1010101010101010101", "=repeat('10', 500)::varbit"}},
	{name: "tsv", typ: "tsvector", vals: []string{"", "a fat cat", `'quoted space' 'é':1A,2B,3C,4D 'x':16383`, "üñí:1 שלום:2"}},
	{name: "tsq", typ: "tsquery", vals: []string{"fat & (rat | cat)", "!a <-> b", `'é':* & b:AB`, "a <3> (b | !c)"}},
	{name: "r4", typ: "int4range", vals: []string{"empty", "(,)", "[1,2)", "[-2147483648,2147483647)", "(,5]"}},
	{name: "r8", typ: "int8range", vals: []string{"empty", "[-9223372036854775808,9223372036854775807)", "[9007199254740993,)"}},
	{name: "rn", typ: "numrange", vals: []string{"empty", "(-Infinity,Infinity)", "[0.000001,1e20]", "(,NaN]", "[-5,-5]"}},
	{name: "rts", typ: "tsrange", vals: []string{"[-infinity,infinity]", "[2000-01-01,2000-01-02)", "empty", "(4713-01-01 BC,294276-12-31 23:59:59.999999]"}},
	{name: "rtz", typ: "tstzrange", vals: []string{"(,infinity)", "[4713-01-01 00:00+00 BC,294276-01-01 00:00+00)", "empty", "[2000-01-01 00:00:00.000001+00,)"}},
	{name: "rd", typ: "daterange", vals: []string{"[4713-01-01 BC,2000-01-01)", "empty", "[-infinity,infinity]", "(2000-01-01,2000-01-02]"}},
	{name: "mr4", typ: "int4multirange", vals: []string{"{}", "{[1,2),[5,7)}", "{(,0),[10,)}", "{(,)}"}},
	{name: "mr8", typ: "int8multirange", vals: []string{"{}", "{[-9223372036854775808,0),[9007199254740993,)}"}},
	{name: "mrn", typ: "nummultirange", vals: []string{"{}", "{(-Infinity,-1],[0.5,Infinity)}", "{[1,NaN]}"}},
	{name: "mrts", typ: "tsmultirange", vals: []string{"{}", "{[-infinity,2000-01-01),[2001-01-01,infinity]}"}},
	{name: "mrtz", typ: "tstzmultirange", vals: []string{"{}", "{[2000-01-01 00:00+00,2000-01-02 00:00+00),(2020-01-01 00:00+05:30,)}"}},
	{name: "mrd", typ: "datemultirange", vals: []string{"{}", "{[4713-01-01 BC,4712-01-01 BC),[2000-01-01,)}"}},
	{name: "o", typ: "oid", vals: []string{"0", "4294967295", "1259"}},
	{name: "lsn", typ: "pg_lsn", vals: []string{"0/0", "FFFFFFFF/FFFFFFFF", "16/B374D848"}},
	{name: "x8", typ: "xid8", vals: []string{"0", "18446744073709551615", "123"}},
	// A composite of types whose text depends on session settings: a full
	// carries composites as text, so this is the full's text path.
	{name: "mix", typ: "public.matrix_mix", vals: []string{
		"=ROW('-178956970 years -8 months -2147483648 days -2562047788 hours -54.775808 seconds', 0.1::float8 + 0.2, '2000-02-13', '2000-02-13 01:02:03.456789+05:30', '\\x00ff5c', 1234.56, 'frag <a/>')::public.matrix_mix",
		"=ROW('-1 day +02:03:04', 4.9e-324, '4713-01-01 BC', '-infinity', '\\x', -92233720368547758.08, '')::public.matrix_mix",
		"=ROW(NULL, 'NaN', 'infinity', '4714-11-24 00:00:00+00 BC', NULL, NULL, NULL)::public.matrix_mix",
	}},
	// Arrays beyond the generated twins: lower bounds other than 1, three
	// dimensions, elements that need quoting, and an array of NULLs only.
	{name: "i4_bounds", typ: "int4[]", noArray: true, vals: []string{"[0:1]={1,2}", "[-5:-4][1:1]={{1},{2}}", "{}", "{{{1,2},{3,4}},{{5,6},{7,NULL}}}", "{NULL,NULL}"}},
	{name: "tx_quoted", typ: "text[]", noArray: true, vals: []string{`{"NULL",NULL,"","{}","a,b","\"","\\"," "}`, `{{"🚀","e\u0301"},{"שלום",NULL}}`, "{}"}},
	// A value larger than a page, so that it is TOASTed and an update that
	// does not touch it sends it as unchanged.
	{name: "big", typ: "text", noArray: true, vals: []string{"=(SELECT string_agg(md5(g::text), '') FROM generate_series(1, 400) g)", "small"}},
}

// matrixLiteral renders value v of column c as an SQL expression of c's type.
func matrixLiteral(c matrixColumn, v string) string {
	if e, ok := strings.CutPrefix(v, "="); ok {
		return e
	}
	return "'" + strings.ReplaceAll(v, "'", "''") + "'::" + c.typ
}

// matrixValues returns the expressions of row r, in the order of
// matrixColumnNames: each column's value number r+shift (cycling), and each
// array twin built from it by r's pattern.
func matrixValues(r, shift int) []string {
	var out []string
	for _, c := range matrixColumns {
		k := r + shift
		v := matrixLiteral(c, c.vals[k%len(c.vals)])
		out = append(out, v)
		if c.noArray {
			continue
		}
		next := matrixLiteral(c, c.vals[(k+1)%len(c.vals)])
		var a string
		switch (r + shift) % 4 {
		case 0:
			a = fmt.Sprintf("ARRAY[%s, NULL, %s]::%s[]", v, next, c.typ)
		case 1:
			a = fmt.Sprintf("'{}'::%s[]", c.typ)
		case 2:
			a = fmt.Sprintf("ARRAY[[%s, %s], [NULL, %s]]::%s[]", v, next, v, c.typ)
		default:
			a = "NULL"
		}
		out = append(out, a)
	}
	return out
}

func matrixColumnNames() []string {
	var out []string
	for _, c := range matrixColumns {
		out = append(out, pgx.Identifier{c.name}.Sanitize())
		if !c.noArray {
			out = append(out, pgx.Identifier{c.name + "_a"}.Sanitize())
		}
	}
	return out
}

// matrixSchema creates the matrix table and a second one keyed by a
// composite of types whose text forms are not canonical, so that updates
// and deletes must find rows by them.
func matrixSchema() string {
	var b strings.Builder
	b.WriteString("CREATE TYPE public.matrix_mix AS (iv interval, f8 float8, d date, tz timestamptz, b bytea, m money, x xml);\n")
	b.WriteString("CREATE TABLE public.matrix (\n\tid int PRIMARY KEY")
	for _, c := range matrixColumns {
		fmt.Fprintf(&b, ",\n\t%s %s", pgx.Identifier{c.name}.Sanitize(), c.typ)
		if !c.noArray {
			fmt.Fprintf(&b, ",\n\t%s %s[]", pgx.Identifier{c.name + "_a"}.Sanitize(), c.typ)
		}
	}
	b.WriteString("\n);\n")
	b.WriteString("CREATE TABLE public.matrix_full (LIKE public.matrix);\nALTER TABLE public.matrix_full REPLICA IDENTITY FULL;\n")
	b.WriteString(`CREATE TABLE public.matrix_keys (
	n numeric, tz timestamptz, t text, b bytea, u uuid, f float8, d date, v text,
	PRIMARY KEY (n, tz, t, b, u, f, d)
);`)
	return b.String()
}

// matrixInsert inserts rows first..first+count-1 with values shifted by
// shift, an all-NULL row at first+count, and rows of matrix_keys.
func matrixInsert(first, count, shift int) string {
	names := strings.Join(matrixColumnNames(), ", ")
	var b strings.Builder
	for r := 0; r < count; r++ {
		fmt.Fprintf(&b, "INSERT INTO public.matrix (id, %s) VALUES (%d, %s);\n", names, first+r, strings.Join(matrixValues(r, shift), ", "))
	}
	fmt.Fprintf(&b, "INSERT INTO public.matrix (id) VALUES (%d);\n", first+count)
	fmt.Fprintf(&b, "INSERT INTO public.matrix_full SELECT * FROM public.matrix WHERE id BETWEEN %d AND %d;\n", first, first+count)
	fmt.Fprintf(&b, `INSERT INTO public.matrix_keys VALUES
	(1.10 + %[1]d, 'infinity', 'ünï 🚀 %[1]d', '\x00', '00000000-0000-0000-0000-000000000000', 'NaN', '-infinity', 'a'),
	(-0.000001 - %[1]d, '4713-01-01 00:00+00 BC', '', '\x', 'ffffffff-ffff-ffff-ffff-ffffffffffff', -0.0 - %[1]d, '5874897-12-31', 'b'),
	('NaN', '2000-01-01 00:00:00.000001+05:30', 'e'||chr(769)||%[1]d, '\xff00', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 4.9e-324 * %[1]d, '2000-02-29', 'c');
`, first)
	return b.String()
}

// matrixUpdateAll sets every column of row id of table to the values of
// row r shifted by shift.
func matrixUpdateAll(table string, id, r, shift int) string {
	names := matrixColumnNames()
	vals := matrixValues(r, shift)
	set := make([]string, len(names))
	for i := range names {
		set[i] = names[i] + " = " + vals[i]
	}
	return fmt.Sprintf("UPDATE %s SET %s WHERE id = %d;\n", table, strings.Join(set, ", "), id)
}

// requireSameColumns names, for a table that differs, each column whose
// values differ between src and dst and the first row where they do, so a
// failure says which type did not come through.
func requireSameColumns(t *testing.T, src, dst, table, key string) {
	t.Helper()
	ctx := context.Background()
	sc, dc := connectPair(t, src, dst)
	read := func(c *pgx.Conn, col string) (map[string]*string, error) {
		// row(col)::text prints the value with its type's output function,
		// as row::text does for the whole row.
		rows, err := c.Query(ctx, fmt.Sprintf("SELECT (%s)::text, row(%s)::text FROM %s", key, pgx.Identifier{col}.Sanitize(), table))
		if err != nil {
			return nil, err
		}
		m := map[string]*string{}
		for rows.Next() {
			var k string
			var v *string
			if err := rows.Scan(&k, &v); err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, rows.Err()
	}
	rows, err := sc.Query(ctx, `SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, table)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	show := func(v *string) string {
		if v == nil {
			return "NULL"
		}
		s := *v
		if len(s) > 200 {
			s = s[:200] + fmt.Sprintf("…(%d bytes)", len(*v))
		}
		return fmt.Sprintf("%q", s)
	}
	var diffs []string
	for _, col := range cols {
		a, err := read(sc, col)
		if err != nil {
			t.Fatal(err)
		}
		b, err := read(dc, col)
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("%s: %v", col, err))
			continue
		}
		for k, av := range a {
			bv, ok := b[k]
			if !ok {
				diffs = append(diffs, fmt.Sprintf("%s: row %s missing on the target", col, k))
				break
			}
			if (av == nil) != (bv == nil) || (av != nil && *av != *bv) {
				diffs = append(diffs, fmt.Sprintf("%s: row %s: source %s, target %s", col, k, show(av), show(bv)))
				break
			}
		}
		if len(a) != len(b) {
			diffs = append(diffs, fmt.Sprintf("%s: source %d rows, target %d", col, len(a), len(b)))
		}
	}
	if len(diffs) > 0 {
		t.Errorf("%s in %s differs from source %s:\n%s", table, dst, src, strings.Join(diffs, "\n"))
	}
}

// setDatabase sets each of settings ("name = value") as db's default.
func setDatabase(t *testing.T, db string, settings ...string) {
	t.Helper()
	for _, s := range settings {
		testenv.Exec(t, db, fmt.Sprintf("ALTER DATABASE %s SET %s", pgx.Identifier{db}.Sanitize(), s))
	}
}

// requireSameMatrix compares the matrix tables column by column, then every
// table by count and digest of row::text.
func requireSameMatrix(t *testing.T, src, dst string) {
	t.Helper()
	requireSameColumns(t, src, dst, "public.matrix", "id")
	requireSameColumns(t, src, dst, "public.matrix_full", "id")
	requireSameColumns(t, src, dst, "public.matrix_keys", "(n, tz, t, b, u, f, d)")
	requireSameRows(t, src, dst)
}

// A column of every built-in type family and an array of each, with values
// at their edges, comes through a full and its restore, and through a
// producer and a broker replaying inserts, updates that change every
// column, updates that leave a TOASTed value alone, key changes and
// deletes; equal to the source at the end, and so is a restore of the
// whole chain.
func TestTypeMatrix(t *testing.T) {
	src := testenv.CreateDB(t, "matrixsrc")
	restored := testenv.CreateDB(t, "matrixrestored")
	dst := testenv.CreateDB(t, "matrixdst")
	final := testenv.CreateDB(t, "matrixfinal")
	// The source prints, and the targets read, by settings unlike the
	// server's defaults and unlike each other's.
	setDatabase(t, src, "IntervalStyle = 'sql_standard'", "DateStyle = 'SQL, DMY'", "extra_float_digits = 0",
		"bytea_output = 'escape'", "TimeZone = 'Asia/Kathmandu'")
	for _, db := range []string{restored, dst, final} {
		setDatabase(t, db, "xmloption = document", "DateStyle = 'German, YMD'", "IntervalStyle = 'postgres_verbose'",
			"TimeZone = 'America/St_Johns'")
	}
	testenv.Exec(t, src, matrixSchema())
	const rows = 12
	testenv.Exec(t, src, matrixInsert(1, rows, 0))
	chainURL := "file://" + filepath.Join(t.TempDir(), "chain")
	stream := fmt.Sprintf("matrix-%d", time.Now().UnixNano()%1e6)

	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
	mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(restored))
	requireSameMatrix(t, src, restored)

	mustSluice(t, "backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL, "--rollover-window", "1s", "--detach")
	mustSluice(t, "sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst),
		"--stream-id", stream, "--poll-interval", "300ms", "--reset-target-data", "--yes", "--detach")

	testenv.Exec(t, src, matrixInsert(100, rows, 3))
	var upd strings.Builder
	for _, table := range []string{"public.matrix", "public.matrix_full"} {
		for r := 0; r < rows; r++ {
			upd.WriteString(matrixUpdateAll(table, 1+r, r, 5))
			upd.WriteString(matrixUpdateAll(table, 100+r, r, 7))
		}
		upd.WriteString(matrixUpdateAll(table, 1+rows, 0, 1)) // the all-NULL row gets values
		// Updates that leave the TOASTed columns as they were.
		upd.WriteString("UPDATE " + table + " SET i4 = i4 + 1 WHERE big IS NOT NULL AND i4 < 2147483647;\n")
		upd.WriteString("UPDATE " + table + " SET id = id + 1000 WHERE id IN (2, 101);\n")
		upd.WriteString("UPDATE " + table + " SET tx = NULL, tx_a = '{}', by = '', js = NULL WHERE id = 3;\n")
	}
	upd.WriteString("UPDATE public.matrix_keys SET v = v || '!', tz = tz WHERE v IN ('a', 'c');\n")
	upd.WriteString("UPDATE public.matrix_keys SET n = n * 2 WHERE v = 'b';\n")
	testenv.Exec(t, src, upd.String())
	testenv.Exec(t, src, `DELETE FROM public.matrix WHERE id IN (4, 1002, 105);
		DELETE FROM public.matrix_full WHERE id IN (4, 1002, 105, 7);
		DELETE FROM public.matrix_keys WHERE v IN ('c!', 'b') AND t <> '';
		DELETE FROM public.matrix_keys WHERE d = '-infinity' AND n > 100`)
	testenv.Exec(t, src, matrixInsert(200, 4, 9))

	waitCaughtUp(t, src, 3*time.Minute)
	mustSluice(t, "backup", "stream", "stop", "--target", chainURL)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	waitBrokerAtTip(t, stream, chainURL, nil, 3*time.Minute)
	requireSameMatrix(t, src, dst)
	stopBroker(t, chainURL, stream)

	mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(final))
	requireSameMatrix(t, src, final)
}

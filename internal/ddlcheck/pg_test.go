package ddlcheck

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
)

func testNames() *Names {
	return NamesOf(&chain.Schema{
		Enums:            []chain.Enum{{Schema: "public", Name: "mood"}},
		Types:            []chain.UserType{{Schema: "app", Name: "positive"}, {Schema: "Other Schema", Name: "My Type"}},
		Extensions:       []string{"citext", "uuid-ossp"},
		ExtensionSchemas: map[string]string{"citext": "public", "uuid-ossp": "ext"},
	})
}

func refused(t *testing.T, err error, what ...any) {
	t.Helper()
	var ce *errcode.Error
	if !errors.As(err, &ce) || ce.Code != errcode.ChainSchemaRefused {
		t.Errorf("%v: want %s, got %v", what, errcode.ChainSchemaRefused, err)
	}
}

func TestPGTypeAcceptsWhatSourcesRecord(t *testing.T) {
	for _, typ := range []string{
		"integer", "bigint", "smallint", "numeric(40,20)", "numeric", "character varying(10)", "character(3)", "text",
		"timestamp(3) with time zone", "timestamp without time zone", "time(6) without time zone", "time with time zone",
		"interval", "interval day to second(3)", "interval year to month", "bit(5)", "bit varying(8)", `"char"`, "bytea",
		"double precision", "real", "boolean", "uuid", "jsonb", "json", "xml", "money", "inet", "cidr", "macaddr",
		"point", "tsvector", "int4range", "integer[]", "text[][]", "numeric(10,2)[]", "public.mood", "public.mood[]",
		"app.positive", `"Other Schema"."My Type"[]`, "public.citext", "pg_catalog.int4", "character varying",
		"ext.geometry(Point,4326)", "pg_lsn", "oid", "tsquery", "date", "daterange", "int4multirange",
	} {
		out, err := PGType(Where{What: "type"}, typ, testNames())
		if err != nil {
			t.Errorf("%s: %v", typ, err)
			continue
		}
		again, err := PGType(Where{What: "type"}, out, testNames())
		if err != nil || again != out {
			t.Errorf("%s renders %q, which renders %q (%v)", typ, out, again, err)
		}
	}
}

func TestPGTypeRefusesEverythingElse(t *testing.T) {
	for _, typ := range []string{
		"numeric); CREATE TABLE public.pwned (x int); CREATE TABLE public.pwned_pad (y numeric",
		"int, y int", "int DEFAULT 1", "int NOT NULL", "int COLLATE \"C\"", "int GENERATED ALWAYS AS (1) STORED",
		"evil.t", "nosuch.unknown", "a.b.c", "int; DROP TABLE x", "SETOF int", "x.y%TYPE", "int[x]",
		"numeric(pg_read_file('x'))", "int) PARTITION BY RANGE (c", "", "int -- ", "int /*", "int\x00",
		"numeric(1+1)",
	} {
		_, err := PGType(Where{Table: "public.t", Column: "column n", What: "type"}, typ, testNames())
		refused(t, err, typ)
	}
}

func TestPGExprAcceptsRecordedForms(t *testing.T) {
	for _, e := range []struct {
		text    string
		columns bool
	}{
		{"0", InDefault}, {"'abc'::text", InDefault}, {"now()", InDefault}, {"CURRENT_TIMESTAMP", InDefault},
		{"nextval('public.t_id_seq'::regclass)", InDefault}, {"'{}'::jsonb", InDefault}, {"gen_random_uuid()", InDefault},
		{"ext.uuid_generate_v4()", InDefault}, {"'sad'::public.mood", InDefault}, {"ARRAY[1, 2]", InDefault},
		{"(id * 2)", WithColumns}, {"lower(payload)", WithColumns}, {"((\"Value\" <> 'forbidden'::text))", WithColumns},
		{"(a IS NOT NULL) AND (b > 0)", WithColumns}, {"CASE WHEN a > 0 THEN 'p' ELSE 'n' END", WithColumns},
		{"to_tsvector('english'::regconfig, body)", WithColumns}, {"COALESCE(a, b)", WithColumns},
		{"(VALUE > (0)::numeric)", WithColumns}, {"EXTRACT(year FROM at)", WithColumns}, {"a AT TIME ZONE 'UTC'", WithColumns},
	} {
		out, err := PGExpr(Where{What: "expression"}, e.text, testNames(), e.columns)
		if err != nil {
			t.Errorf("%s: %v", e.text, err)
			continue
		}
		if again, err := PGExpr(Where{What: "expression"}, out, testNames(), e.columns); err != nil || again != "("+out+")" && again != out {
			t.Errorf("%s renders %q, which renders %q (%v)", e.text, out, again, err)
		}
	}
}

func TestPGExprRefusesEverythingElse(t *testing.T) {
	for _, e := range []string{
		"1); DROP TABLE x; SELECT (1", "1; DROP TABLE x", "(SELECT 1)", "pg_read_file('/etc/passwd')",
		"query_to_xml('CREATE TABLE pwned (x int)', true, true, '')", "public.evil()", "pg_catalog.set_config('a', 'b', false)",
		"count(*)", "sum(a) OVER ()", "1 FROM pg_class", "1 AS x", "$1", "a OPERATOR(evil.+) b",
		"lo_export(1, '/tmp/x')", "dblink_exec('x')", "ext.dblink_exec('x')", "1, 2", "EXISTS (SELECT 1)",
		"nextval(current_setting('x'))", "x.y.z", "t.*", "a COLLATE evil.c", "",
	} {
		_, err := PGExpr(Where{Table: "public.t", Column: "column n", What: "default"}, e, testNames(), WithColumns)
		refused(t, err, e)
	}
	_, err := PGExpr(Where{What: "default"}, "a + 1", testNames(), InDefault)
	refused(t, err, "x")
}

func TestPGObjects(t *testing.T) {
	tbl := &chain.Table{Schema: "public", Name: "events", PartitionKey: "RANGE (at)",
		PartitionBound: "FOR VALUES FROM ('2026-01-01 00:00:00+00') TO ('2026-02-01 00:00:00+00')"}
	for _, c := range []struct{ key, bound string }{
		{"RANGE (at)", "FOR VALUES FROM ('2026-01-01') TO ('2026-02-01')"},
		{"LIST (kind)", "FOR VALUES IN ('click')"},
		{"HASH (id)", "FOR VALUES WITH (modulus 2, remainder 0)"},
		{"LIST (lower(kind))", "DEFAULT"},
		{"RANGE (a, b)", "FOR VALUES FROM (MINVALUE, 0) TO (10, MAXVALUE)"},
	} {
		tbl.PartitionKey, tbl.PartitionBound = c.key, c.bound
		if out, err := PGPartitionKey(tbl, testNames()); err != nil {
			t.Errorf("%s: %v", c.key, err)
		} else {
			t.Logf("%s -> %s", c.key, out)
		}
		if out, err := PGPartitionBound(tbl, testNames()); err != nil {
			t.Errorf("%s: %v", c.bound, err)
		} else {
			t.Logf("%s -> %s", c.bound, out)
		}
	}
	for _, bad := range []string{"FOR VALUES IN (1); DROP TABLE x", "FOR VALUES IN ((SELECT 1))", "FOR VALUES IN (pg_sleep(10))", "DEFAULT; SELECT 1"} {
		tbl.PartitionBound = bad
		_, err := PGPartitionBound(tbl, testNames())
		refused(t, err, "x")
	}
	for _, bad := range []string{"RANGE (at); DROP TABLE x", "RANGE ((SELECT 1))", "RANGE (public.f(at))"} {
		tbl.PartitionKey = bad
		_, err := PGPartitionKey(tbl, testNames())
		refused(t, err, "x")
	}

	tbl = &chain.Table{Schema: "public", Name: "big"}
	for _, ix := range []chain.Index{
		{Name: "big_at", Definition: "CREATE INDEX big_at ON public.big USING btree (at)"},
		{Name: "big_lower", Definition: "CREATE INDEX big_lower ON public.big USING btree (lower(payload))"},
		{Name: "big_u", Unique: true, Definition: "CREATE UNIQUE INDEX big_u ON public.big USING btree (a, b DESC NULLS LAST) INCLUDE (c) WHERE (a > 0)"},
		{Name: "big_trgm", Definition: "CREATE INDEX big_trgm ON public.big USING gin (payload public.gin_trgm_ops)"},
		{Name: "big_p", Definition: "CREATE INDEX big_p ON ONLY public.big USING btree (kind)"},
		{Name: "big_f", Definition: "CREATE INDEX big_f ON public.big USING btree (a) WITH (fillfactor='70')"},
	} {
		out, err := PGIndex(tbl, ix, testNames())
		if err != nil {
			t.Errorf("%s: %v", ix.Definition, err)
			continue
		}
		t.Logf("%s", out)
	}
	for _, def := range []string{
		"CREATE INDEX big_at ON public.big USING btree (at); DROP TABLE x",
		"CREATE INDEX big_at ON public.other USING btree (at)",
		"CREATE INDEX other ON public.big USING btree (at)",
		"CREATE INDEX big_at ON public.big USING btree ((pg_read_file('x')))",
		"CREATE INDEX big_at ON public.big USING btree (at) WHERE (SELECT true)",
		"DROP TABLE public.big",
	} {
		_, err := PGIndex(tbl, chain.Index{Name: "big_at", Definition: def}, testNames())
		refused(t, err, "x")
	}

	for _, c := range []chain.Constraint{
		{Name: "k", Type: "c", Definition: "CHECK ((kind <> ''::text))"},
		{Name: "k", Type: "c", Definition: "CHECK ((a > 0)) NOT VALID"},
		{Name: "f", Type: "f", Definition: "FOREIGN KEY (a) REFERENCES public.other(id) ON DELETE CASCADE"},
		{Name: "x", Type: "x", Definition: "EXCLUDE USING gist (room WITH =, during WITH &&)"},
	} {
		out, err := PGConstraint(tbl, c, testNames())
		if err != nil {
			t.Errorf("%s: %v", c.Definition, err)
			continue
		}
		t.Logf("%s", out)
	}
	for _, c := range []chain.Constraint{
		{Name: "k", Type: "c", Definition: "CHECK ((a > 0)); DROP TABLE x"},
		{Name: "k", Type: "c", Definition: "CHECK ((SELECT true))"},
		{Name: "k", Type: "c", Definition: "CHECK (pg_catalog.pg_sleep(1) IS NULL)"},
		{Name: "k", Type: "f", Definition: "CHECK ((a > 0))"},
		{Name: "k", Type: "c", Definition: "PRIMARY KEY (a)"},
		{Name: "k", Type: "c", Definition: "CHECK (a > 0), ADD COLUMN pwned int"},
	} {
		_, err := PGConstraint(tbl, c, testNames())
		refused(t, err, "x")
	}
}

func TestPGUserTypes(t *testing.T) {
	names := testNames()
	for _, u := range []chain.UserType{
		{Schema: "app", Name: "positive", Kind: chain.TypeDomain, Definition: "CREATE DOMAIN app.positive AS numeric(12,2) DEFAULT 1 NOT NULL CONSTRAINT positive_check CHECK ((VALUE > (0)::numeric))"},
		{Schema: "public", Name: "email", Kind: chain.TypeDomain, Definition: `CREATE DOMAIN public.email AS text COLLATE "C" CONSTRAINT email_check CHECK ((VALUE ~~ '%@%'::text))`},
		{Schema: "public", Name: "money_pair", Kind: chain.TypeComposite, Definition: "CREATE TYPE public.money_pair AS (low app.positive, high app.positive, label text COLLATE \"C\")"},
		{Schema: "app", Name: "posrange", Kind: chain.TypeRange, Definition: "CREATE TYPE app.posrange AS RANGE (SUBTYPE = app.positive, MULTIRANGE_TYPE_NAME = app.posmultirange)"},
		{Schema: "public", Name: "floatrange", Kind: chain.TypeRange, Definition: "CREATE TYPE public.floatrange AS RANGE (SUBTYPE = double precision, SUBTYPE_DIFF = float8mi, MULTIRANGE_TYPE_NAME = public.floatranges)"},
		{Schema: "app", Name: "level", Kind: chain.TypeEnum, Definition: "CREATE TYPE app.level AS ENUM ('low', 'high')"},
	} {
		names.AddType(u.Schema, u.Name)
		out, err := PGUserType(u, names)
		if err != nil {
			t.Errorf("%s: %v", u.Definition, err)
			continue
		}
		t.Logf("%s", out)
	}
	for _, u := range []chain.UserType{
		{Schema: "app", Name: "positive", Kind: chain.TypeDomain, Definition: "CREATE DOMAIN app.positive AS int; DROP TABLE x"},
		{Schema: "app", Name: "positive", Kind: chain.TypeDomain, Definition: "CREATE TABLE app.positive (x int)"},
		{Schema: "app", Name: "positive", Kind: chain.TypeDomain, Definition: "CREATE DOMAIN app.other AS int"},
		{Schema: "app", Name: "positive", Kind: chain.TypeDomain, Definition: "CREATE DOMAIN app.positive AS int CHECK (pg_read_file('x') IS NULL)"},
		{Schema: "app", Name: "r", Kind: chain.TypeRange, Definition: "CREATE TYPE app.r AS RANGE (SUBTYPE = int, CANONICAL = public.evil)"},
		{Schema: "app", Name: "r", Kind: chain.TypeRange, Definition: "CREATE TYPE app.r AS RANGE (SUBTYPE = int, SUBTYPE_DIFF = public.evil)"},
		{Schema: "app", Name: "c", Kind: chain.TypeComposite, Definition: "CREATE TYPE app.c AS (a evil.t)"},
		{Schema: "app", Name: "c", Kind: "base", Definition: "CREATE TYPE app.c (INPUT = x, OUTPUT = y)"},
	} {
		_, err := PGUserType(u, names)
		refused(t, err, u.Definition)
	}
}

package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/testenv"
)

// userTypesDDL builds types on types, across two schemas, declared in an
// order other than their dependency order.
const userTypesDDL = `
CREATE SCHEMA app;
CREATE TYPE app.mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN app.positive AS numeric(12,2) DEFAULT 1 NOT NULL CONSTRAINT positive_check CHECK (VALUE > 0);
CREATE DOMAIN public.email AS text COLLATE "C" CHECK (VALUE LIKE '%@%');
CREATE TYPE public.money_pair AS (low app.positive, high app.positive, label public.email);
CREATE DOMAIN app.pair_list AS public.money_pair[];
CREATE TYPE app.posrange AS RANGE (SUBTYPE = app.positive);
CREATE TYPE public.floatrange AS RANGE (SUBTYPE = float8, SUBTYPE_DIFF = float8mi, MULTIRANGE_TYPE_NAME = public.floatranges);
CREATE TABLE app.things (
	id int PRIMARY KEY,
	price app.positive,
	contact public.email,
	pair public.money_pair,
	pairs app.pair_list,
	span app.posrange,
	spans app.posrange[],
	fr public.floatrange,
	frs public.floatranges,
	mood app.mood
);`

func readSchemaOf(t *testing.T, db string) (*chain.Schema, error) {
	t.Helper()
	conn, err := connect(context.Background(), testenv.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.BeginTx(context.Background(), pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	s, _, err := ReadSchema(context.Background(), tx)
	return s, err
}

func TestUserTypesRecordedInDependencyOrder(t *testing.T) {
	db := testenv.CreateDB(t, "types")
	testenv.Exec(t, db, userTypesDDL)
	s, err := readSchemaOf(t, db)
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, u := range s.Types {
		pos[u.Schema+"."+u.Name] = i
	}
	want := []string{"app.positive", "public.email", "public.money_pair", "app.pair_list", "app.posrange", "public.floatrange"}
	if len(s.Types) != len(want) {
		t.Fatalf("recorded types %v; want %v", s.Types, want)
	}
	for _, w := range want {
		if _, ok := pos[w]; !ok {
			t.Fatalf("type %s not recorded: %+v", w, s.Types)
		}
	}
	before := [][2]string{{"app.positive", "public.money_pair"}, {"public.email", "public.money_pair"},
		{"public.money_pair", "app.pair_list"}, {"app.positive", "app.posrange"}}
	for _, b := range before {
		if pos[b[0]] > pos[b[1]] {
			t.Errorf("%s is recorded after %s, which uses it: %+v", b[0], b[1], s.Types)
		}
	}
	defs := map[string]string{}
	for _, u := range s.Types {
		defs[u.Schema+"."+u.Name] = u.Definition
	}
	for name, parts := range map[string][]string{
		"app.positive":      {"CREATE DOMAIN", "numeric(12,2)", "DEFAULT", "NOT NULL", "CONSTRAINT positive_check CHECK"},
		"public.email":      {`COLLATE pg_catalog."C"`, "CHECK"},
		"public.money_pair": {"CREATE TYPE", "AS (low app.positive, high app.positive, label public.email)"},
		"app.pair_list":     {"AS public.money_pair[]"},
		"public.floatrange": {"SUBTYPE = double precision", "SUBTYPE_DIFF = float8mi", "MULTIRANGE_TYPE_NAME = public.floatranges"},
	} {
		for _, p := range parts {
			if !strings.Contains(defs[name], p) {
				t.Errorf("definition of %s lacks %q: %s", name, p, defs[name])
			}
		}
	}
	if len(s.Enums) != 1 || s.Enums[0].Name != "mood" {
		t.Errorf("enums are recorded apart: %+v", s.Enums)
	}

	// The definitions recreate every type on an empty database, in order.
	other := testenv.CreateDB(t, "typesre")
	testenv.Exec(t, other, `CREATE SCHEMA app; CREATE TYPE app.mood AS ENUM ('sad', 'ok', 'happy')`)
	for _, u := range s.Types {
		testenv.Exec(t, other, u.Definition)
	}
	again, err := readSchemaOf(t, other)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Types) != len(s.Types) {
		t.Fatalf("recreated %d types, want %d", len(again.Types), len(s.Types))
	}
	for i := range s.Types {
		if again.Types[i] != s.Types[i] {
			t.Errorf("type %d recreated as %+v, recorded as %+v", i, again.Types[i], s.Types[i])
		}
	}
}

// Extension types are the extension's to recreate: recorded by name only.
func TestExtensionTypesAreNotRecordedAsUserTypes(t *testing.T) {
	db := testenv.CreateDB(t, "exttypes")
	testenv.Exec(t, db, `CREATE EXTENSION citext; CREATE EXTENSION hstore;
		CREATE DOMAIN public.tag AS public.citext;
		CREATE TABLE public.t (id int PRIMARY KEY, name public.citext, attrs public.hstore, tags public.tag[])`)
	s, err := readSchemaOf(t, db)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Types) != 1 || s.Types[0].Name != "tag" {
		t.Fatalf("only the user's domain is a user type: %+v", s.Types)
	}
	if strings.Join(s.Extensions, ",") != "citext,hstore" {
		t.Fatalf("extensions recorded: %v", s.Extensions)
	}
}

func TestSchemaThatCannotBeCarriedIsRefused(t *testing.T) {
	db := testenv.CreateDB(t, "uncarried")
	testenv.Exec(t, db, `
		CREATE TYPE public.myint;
		CREATE FUNCTION public.myint_in(cstring) RETURNS public.myint LANGUAGE internal IMMUTABLE STRICT AS 'int4in';
		CREATE FUNCTION public.myint_out(public.myint) RETURNS cstring LANGUAGE internal IMMUTABLE STRICT AS 'int4out';
		CREATE TYPE public.myint (INPUT = public.myint_in, OUTPUT = public.myint_out, LIKE = int4);
		CREATE DOMAIN public.myints AS public.myint[];
		CREATE FUNCTION public.next_code() RETURNS int LANGUAGE sql AS 'SELECT 7';
		CREATE FUNCTION public.is_even(int) RETURNS bool LANGUAGE sql IMMUTABLE AS 'SELECT $1 % 2 = 0';
		CREATE TABLE public.a (id int PRIMARY KEY, v public.myint, vs public.myints);
		CREATE TABLE public.b (id int PRIMARY KEY DEFAULT public.next_code(), n int CHECK (public.is_even(n)));
		CREATE INDEX b_even ON public.b (public.is_even(n));
		CREATE TABLE public.refs (id int PRIMARY KEY, rel regclass, types regtype[]);
		CREATE TABLE public.fine (id int PRIMARY KEY, d date DEFAULT now())`)
	_, err := readSchemaOf(t, db)
	var e *errcode.Error
	if !errorsAs(err, &e) || e.Code != errcode.SourceSchemaUnsupported {
		t.Fatalf("want %s, got %v", errcode.SourceSchemaUnsupported, err)
	}
	for _, want := range []string{
		"column public.a.v (public.myint): type public.myint is a base type defined outside any extension",
		"column public.a.vs (public.myints)",
		"default value for column id of table public.b uses function public.next_code()",
		"constraint b_n_check on table public.b uses function public.is_even(integer)",
		"index public.b_even uses function public.is_even(integer)",
		"column public.refs.rel (regclass): a reg* value names a catalog object by its OID",
		"column public.refs.types (regtype[]): a reg* value",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "public.fine") {
		t.Errorf("a built-in default is carried:\n%v", err)
	}
}

func errorsAs(err error, target **errcode.Error) bool {
	e, ok := errcode.As(err)
	if ok {
		*target = e
	}
	return ok
}

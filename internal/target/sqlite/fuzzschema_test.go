package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/ddlcheck"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target/targettest"
)

// Fragments of recorded text, valid and hostile, the random schemas below
// are built of.
var (
	fuzzNames = []string{"id", "v", "n", `a"; DROP TABLE x; --`, "b`c", `c'); DROP TABLE x; /*`, "weird name", "ünï"}
	fuzzTypes = []string{
		"integer", "bigint", "text", "numeric(10,2)", "character varying(20)", "timestamp with time zone",
		"boolean", "bytea", "jsonb", "integer[]", "uuid",
		"numeric); CREATE TABLE pwned (x int); CREATE TABLE pwned_pad (y numeric",
		"text COLLATE \"C\"", "integer DEFAULT 1", "SETOF integer", "integer; DROP TABLE x",
	}
	fuzzDefaults = []string{
		"", "", "0", "'a'::text", "now()", "CURRENT_TIMESTAMP", "nextval('public.s'::regclass)",
		"0); CREATE TABLE pwned (x int); SELECT (1", "(SELECT 1)", "pg_read_file('/etc/passwd')",
		"query_to_xml('CREATE TABLE pwned (x int)', true, true, '')", "'x'; DROP TABLE x; --'",
	}
	fuzzChecks = []string{
		"CHECK (id > 0)", "CHECK (true); CREATE TABLE pwned (x int)", "CHECK ((SELECT true))",
		"CHECK (length(v) < 10)", "CHECK (pg_sleep(1) IS NOT NULL)",
	}
	fuzzIndexes = []string{
		"CREATE INDEX %s ON public.t USING btree (id)",
		"CREATE INDEX %s ON public.t USING btree (id); CREATE TABLE pwned (x int)",
		"CREATE INDEX CONCURRENTLY %s ON public.t (id)",
	}
	// firstWord is the statement kinds a restore may send SQLite.
	firstWord = regexp.MustCompile(`(?i)^\s*(CREATE (TABLE|INDEX|UNIQUE INDEX)|SELECT|PRAGMA|INSERT|BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|DELETE|UPDATE|DROP (TABLE|INDEX) IF EXISTS|ANALYZE)\b`)
)

// randomSchema draws a one-table schema from the fragments.
func randomSchema(r *rand.Rand) *chain.Schema {
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	tb := chain.Table{Schema: "public", Name: "t"}
	if r.IntN(4) == 0 {
		tb.Name = pick(fuzzNames)
	}
	used := map[string]bool{}
	for i := 0; i < 1+r.IntN(4); i++ {
		name := pick(fuzzNames)
		if used[name] {
			continue
		}
		used[name] = true
		c := chain.Column{Name: name, Type: pick(fuzzTypes), Encoding: chain.EncodingText, Default: pick(fuzzDefaults)}
		if r.IntN(6) == 0 {
			c.Generated, c.Default = pick(fuzzDefaults), ""
		}
		tb.Columns = append(tb.Columns, c)
	}
	if r.IntN(3) == 0 {
		tb.Constraints = []chain.Constraint{{Name: "c", Type: "c", Definition: pick(fuzzChecks)}}
	}
	if r.IntN(3) == 0 {
		tb.Indexes = []chain.Index{{Name: "i", Columns: []string{tb.Columns[0].Name}, Definition: fmt.Sprintf(pick(fuzzIndexes), "i")}}
	}
	if r.IntN(2) == 0 {
		tb.PrimaryKey = []string{tb.Columns[0].Name}
	}
	return &chain.Schema{Tables: []chain.Table{tb}}
}

// Random recorded schemas, built of valid and hostile fragments, meet the
// validators and then a restore into a traced SQLite file: what the
// validators refuse the target refuses with the code, and whatever passes
// or fails, every statement SQLite received is one plain statement of an
// expected kind with the hostile text only inside quotes, and no table
// named pwned exists. Deterministic (fixed seeds) and bounded; the fuzz
// targets of internal/ddlcheck explore further under -fuzz.
func TestRandomSchemasReachSQLiteInert(t *testing.T) {
	ctx := context.Background()
	passed := 0
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 25))
		s := randomSchema(r)
		_, pgVerdict := ddlcheck.Postgres(s)
		verdict := ddlcheck.Check(s)
		tg, log := openTraced(t)
		err := tg.Prepare(ctx, s, false)
		if err == nil {
			_, err = tg.LoadTable(ctx, chaintest.Store(t), s, chain.TableData{Table: s.Tables[0].QualifiedName()}, nil)
		}
		if err == nil {
			err = tg.Finish(ctx, s)
		}
		if verdict != nil && !errcode.Is(err, errcode.ChainSchemaRefused) {
			t.Errorf("seed %d: the validators refuse %+v (%v), the target says %v", seed, s.Tables[0], verdict, err)
		}
		if verdict == nil && pgVerdict != nil {
			t.Errorf("seed %d: ddlcheck.Check passes what ddlcheck.Postgres refuses (%v): %+v", seed, pgVerdict, s.Tables[0])
		}
		if verdict == nil && err == nil {
			passed++
		}
		for _, stmt := range log.Statements() {
			if e := targettest.Inert(stmt, false); e != nil {
				t.Errorf("seed %d: %v: %q", seed, e, stmt)
			}
			if !firstWord.MatchString(stmt) {
				t.Errorf("seed %d: a statement of an unexpected kind: %q", seed, stmt)
			}
		}
		var n int
		if err := tg.db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name LIKE '%pwned%'`).Scan(&n); err != nil || n != 0 {
			t.Errorf("seed %d: %d objects named pwned (%v)", seed, n, err)
		}
	}
	if passed == 0 {
		t.Error("no random schema passed; the fragments test nothing but refusals")
	}
	t.Logf("%d of 300 random schemas passed the validators and restored", passed)
}

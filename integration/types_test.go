package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// userTypesSchema is an application's schema built on its own types: domains
// over built-ins and over each other, a composite of domains, ranges over a
// domain and over a built-in with its multirange, arrays of each, an enum,
// and the types of two extensions.
const userTypesSchema = `
CREATE EXTENSION citext;
CREATE EXTENSION hstore;
CREATE SCHEMA app;
CREATE TYPE app.mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN app.positive AS numeric(12,2) DEFAULT 1 CONSTRAINT positive_check CHECK (VALUE > 0);
CREATE DOMAIN public.email AS text COLLATE "C" CHECK (VALUE LIKE '%@%');
CREATE TYPE public.money_pair AS (low app.positive, high app.positive, label public.email);
CREATE DOMAIN app.pair_list AS public.money_pair[];
CREATE TYPE app.posrange AS RANGE (SUBTYPE = app.positive);
CREATE TYPE public.floatrange AS RANGE (SUBTYPE = float8, SUBTYPE_DIFF = float8mi, MULTIRANGE_TYPE_NAME = public.floatranges);
CREATE DOMAIN app.tag AS public.citext NOT NULL;
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
	mood app.mood,
	moods app.mood[],
	name public.citext,
	tags app.tag[],
	attrs public.hstore
);`

// userTypesRows are values at the edges: NULLs inside and outside arrays
// and composites, empty arrays, empty and unbounded ranges, an empty
// multirange, NaN and infinities, non-ASCII text.
func userTypesRows(from int) string {
	return fmt.Sprintf(`
INSERT INTO app.things VALUES
 (%[1]d, 9999999999.99, 'jörg@例え.jp', ROW(1, 2, 'a@b'), ARRAY[ROW(1, 2, 'x@y')::public.money_pair, NULL, ROW(NULL, 3, NULL)::public.money_pair]::app.pair_list,
  '[1,5)', ARRAY['[1,2)'::app.posrange, 'empty', NULL], '(,)', '{}', 'happy', '{sad,NULL,ok}', 'MiXeD Case', ARRAY['Tag'::app.tag], 'a=>1, "b c"=>NULL'),
 (%[1]d+1, NULL, NULL, NULL, NULL, 'empty', '{}', '[-Infinity,Infinity]', '{[1,2),[3.5,4]}', NULL, '{}', NULL, '{}', ''),
 (%[1]d+2, 0.01, 'q@q', ROW(NULL, NULL, NULL), '{}', '(0.01,)', ARRAY[NULL]::app.posrange[], '(NaN,NaN]', '{(,0)}', 'sad', NULL, 'ÅÄÖ', NULL, NULL)`, from)
}

// A schema built on user-defined types comes through a full, a restore, and
// a producer and broker replaying changes to every one of those columns,
// and a table whose types were created while the stream ran, equal at the
// end row by row.
func TestUserDefinedTypesRoundTrip(t *testing.T) {
	src := testenv.CreateDB(t, "typessrc")
	restored := testenv.CreateDB(t, "typesrestored")
	dst := testenv.CreateDB(t, "typesdst")
	testenv.Exec(t, src, userTypesSchema)
	testenv.Exec(t, src, userTypesRows(1))
	chainURL := "file://" + filepath.Join(t.TempDir(), "chain")
	stream := fmt.Sprintf("types-%d", time.Now().UnixNano()%1e6)

	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
	r := mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(restored))
	// Views, routines and the like now travel (issue 34); what restore
	// still names as not carried begins with roles.
	if !strings.Contains(r.stdout, "not carried by the chain, so not restored: roles") {
		t.Errorf("restore says what it does not carry:\n%s", r)
	}
	requireSameRows(t, src, restored)

	mustSluice(t, "backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL, "--rollover-window", "1s", "--detach")
	mustSluice(t, "sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst),
		"--stream-id", stream, "--poll-interval", "300ms", "--reset-target-data", "--yes", "--detach")
	testenv.Exec(t, src, userTypesRows(10))
	testenv.Exec(t, src, `UPDATE app.things SET pair = ROW(5, 6, 'new@x'), spans = spans || '[7,8)'::app.posrange,
		frs = '{[0,1]}', tags = ARRAY['ONE', 'two']::app.tag[], attrs = attrs || 'k=>v' WHERE id IN (1, 11);
		DELETE FROM app.things WHERE id = 2`)
	// Types created while the stream runs travel with the first table that
	// uses them.
	testenv.Exec(t, src, `CREATE TYPE app.level AS ENUM ('low', 'high');
		CREATE DOMAIN app.short_code AS varchar(8) CHECK (VALUE ~ '^[A-Z]+$');
		CREATE TYPE app.badge AS (code app.short_code, lvl app.level);
		CREATE TABLE app.later (id int PRIMARY KEY, b app.badge, codes app.short_code[], lvl app.level);
		INSERT INTO app.later VALUES (1, ROW('AB', 'low'), '{X,Y}', 'high'), (2, NULL, '{}', NULL)`)
	waitCaughtUp(t, src, 2*time.Minute)
	mustSluice(t, "backup", "stream", "stop", "--target", chainURL)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	waitBrokerAtTip(t, stream, chainURL, nil, 2*time.Minute)
	requireSameRows(t, src, dst)
	stopBroker(t, chainURL, stream)
}

// A schema the chain cannot carry is refused before the source is touched:
// no slot, no publication, nothing in the store.
func TestUncarriedSchemaRefusedBeforeAnythingExists(t *testing.T) {
	src := testenv.CreateDB(t, "uncarried")
	testenv.Exec(t, src, `CREATE FUNCTION public.next_code() RETURNS int LANGUAGE sql AS 'SELECT 7';
		CREATE TABLE public.codes (id int PRIMARY KEY DEFAULT public.next_code(), v text)`)
	chainURL := "file://" + filepath.Join(t.TempDir(), "chain")
	r := sluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
	requireRefusal(t, r, "SLUICE-E-SOURCE-SCHEMA-UNSUPPORTED", "default value for column id of table public.codes", "public.next_code()")
	var n int
	if err := queryInt(t, src, `SELECT (SELECT count(*) FROM pg_replication_slots WHERE database = current_database()) + (SELECT count(*) FROM pg_publication)`, &n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("the refused full left %d slots or publications on the source", n)
	}
}

// A table created while the stream runs that the chain cannot carry stops
// the producer with the same named refusal a full gives, before its first
// change is committed, rather than a broker failing on it later.
func TestUncarriedTableMetByTheProducerIsRefused(t *testing.T) {
	src := testenv.CreateDB(t, "uncarriedlater")
	testenv.Exec(t, src, `CREATE TABLE public.fine (id int PRIMARY KEY, v text)`)
	chainURL := "file://" + filepath.Join(t.TempDir(), "chain")
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
	mustSluice(t, "backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL, "--rollover-window", "1s", "--detach")
	testenv.Exec(t, src, `CREATE FUNCTION public.next_code() RETURNS int LANGUAGE sql AS 'SELECT 7';
		CREATE TABLE public.codes (id int PRIMARY KEY DEFAULT public.next_code(), v text);
		INSERT INTO public.codes (v) VALUES ('x')`)
	cl := temporalClient(t)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := cl.GetWorkflow(ctx, "producer/"+chainURL, "").Get(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "SLUICE-E-SOURCE-SCHEMA-UNSUPPORTED") || !strings.Contains(err.Error(), "public.next_code()") {
		t.Fatalf("want the producer refused with SLUICE-E-SOURCE-SCHEMA-UNSUPPORTED naming the function, got %v", err)
	}
	if _, cat := openChainAt(t, chainURL); len(cat.Links()) != 1 {
		t.Fatalf("nothing of the uncarried table is committed; the chain holds %d links", len(cat.Links()))
	}
	r := sluice(t, "backup", "stream", "status", "--target", chainURL)
	if !strings.Contains(r.stdout, "error_code:") || !strings.Contains(r.stdout, "SLUICE-E-SOURCE-SCHEMA-UNSUPPORTED") {
		t.Fatalf("status names how the producer ended:\n%s", r)
	}
}

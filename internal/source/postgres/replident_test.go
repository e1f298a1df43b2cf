package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/testenv"
)

// identitySchema holds one table for each replica identity case; the
// comments say what the preflight must say about it.
const identitySchema = `
CREATE TABLE keyed (id int PRIMARY KEY, v text);                       -- fine
CREATE TABLE by_code (code text NOT NULL, v text);                     -- USING INDEX by_code_code
CREATE UNIQUE INDEX by_code_code ON by_code (code);
CREATE UNIQUE INDEX by_code_wide ON by_code (code, v);                 -- not the narrowest, and v may be NULL
CREATE TABLE keyless (a int, b text);                                  -- FULL
CREATE TABLE full_ident (a int, b text);                               -- fine
ALTER TABLE full_ident REPLICA IDENTITY FULL;
CREATE TABLE nothing (id int PRIMARY KEY);                             -- listed; DEFAULT brings its key back
ALTER TABLE nothing REPLICA IDENTITY NOTHING;
CREATE TABLE partial (id int NOT NULL, v text);                        -- FULL: a partial index does not count
CREATE UNIQUE INDEX partial_id ON partial (id) WHERE id > 0;
CREATE TABLE nullable (id int UNIQUE, v text);                         -- FULL: the column may be NULL
CREATE TABLE deferred (id int NOT NULL, CONSTRAINT deferred_id UNIQUE (id) DEFERRABLE);  -- FULL
CREATE TABLE expr (v text NOT NULL);                                   -- FULL: an expression index
CREATE UNIQUE INDEX expr_lower ON expr (lower(v));
CREATE TABLE gone (id int NOT NULL, v text);                           -- listed: its identity index was dropped
CREATE UNIQUE INDEX gone_id ON gone (id);
ALTER TABLE gone REPLICA IDENTITY USING INDEX gone_id;
DROP INDEX gone_id;
CREATE TABLE chosen (id int NOT NULL);                                 -- fine: USING INDEX set
CREATE UNIQUE INDEX chosen_id ON chosen (id);
ALTER TABLE chosen REPLICA IDENTITY USING INDEX chosen_id;
CREATE UNLOGGED TABLE scratch (a int);                                 -- fine: never published
CREATE TABLE parts (k int NOT NULL, v text) PARTITION BY RANGE (k);    -- its leaves are listed
CREATE TABLE parts_1 PARTITION OF parts FOR VALUES FROM (0) TO (10);
CREATE TABLE parts_2 PARTITION OF parts FOR VALUES FROM (10) TO (20);
CREATE TABLE keyed_parts (k int PRIMARY KEY) PARTITION BY RANGE (k);   -- fine: each leaf has the key
CREATE TABLE keyed_parts_1 PARTITION OF keyed_parts FOR VALUES FROM (0) TO (10);
CREATE SCHEMA "Odd Schema";
CREATE TABLE "Odd Schema"."Mixed" ("Code" int NOT NULL);               -- quoted USING INDEX
CREATE UNIQUE INDEX "Mixed Code" ON "Odd Schema"."Mixed" ("Code");
`

func gapFixes(gaps []IdentityGap) map[string]string {
	out := map[string]string{}
	for _, g := range gaps {
		out[g.Table] = g.Fix
	}
	return out
}

func connectDB(t *testing.T, db string) *pgx.Conn {
	t.Helper()
	conn, err := connect(context.Background(), testenv.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func TestIdentityGapsOfTheDefaultPublication(t *testing.T) {
	db := testenv.CreateDB(t, "ident")
	testenv.Exec(t, db, identitySchema)
	conn := connectDB(t, db)
	gaps, err := identityGaps(context.Background(), conn, DefaultPublication)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"public.by_code":       "ALTER TABLE public.by_code REPLICA IDENTITY USING INDEX by_code_code",
		"public.keyless":       "ALTER TABLE public.keyless REPLICA IDENTITY FULL",
		"public.nothing":       "ALTER TABLE public.nothing REPLICA IDENTITY DEFAULT",
		"public.partial":       "ALTER TABLE public.partial REPLICA IDENTITY FULL",
		"public.nullable":      "ALTER TABLE public.nullable REPLICA IDENTITY FULL",
		"public.deferred":      "ALTER TABLE public.deferred REPLICA IDENTITY FULL",
		"public.expr":          "ALTER TABLE public.expr REPLICA IDENTITY FULL",
		"public.gone":          "ALTER TABLE public.gone REPLICA IDENTITY FULL",
		"public.parts_1":       "ALTER TABLE public.parts_1 REPLICA IDENTITY FULL",
		"public.parts_2":       "ALTER TABLE public.parts_2 REPLICA IDENTITY FULL",
		`"Odd Schema"."Mixed"`: `ALTER TABLE "Odd Schema"."Mixed" REPLICA IDENTITY USING INDEX "Mixed Code"`,
	}
	got := gapFixes(gaps)
	for table, fix := range want {
		if got[table] != fix {
			t.Errorf("%s: want fix %q, got %q", table, fix, got[table])
		}
	}
	for table := range got {
		if _, ok := want[table]; !ok {
			t.Errorf("%s is listed, but its updates and deletes work: %+v", table, gaps)
		}
	}
	for _, g := range gaps {
		if strings.Join(g.Fails, ",") != "UPDATE,DELETE" || g.Why == "" {
			t.Errorf("%s: want UPDATE and DELETE failing with a reason, got %+v", g.Table, g)
		}
	}
	// Each fix is exact: run them all and nothing is left.
	for _, g := range gaps {
		if _, err := conn.Exec(context.Background(), g.Fix); err != nil {
			t.Fatalf("%s: %v", g.Fix, err)
		}
	}
	if gaps, err := identityGaps(context.Background(), conn, DefaultPublication); err != nil || len(gaps) != 0 {
		t.Fatalf("after the fixes: %+v, %v", gaps, err)
	}
}

func TestIdentityGapsOfANamedPublication(t *testing.T) {
	db := testenv.CreateDB(t, "identpub")
	testenv.Exec(t, db, identitySchema+`
		CREATE PUBLICATION inserts_only FOR TABLE keyless WITH (publish = 'insert');
		CREATE PUBLICATION deletes FOR TABLE keyless, keyed WITH (publish = 'insert, delete');
		CREATE PUBLICATION via_root FOR TABLE parts WITH (publish_via_partition_root = true);
		CREATE PUBLICATION odd FOR TABLES IN SCHEMA "Odd Schema";`)
	conn := connectDB(t, db)
	ctx := context.Background()
	for _, tc := range []struct {
		pub   string
		want  []string
		fails string
	}{
		{"inserts_only", nil, ""},
		{"deletes", []string{"public.keyless"}, "DELETE"},
		// PostgreSQL checks the leaf written to, whatever the root publishes as.
		{"via_root", []string{"public.parts_1", "public.parts_2"}, "UPDATE,DELETE"},
		{"odd", []string{`"Odd Schema"."Mixed"`}, "UPDATE,DELETE"},
		{"no_such_publication", nil, ""},
	} {
		gaps, err := identityGaps(ctx, conn, tc.pub)
		if err != nil {
			t.Fatalf("%s: %v", tc.pub, err)
		}
		var got []string
		for _, g := range gaps {
			got = append(got, g.Table)
			if strings.Join(g.Fails, ",") != tc.fails {
				t.Errorf("%s: %s fails %v, want %s", tc.pub, g.Table, g.Fails, tc.fails)
			}
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("publication %s: want %v listed, got %v", tc.pub, tc.want, got)
		}
	}
}

// sourceObjects counts the database's replication slots and publications.
func sourceObjects(t *testing.T, db string) (slots, pubs int) {
	t.Helper()
	admin := testenv.Admin(t)
	defer admin.Close(context.Background())
	if err := admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_replication_slots WHERE database = $1`, db).Scan(&slots); err != nil {
		t.Fatal(err)
	}
	conn := connectDB(t, db)
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_publication`).Scan(&pubs); err != nil {
		t.Fatal(err)
	}
	return slots, pubs
}

func TestFullBackupRefusesTablesWithoutReplicaIdentity(t *testing.T) {
	db := testenv.CreateDB(t, "identfull")
	testenv.Exec(t, db, `CREATE TABLE keyed (id int PRIMARY KEY, v text);
		CREATE TABLE by_code (code text NOT NULL, v text); CREATE UNIQUE INDEX by_code_code ON by_code (code);
		CREATE TABLE keyless (a int, b text);
		INSERT INTO keyed VALUES (1, 'a'); INSERT INTO by_code VALUES ('c', 'a'); INSERT INTO keyless VALUES (1, 'a');`)
	ctx := context.Background()
	ch := openChain(t)
	_, err := FullBackup(ctx, ch, FullBackupOptions{DSN: testenv.DSN(db), ChainSlot: true, AttemptID: "a1"})
	var e *errcode.Error
	if !errors.As(err, &e) || e.Code != errcode.SourceReplicaIdentity || e.Exit() != errcode.ExitRefused {
		t.Fatalf("want %s, got %v", errcode.SourceReplicaIdentity, err)
	}
	for _, want := range []string{
		"public.by_code (no primary key): ALTER TABLE public.by_code REPLICA IDENTITY USING INDEX by_code_code",
		"public.keyless (no primary key): ALTER TABLE public.keyless REPLICA IDENTITY FULL",
	} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, e.Message)
		}
	}
	if strings.Contains(e.Message, "public.keyed") {
		t.Errorf("the refusal lists a keyed table:\n%s", e.Message)
	}
	if !strings.Contains(e.HintText(), "--set-replica-identity auto") {
		t.Errorf("the hint does not name the flag: %s", e.HintText())
	}
	if slots, pubs := sourceObjects(t, db); slots != 0 || pubs != 0 {
		t.Fatalf("the refusal left %d slots and %d publications on the source", slots, pubs)
	}
	if _, err := ch.LoadCatalog(ctx); !errcode.Is(err, errcode.ChainNotFound) {
		t.Fatalf("the refusal committed a catalog: %v", err)
	}
	// The application's writes still work.
	testenv.Exec(t, db, `UPDATE by_code SET v = 'b'; DELETE FROM keyless;`)

	// An unknown mode is a configuration error, before anything happens.
	_, err = FullBackup(ctx, ch, FullBackupOptions{DSN: testenv.DSN(db), ChainSlot: true, AttemptID: "a2", SetReplicaIdentity: "yes"})
	if !errcode.Is(err, errcode.ConfigInvalid) {
		t.Fatalf("want %s for an unknown mode, got %v", errcode.ConfigInvalid, err)
	}
	// Without a chain slot no publication is made, so nothing is checked.
	if _, err := FullBackup(ctx, openChain(t), FullBackupOptions{DSN: testenv.DSN(db), AttemptID: "a3"}); err != nil {
		t.Fatalf("a full without --chain-slot: %v", err)
	}
}

func TestFullBackupSetsReplicaIdentity(t *testing.T) {
	db := testenv.CreateDB(t, "identauto")
	testenv.Exec(t, db, `CREATE TABLE keyed (id int PRIMARY KEY, v text);
		CREATE TABLE by_code (code text NOT NULL, v text); CREATE UNIQUE INDEX by_code_code ON by_code (code);
		CREATE TABLE keyless (a int, b text);
		INSERT INTO by_code VALUES ('c', 'a'), ('d', 'a'); INSERT INTO keyless VALUES (1, 'a'), (2, 'b');`)
	ctx := context.Background()
	var set []string
	m, err := FullBackup(ctx, openChain(t), FullBackupOptions{DSN: testenv.DSN(db), ChainSlot: true, AttemptID: "a1",
		SetReplicaIdentity: IdentityAuto, OnReplicaIdentitySet: func(g IdentityGap) { set = append(set, g.Fix) }})
	if err != nil {
		t.Fatal(err)
	}
	admin := testenv.Admin(t)
	defer admin.Close(ctx)
	t.Cleanup(func() { _, _ = admin.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, m.Source.Slot) })
	want := "ALTER TABLE public.by_code REPLICA IDENTITY USING INDEX by_code_code|ALTER TABLE public.keyless REPLICA IDENTITY FULL"
	if strings.Join(set, "|") != want {
		t.Fatalf("want the tables changed reported as %s, got %v", want, set)
	}
	conn := connectDB(t, db)
	var idents string
	if err := conn.QueryRow(ctx, `SELECT string_agg(relname || '=' || relreplident::text, ' ' ORDER BY relname) FROM pg_class
		WHERE relname IN ('keyed', 'by_code', 'keyless')`).Scan(&idents); err != nil {
		t.Fatal(err)
	}
	if idents != "by_code=i keyed=d keyless=f" {
		t.Fatalf("replica identities: %s", idents)
	}
	if slots, pubs := sourceObjects(t, db); slots != 1 || pubs != 1 {
		t.Fatalf("want the chain slot and the publication, got %d slots and %d publications", slots, pubs)
	}
	// Published now, and the application's updates and deletes work.
	testenv.Exec(t, db, `UPDATE by_code SET v = 'b' WHERE code = 'c'; DELETE FROM by_code WHERE code = 'd';
		UPDATE keyless SET b = 'z' WHERE a = 1; DELETE FROM keyless WHERE a = 2;`)
}

func TestCaptureWillNotCreateAPublicationThatBreaksWrites(t *testing.T) {
	db := testenv.CreateDB(t, "identcap")
	testenv.Exec(t, db, `CREATE TABLE keyless (a int)`)
	conn := connectDB(t, db)
	err := ensurePublication(context.Background(), conn, DefaultPublication)
	if !errcode.Is(err, errcode.SourceReplicaIdentity) || !strings.Contains(err.Error(), "public.keyless") {
		t.Fatalf("want %s naming public.keyless, got %v", errcode.SourceReplicaIdentity, err)
	}
	if _, pubs := sourceObjects(t, db); pubs != 0 {
		t.Fatalf("a publication was created")
	}
}

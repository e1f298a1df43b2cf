package integration

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// appSchema is an application's schema: identity and serial keys, views
// on views, a materialized view, an audit trigger, a SQL and a PL/pgSQL
// function, a rule, row-level security with a policy, comments, and grants
// to two roles (a third, granted on the audit table, is dropped later to
// show a missing role).
const appSchema = `
	DO $$ BEGIN CREATE ROLE sluice_it_reader; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
	DO $$ BEGIN CREATE ROLE sluice_it_writer; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
	DO $$ BEGIN CREATE ROLE sluice_it_gone; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
	CREATE TABLE accounts (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, owner text NOT NULL, balance numeric NOT NULL DEFAULT 0);
	CREATE TABLE audit (id serial PRIMARY KEY, op text NOT NULL, account bigint, at timestamptz NOT NULL DEFAULT now());
	CREATE FUNCTION audit_account() RETURNS trigger LANGUAGE plpgsql AS $f$
	BEGIN
		INSERT INTO public.audit (op, account) VALUES (TG_OP, NEW.id);
		RETURN NEW;
	END
	$f$;
	CREATE FUNCTION doubled(x numeric) RETURNS numeric LANGUAGE sql IMMUTABLE AS 'SELECT x * 2';
	CREATE VIEW rich AS SELECT id, owner, doubled(balance) AS twice FROM accounts WHERE balance > 100;
	CREATE VIEW richest AS SELECT owner, twice FROM rich ORDER BY twice DESC LIMIT 3;
	CREATE MATERIALIZED VIEW totals AS SELECT count(*) AS accounts, sum(balance) AS balance FROM accounts;
	CREATE TRIGGER accounts_audit AFTER INSERT ON accounts FOR EACH ROW EXECUTE FUNCTION audit_account();
	CREATE RULE audit_kept AS ON DELETE TO audit DO INSTEAD NOTHING;
	ALTER TABLE accounts ENABLE ROW LEVEL SECURITY;
	ALTER TABLE accounts FORCE ROW LEVEL SECURITY;
	CREATE POLICY own_rows ON accounts FOR SELECT TO sluice_it_reader USING (owner = current_user);
	COMMENT ON TABLE accounts IS 'who holds what';
	COMMENT ON COLUMN accounts.balance IS 'in cents, it''s exact';
	COMMENT ON VIEW richest IS 'the top three';
	COMMENT ON FUNCTION doubled(numeric) IS 'twice the amount';
	GRANT SELECT ON accounts, rich, richest TO sluice_it_reader;
	GRANT SELECT, INSERT, UPDATE (balance) ON accounts TO sluice_it_writer;
	GRANT USAGE ON SEQUENCE audit_id_seq TO sluice_it_writer;
	GRANT SELECT ON audit TO sluice_it_gone;
	INSERT INTO accounts (owner, balance) SELECT 'owner' || i, i * 10 FROM generate_series(1, 50) i;
`

// TestSchemaObjectsTravel: an application's schema on a PostgreSQL source
// (appSchema), a stream and a broker started cold into PostgreSQL with
// --trust-store-objects. A restore creates the views, routines, trigger,
// rule, policies, comments and grants and prints a count per kind; its
// pg_dump --schema-only equals the source's. While the stream runs, the
// source adds a view and alters a function: the broker's target then
// dumps the same as the source, its audit table holds the source's rows
// once (the trigger stayed quiet during apply), and after a cutover an
// insert takes the next key. A restore of the unsigned chain without the
// flag runs none and says which flag runs them; once a granted role is
// gone from the cluster a restore is refused with
// SLUICE-E-TARGET-ROLE-MISSING (exit 3), and --skip-missing-roles lists
// that grant as skipped.
func TestSchemaObjectsTravel(t *testing.T) {
	src, dst, chainURL, stream := startStreamOf(t, "obj", appSchema, "--trust-store-objects")

	restored := testenv.CreateDB(t, "objrst")
	r := mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(restored), "--trust-store-objects")
	t.Logf("restore:\n%s", r.stdout)
	for _, want := range []string{"schema objects created: ", "function 2", "grant 6", "materialized_view 1", "policy 1", "row_security 2", "rule 1", "trigger 1", "view 2", "comment 4"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the restore's output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "not carried by the chain, so not restored: views") {
		t.Errorf("the restore still says views are not carried:\n%s", r.stdout)
	}
	sameSchema(t, src, restored)
	var n int
	if err := queryInt(t, restored, `SELECT accounts::int FROM totals`, &n); err != nil || n != 50 {
		t.Errorf("the restored materialized view counts %d accounts (%v); want 50, refreshed over the rows", n, err)
	}

	// While the stream runs: a new view, a changed function, new rows.
	testenv.Exec(t, src, `CREATE VIEW big_spenders AS SELECT owner FROM richest WHERE twice > 800;
		CREATE OR REPLACE FUNCTION doubled(x numeric) RETURNS numeric LANGUAGE sql IMMUTABLE AS 'SELECT x + x';
		INSERT INTO accounts (owner, balance) SELECT 'late' || i, i FROM generate_series(1, 20) i;`)
	waitCaughtUp(t, src, 2*time.Minute)
	mustSluice(t, "backup", "stream", "stop", "--target", chainURL)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	waitBrokerAt(t, stream, lastIncremental(t, chainURL, nil), 2*time.Minute)
	sameSchema(t, src, dst)
	for _, q := range []string{`SELECT count(*)::int FROM audit`, `SELECT count(*)::int FROM big_spenders`} {
		var s, d int
		if err := queryInt(t, src, q, &s); err != nil {
			t.Fatal(err)
		}
		if err := queryInt(t, dst, q, &d); err != nil {
			t.Fatalf("%s on the broker's target: %v", q, err)
		}
		if s != d {
			t.Errorf("%s: the source has %d, the broker's target %d", q, s, d)
		}
	}

	// The cutover: the application writes to the target, whose trigger
	// now fires, and both keys come after the source's.
	mustSluice(t, "sync", "from-backup", "cutover", "--backup-target", chainURL, "--target", testenv.DSN(dst),
		"--stream-id", stream, "--wait", "2m")
	var id, audits, maxAudit int
	if err := queryInt(t, src, `SELECT max(id)::int FROM audit`, &maxAudit); err != nil {
		t.Fatal(err)
	}
	if err := queryInt(t, dst, `INSERT INTO accounts (owner, balance) VALUES ('after cutover', 1) RETURNING id::int`, &id); err != nil {
		t.Fatalf("insert on the target after the cutover: %v", err)
	}
	if id <= 70 {
		t.Errorf("the target handed out accounts.id %d after the cutover; want past 70", id)
	}
	if err := queryInt(t, dst, `SELECT max(id)::int FROM audit`, &audits); err != nil || audits <= maxAudit {
		t.Errorf("the target's trigger wrote audit id %d (%v); want one past the source's %d", audits, err, maxAudit)
	}

	// The chain is unsigned: without the flag, nothing is run, and the
	// output says what and how to run it.
	plain := testenv.CreateDB(t, "objplain")
	r = mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(plain))
	if !strings.Contains(r.stdout, "schema objects not run: ") || !strings.Contains(r.stdout, "--trust-store-objects") || !strings.Contains(r.stdout, "view 3") {
		t.Errorf("a restore without --trust-store-objects:\n%s\nwant it to say the objects were not run and how to run them", r.stdout)
	}
	if err := queryInt(t, plain, `SELECT count(*)::int FROM pg_views WHERE schemaname = 'public'`, &n); err != nil || n != 0 {
		t.Errorf("a restore without --trust-store-objects created %d views (%v)", n, err)
	}
	if schemaDump(t, plain) == schemaDump(t, src) {
		t.Error("the dump of a target without the schema objects equals the source's: the comparison sees nothing")
	}

	// A role the grants name is gone from the cluster.
	for _, db := range []string{src, dst, restored} {
		testenv.Exec(t, db, `REVOKE ALL ON audit FROM sluice_it_gone`)
	}
	testenv.Exec(t, src, `DROP ROLE sluice_it_gone`)
	missing := testenv.CreateDB(t, "objrole")
	r = sluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(missing), "--trust-store-objects")
	if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-TARGET-ROLE-MISSING") || !strings.Contains(r.stderr, "sluice_it_gone") {
		t.Errorf("a restore whose grant names a missing role: %s\nwant exit 3 with SLUICE-E-TARGET-ROLE-MISSING naming sluice_it_gone", r)
	}
	skipped := testenv.CreateDB(t, "objskip")
	r = mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(skipped), "--trust-store-objects", "--skip-missing-roles")
	if !strings.Contains(r.stdout, "schema objects skipped: 1") || !strings.Contains(r.stdout, "grant public.sluice_it_gone on public.audit: role sluice_it_gone does not exist on the target") {
		t.Errorf("a restore with --skip-missing-roles:\n%s\nwant the grant to the missing role listed as skipped", r.stdout)
	}
}

// sameSchema fails the test unless pg_dump --schema-only prints the same
// for both databases, once owners, sluice's own control tables and
// publication, and pg_dump's per-run lines are left out.
func sameSchema(t *testing.T, a, b string) {
	t.Helper()
	da, db := schemaDump(t, a), schemaDump(t, b)
	if da == db {
		return
	}
	t.Errorf("pg_dump --schema-only of %s and %s differ (- only in the first, + only in the second):\n%s", a, b, lineDiff(da, db))
}

// lineDiff lists the lines only in a (as "- line") and only in b (as "+
// line"), each as often as it is missing from the other, in the order they
// appear.
func lineDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	inA, inB := map[string]int{}, map[string]int{}
	for _, l := range la {
		inA[l]++
	}
	for _, l := range lb {
		inB[l]++
	}
	var diff []string
	for _, l := range la {
		if inB[l] > 0 {
			inB[l]--
			continue
		}
		diff = append(diff, "- "+l)
	}
	for _, l := range lb {
		if inA[l] > 0 {
			inA[l]--
			continue
		}
		diff = append(diff, "+ "+l)
	}
	return strings.Join(diff, "\n")
}

var dumpNoise = regexp.MustCompile(`(?m)^(\\restrict|\\unrestrict|-- Dumped|--$|-- Name: .*; Owner: ).*\n`)

func schemaDump(t *testing.T, db string) string {
	t.Helper()
	out, err := exec.Command("pg_dump", "--schema-only", "--no-owner", "--no-publications", "--no-subscriptions",
		"--exclude-table=sluice_*", "-d", testenv.DSN(db)).CombinedOutput()
	if err != nil {
		t.Fatalf("pg_dump %s: %v\n%s", db, err, out)
	}
	return dumpNoise.ReplaceAllString(string(out), "")
}

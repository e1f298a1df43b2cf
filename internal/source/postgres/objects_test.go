package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/testenv"
)

// objectsSchema is an application's schema beside its tables: views on
// views, a materialized view, routines, a trigger, a rule, a policy,
// comments and grants.
const objectsSchema = `
	DO $$ BEGIN CREATE ROLE sluice_objects_reader; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
	CREATE TABLE accounts (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, owner text NOT NULL, balance numeric NOT NULL DEFAULT 0);
	CREATE TABLE audit (id serial PRIMARY KEY, what text);
	CREATE TABLE hidden (id int PRIMARY KEY);
	CREATE FUNCTION audit_row() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN INSERT INTO public.audit (what) VALUES (TG_OP); RETURN NEW; END $f$;
	CREATE FUNCTION doubled(x numeric) RETURNS numeric LANGUAGE sql IMMUTABLE AS 'SELECT x * 2';
	CREATE VIEW rich AS SELECT id, owner, doubled(balance) AS twice FROM accounts WHERE balance > 100;
	CREATE VIEW richest AS SELECT owner FROM rich ORDER BY twice DESC LIMIT 1;
	CREATE VIEW on_hidden AS SELECT id FROM hidden;
	CREATE MATERIALIZED VIEW totals AS SELECT count(*) AS n FROM accounts;
	CREATE TRIGGER accounts_audit AFTER INSERT ON accounts FOR EACH ROW EXECUTE FUNCTION audit_row();
	CREATE RULE audit_no_delete AS ON DELETE TO audit DO INSTEAD NOTHING;
	ALTER TABLE accounts ENABLE ROW LEVEL SECURITY;
	CREATE POLICY own ON accounts FOR SELECT TO sluice_objects_reader USING (owner = current_user);
	COMMENT ON TABLE accounts IS 'who holds what';
	COMMENT ON COLUMN accounts.balance IS 'it''s money';
	COMMENT ON VIEW rich IS 'the rich';
	COMMENT ON FUNCTION doubled(numeric) IS 'twice';
	GRANT SELECT, UPDATE (balance) ON accounts TO sluice_objects_reader;
	GRANT SELECT ON rich TO sluice_objects_reader;
	GRANT SELECT ON hidden TO sluice_objects_reader;
`

func TestReadObjectsInDependencyOrder(t *testing.T) {
	db := testenv.CreateDB(t, "objects")
	testenv.Exec(t, db, objectsSchema)
	ctx := context.Background()
	conn, err := connect(ctx, testenv.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tables := []chain.Table{
		{Schema: "public", Name: "accounts", Columns: []chain.Column{{Name: "id"}, {Name: "owner"}, {Name: "balance"}}},
		{Schema: "public", Name: "audit", Columns: []chain.Column{{Name: "id"}, {Name: "what"}}},
	}
	objs, err := readObjects(ctx, conn, tables) // hidden is left out, as by a filter
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	var got []string
	for i, o := range objs {
		pos[string(o.Kind)+" "+o.Name] = i
		got = append(got, string(o.Kind)+" "+o.Schema+" "+o.Table+" "+o.Name)
	}
	t.Logf("objects:\n%s", strings.Join(got, "\n"))
	for _, want := range []string{"function audit_row()", "function doubled(x numeric)", "view rich", "view richest", "materialized_view totals",
		"trigger accounts_audit", "rule audit_no_delete", "row_security enable", "policy own",
		"comment TABLE public.accounts", "comment COLUMN public.accounts.balance", "comment VIEW public.rich", "comment FUNCTION public.doubled(numeric)",
		"grant sluice_objects_reader"} {
		if _, ok := pos[want]; !ok {
			t.Errorf("no %s recorded", want)
		}
	}
	if pos["view rich"] > pos["view richest"] || pos["function doubled(x numeric)"] > pos["view rich"] {
		t.Errorf("views out of dependency order: %v", got)
	}
	for _, o := range objs {
		if strings.Contains(o.Definition, "hidden") {
			t.Errorf("an object on a table the chain does not hold was recorded: %s %s: %s", o.Kind, o.Name, o.Definition)
		}
		if o.Kind == chain.ObjectPolicy && (len(o.Roles) != 1 || o.Roles[0] != "sluice_objects_reader") {
			t.Errorf("policy roles %v", o.Roles)
		}
		t.Logf("%s: %s", o.Kind, o.Definition)
	}
	fp1, err := objectsFingerprint(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, db, `CREATE OR REPLACE FUNCTION doubled(x numeric) RETURNS numeric LANGUAGE sql IMMUTABLE AS 'SELECT x + x'`)
	fp2, err := objectsFingerprint(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if fp1 == fp2 {
		t.Error("the fingerprint did not move when a function changed")
	}
}

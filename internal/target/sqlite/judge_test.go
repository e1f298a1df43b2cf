package sqlite

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
)

// judge stores records as an incremental (with or without identities)
// and judges it against schema.
func judge(t *testing.T, tg *Target, schema *chain.Schema, identities bool, records []chain.Change) error {
	t.Helper()
	ch := chaintest.Store(t)
	for i := range records {
		if !identities {
			records[i].Identified = false
		}
	}
	m := chaintest.AddIncremental(t, ch, records, 100)
	m.ApplyIdentity = identities
	_, err := tg.JudgeIncremental(context.Background(), ch, m, schema, nil)
	return err
}

func exec(t *testing.T, tg *Target, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := tg.db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func TestJudgeKeyedTableGivesItsArbiter(t *testing.T) {
	tg := openTarget(t)
	users := chain.Table{Schema: "public", Name: "users",
		Columns: []chain.Column{notNull(col("id", "integer", 23)), notNull(col("email", "text", 25))},
		Indexes: []chain.Index{{Name: "users_email_key", Columns: []string{"email"}, Unique: true}}}
	s := &chain.Schema{Tables: []chain.Table{itemsTable, users}}
	// The live users table has a surrogate rowid key beside the supplied
	// UNIQUE index: SQLite upserts on the index, so it counts.
	exec(t, tg, createTableSQL(&itemsTable, "items", false),
		`CREATE TABLE users (sid INTEGER PRIMARY KEY, id INTEGER NOT NULL, email TEXT NOT NULL)`,
		`CREATE UNIQUE INDEX users_email_key ON users (email)`)
	ch := chaintest.Store(t)
	recs := chaintest.Txn(1, ins("public.items", txt("1", "a", "b")...), ins("public.users", txt("1", "a@x")...), ins("public.fresh", txt("1")...))
	recs[1].Identified = false // keyed: it converges by key, counted
	m := chaintest.AddIncremental(t, ch, recs, 100)
	j, err := tg.JudgeIncremental(context.Background(), ch, m, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(j.Arbiters["public.items"], ","); got != "id" {
		t.Errorf("items arbiter %q, want id", got)
	}
	if got := strings.Join(j.Arbiters["public.users"], ","); got != "email" {
		t.Errorf("users arbiter %q, want email", got)
	}
	if strings.Join(j.Tables, ",") != "public.fresh,public.items,public.users" {
		t.Errorf("tables %v", j.Tables)
	}
	if j.Unidentified != 1 {
		t.Errorf("unidentified %d, want 1", j.Unidentified)
	}
	if _, ok := j.Arbiters["public.fresh"]; ok {
		t.Error("a table missing on the target has an arbiter")
	}
}

func TestJudgeKeylessTables(t *testing.T) {
	s := &chain.Schema{Tables: []chain.Table{logTable, itemsTable}}
	change := ins("public.log", txt("2026-01-01", "m")...)
	for _, c := range []struct {
		name       string
		setup      []string
		identities bool
		unnamed    bool
		want       string // "" for no refusal
	}{
		{name: "named changes and marks", identities: true},
		{name: "rowid only on the target", setup: []string{`CREATE TABLE log (at TEXT, msg TEXT)`}, identities: true},
		{name: "no identities", identities: false, want: "the incremental records no apply identities"},
		{name: "a change without identity", identities: true, unnamed: true, want: "BROKER-KEYLESS-NO-IDENTITY: 1 of its 1 changes"},
		{name: "surrogate key on the target", setup: []string{`CREATE TABLE items (sid INTEGER PRIMARY KEY, id INTEGER, name TEXT, note TEXT)`},
			identities: true, want: "keyed only on columns the replayed rows do not carry (sid)"},
		{name: "view", setup: []string{`CREATE VIEW log AS SELECT 1 AS at, 2 AS msg`}, identities: true, want: "public.log is a view"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tg := openTarget(t)
			exec(t, tg, c.setup...)
			recs := chaintest.Txn(1, change, ins("public.items", txt("1", "a", "b")...))
			if c.unnamed {
				recs[1].Identified = false
			}
			err := judge(t, tg, s, c.identities, recs)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantCode(t, err, errcode.BrokerKeylessTable)
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("refusal %q does not say %q", err, c.want)
			}
		})
	}
}

func TestJudgeColdStart(t *testing.T) {
	tg := openTarget(t)
	s := &chain.Schema{Tables: []chain.Table{logTable}}
	if err := tg.JudgeColdStart(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	exec(t, tg, `CREATE VIEW log AS SELECT 1 AS at, 2 AS msg`)
	wantCode(t, tg.JudgeColdStart(context.Background(), s), errcode.BrokerKeylessTable)
}

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/testenv"
)

// appendIncremental commits, with the real chain writer, an incremental of
// one transaction inserting rows (each a row image of text values) into
// table. identified=false leaves change `unnamed` (or every change when
// unnamed < 0) without an apply identity; applyIdentity is the manifest's flag.
func appendIncremental(t *testing.T, chainURL, table string, rows [][]string, applyIdentity bool, unnamed int) string {
	t.Helper()
	ctx := context.Background()
	ch, cat := openChainAt(t, chainURL)
	tip := cat.Tip()
	start, err := chain.ParseLSN(tip.EndPosition)
	if err != nil {
		t.Fatal(err)
	}
	commit, end := uint64(start)+0x40, uint64(start)+0x80
	b := chain.NewChangeBuilder()
	add := func(c chain.Change) {
		if err := b.Append(&c); err != nil {
			t.Fatal(err)
		}
	}
	xid := uint32(time.Now().UnixNano() % 1e6)
	add(chain.Change{Op: chain.OpBegin, XID: xid, CommitLSN: commit, LSN: uint64(start) + 1, Identified: true})
	for i, r := range rows {
		vals := make([]chain.Value, len(r))
		for j, v := range r {
			if v == "NULL" {
				vals[j] = chain.Value{Kind: chain.ValueNull}
			} else {
				vals[j] = chain.Value{Kind: chain.ValueText, Data: []byte(v)}
			}
		}
		named := unnamed >= 0 && i != unnamed
		c := chain.Change{Op: chain.OpInsert, Table: table, New: vals, LSN: uint64(start) + 2 + uint64(i), Identified: named}
		if named {
			c.XID, c.CommitLSN, c.Ordinal = xid, commit, uint32(i)
		}
		add(c)
	}
	add(chain.Change{Op: chain.OpCommit, XID: xid, CommitLSN: commit, EndLSN: end, LSN: commit, Identified: true})
	data, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := ch.WriteChunk(ctx, chain.ChunkPlace{Key: chain.DataKey(fmt.Sprintf("test-%d", xid), "changes-000000.chunk")}, data, b.Records(), int64(b.RawLen()))
	if err != nil {
		t.Fatal(err)
	}
	m := &chain.Manifest{
		Kind: chain.KindIncremental, Parent: tip.ID, Source: cat.Source,
		StartPosition: tip.EndPosition, EndPosition: chain.FormatLSN(end), CreatedAt: time.Now(),
		Chunks: []chain.ChunkRef{ref}, Changes: int64(len(rows)), Transactions: 1, ApplyIdentity: applyIdentity,
	}
	if err := ch.PutManifest(ctx, m); err != nil {
		t.Fatal(err)
	}
	next := cat.Next()
	if err := next.AppendIncremental(m); err != nil {
		t.Fatal(err)
	}
	if err := ch.CommitCatalog(ctx, next); err != nil {
		t.Fatal(err)
	}
	return m.ID
}

func TestBrokerKeylessJudgments(t *testing.T) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, `
		CREATE TABLE keyed (id int PRIMARY KEY, v text);
		CREATE TABLE nokey (id int, v text);
		CREATE TABLE partial (id int NOT NULL, v text);
		CREATE UNIQUE INDEX partial_id ON partial (id) WHERE id > 0;
		ALTER TABLE nokey REPLICA IDENTITY FULL; ALTER TABLE partial REPLICA IDENTITY FULL;
		INSERT INTO keyed VALUES (1, 'a'); INSERT INTO nokey VALUES (1, 'a'); INSERT INTO partial VALUES (1, 'a');`)
	type tc struct {
		name      string
		table     string
		identity  bool // manifest records identities
		unnamed   int  // index of a change without identity, -1 none... see appendIncremental
		onTarget  string
		role      string
		wantParts []string
	}
	cases := []tc{
		{name: "chain schema without a key, no identities", table: "public.nokey", identity: false, unnamed: -1,
			wantParts: []string{"chain schema: no PRIMARY KEY", "records no apply identities"}},
		{name: "a single change without identity", table: "public.nokey", identity: true, unnamed: 1,
			wantParts: []string{"BROKER-KEYLESS-NO-IDENTITY", "1 of its 2 changes"}},
		{name: "a partial unique index does not count", table: "public.partial", identity: false, unnamed: -1,
			wantParts: []string{"chain schema: no PRIMARY KEY", "partial UNIQUE index does not count"}},
		{name: "target without a key", table: "public.keyed", identity: false, unnamed: -1,
			onTarget:  `ALTER TABLE public.keyed DROP CONSTRAINT keyed_pkey`,
			wantParts: []string{"target: the table has no PRIMARY KEY or UNIQUE index", "records no apply identities"}},
		{name: "a surrogate identity key on the target", table: "public.keyed", identity: true, unnamed: 99,
			onTarget:  `ALTER TABLE public.keyed DROP CONSTRAINT keyed_pkey; ALTER TABLE public.keyed ADD COLUMN sid bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY`,
			wantParts: []string{"APPLY-MARKS-UNAVAILABLE", "keyed only on columns the replayed rows do not carry (sid)"}},
		{name: "a generated key column", table: "public.keyed", identity: true, unnamed: 99,
			onTarget:  `ALTER TABLE public.keyed DROP CONSTRAINT keyed_pkey; ALTER TABLE public.keyed ADD COLUMN g int GENERATED ALWAYS AS (id * 2) STORED; ALTER TABLE public.keyed ADD PRIMARY KEY (g)`,
			wantParts: []string{"target: its PRIMARY KEY (g) has a generated column"}},
		{name: "a view under the table's name", table: "public.keyed", identity: true, unnamed: 99,
			onTarget:  `ALTER TABLE public.keyed RENAME TO keyed_data; CREATE VIEW public.keyed AS SELECT * FROM public.keyed_data`,
			wantParts: []string{"target: public.keyed is a view"}},
		{name: "a role without rights on the marks table", table: "public.nokey", identity: true, unnamed: 99,
			role:      "sluice_it_nomarks",
			wantParts: []string{"APPLY-MARKS-UNAVAILABLE", "may not create or write public.sluice_cdc_apply_marks"}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			chainURL := fileChain(t)
			mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
			full := lastIncremental(t, chainURL, nil)
			inc := appendIncremental(t, chainURL, c.table, [][]string{{"10", "x"}, {"11", "y"}}, c.identity, c.unnamed)
			dst := testenv.CreateDB(t, "dst")
			mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(dst), "--through", full)
			if c.onTarget != "" {
				testenv.Exec(t, dst, c.onTarget)
			}
			stream := fmt.Sprintf("keyless-%d-%d", i, time.Now().UnixNano()%1e6)
			dsn := testenv.DSN(dst)
			if c.role != "" {
				// The position is set up by an operator; the broker then runs
				// as a role that may write the tables but not the marks.
				r := sluice(t, "sync", "from-backup", "run", "--backup-target", chainURL, "--target", dsn, "--stream-id", stream,
					"--at-chain-id", full, "--detach", "--poll-interval", "300ms")
				if r.exit != 0 {
					t.Fatal(r)
				}
				stopBroker(t, chainURL, stream)
				testenv.Exec(t, dst, fmt.Sprintf(`
					DO $$ BEGIN
					  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%[1]s') THEN CREATE ROLE %[1]s LOGIN; END IF;
					END $$;
					GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO %[1]s;
					REVOKE ALL ON public.sluice_cdc_apply_marks FROM %[1]s;
					REVOKE CREATE ON SCHEMA public FROM PUBLIC;`, c.role))
				t.Cleanup(func() { testenv.Exec(t, dst, fmt.Sprintf(`DROP OWNED BY %s`, c.role)) })
				dsn = strings.Replace(dsn, "postgres@", c.role+"@", 1)
			}
			before := describeRows(t, dst, c.table)
			flags := []string{"sync", "from-backup", "run", "--backup-target", chainURL, "--target", dsn, "--stream-id", stream, "--poll-interval", "300ms"}
			if c.role == "" {
				flags = append(flags, "--at-chain-id", full)
			}
			r := sluice(t, flags...)
			if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-BROKER-KEYLESS-TABLE") {
				t.Fatalf("want SLUICE-E-BROKER-KEYLESS-TABLE exit 3, got %s", r)
			}
			for _, p := range append(c.wantParts, inc, "hint:") {
				if !strings.Contains(r.stderr, p) {
					t.Errorf("stderr lacks %q:\n%s", p, r.stderr)
				}
			}
			if after := describeRows(t, dst, c.table); after != before {
				t.Fatalf("the refused incremental changed %s: %s -> %s", c.table, before, after)
			}
		})
	}
}

// describeRows renders a table's rows (or relation) for before/after checks.
func describeRows(t *testing.T, db, table string) string {
	t.Helper()
	var s string
	if err := queryString(db, fmt.Sprintf(`SELECT count(*) || ':' || coalesce(md5(string_agg(x::text, ',' ORDER BY x::text)), '') FROM %s x`, table), &s); err != nil {
		t.Fatalf("read %s: %v", table, err)
	}
	return s
}

func TestBrokerAppliesWhatItCanReplayExactlyOnce(t *testing.T) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, `CREATE TABLE keyed (id int PRIMARY KEY, v text); CREATE TABLE nokey (id int, v text); ALTER TABLE nokey REPLICA IDENTITY FULL;`)
	chainURL := fileChain(t)
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
	full := lastIncremental(t, chainURL, nil)
	// A keyed table with a change the reader could not name: applied, and
	// the broker warns once with the count.
	inc1 := appendIncremental(t, chainURL, "public.keyed", [][]string{{"1", "a"}, {"2", "b"}, {"3", "c"}}, true, 1)
	// A keyless table whose changes all carry identities: exactly-once
	// through the marks.
	inc2 := appendIncremental(t, chainURL, "public.nokey", [][]string{{"1", "x"}, {"1", "x"}}, true, 99)
	dst := testenv.CreateDB(t, "dst")
	mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(dst), "--through", full)
	stream := fmt.Sprintf("applies-%d", time.Now().UnixNano()%1e6)
	if r := sluice(t, "sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst), "--stream-id", stream,
		"--at-chain-id", full, "--poll-interval", "300ms", "--detach"); r.exit != 0 {
		t.Fatal(r)
	}
	waitBrokerAt(t, stream, inc2, time.Minute)
	stopBroker(t, chainURL, stream)
	if got := describeRows(t, dst, "public.keyed"); !strings.HasPrefix(got, "3:") {
		t.Fatalf("keyed: %s", got)
	}
	if got := describeRows(t, dst, "public.nokey"); !strings.HasPrefix(got, "2:") {
		t.Fatalf("nokey: %s", got)
	}
	warns := 0
	for _, l := range strings.Split(h.workerLog.String(), "\n") {
		if strings.Contains(l, "BROKER-UNIDENTIFIED-CHANGES") && strings.Contains(l, inc1) {
			warns++
			if !strings.Contains(l, "count=1") || !strings.Contains(l, "level=WARN") {
				t.Errorf("the warning should be a WARN with the count: %s", l)
			}
		}
	}
	if warns != 1 {
		t.Fatalf("want one BROKER-UNIDENTIFIED-CHANGES warning for %s, got %d", inc1, warns)
	}
}

func TestColdStartJudgedBeforeTheDrop(t *testing.T) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, `CREATE TABLE keyed (id int PRIMARY KEY, v text); INSERT INTO keyed VALUES (1, 'a');`)
	chainURL := fileChain(t)
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
	dst := testenv.CreateDB(t, "dst")
	testenv.Exec(t, dst, `CREATE TABLE public.operator_data (id int); INSERT INTO public.operator_data VALUES (7);
		CREATE VIEW public.keyed AS SELECT id, 'view'::text AS v FROM public.operator_data;`)
	stream := fmt.Sprintf("cold-%d", time.Now().UnixNano()%1e6)
	r := sluice(t, "sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst), "--stream-id", stream,
		"--reset-target-data", "--yes", "--poll-interval", "300ms")
	if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-BROKER-KEYLESS-TABLE") || !strings.Contains(r.stderr, "public.keyed is a view") {
		t.Fatalf("want SLUICE-E-BROKER-KEYLESS-TABLE about the view, exit 3; got %s", r)
	}
	// Nothing was dropped: the view and what it reads are still there.
	if got := describeRows(t, dst, "public.keyed"); !strings.HasPrefix(got, "1:") {
		t.Fatalf("the view is gone or changed: %s", got)
	}
}

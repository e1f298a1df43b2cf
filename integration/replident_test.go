package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/testenv"
)

// identityTables is a source whose tables need each kind of replica identity
// fix, beside one that needs none; each has rows the application updates and
// deletes.
const identityTables = `
CREATE TABLE keyed (id int PRIMARY KEY, v text);
CREATE TABLE by_code (code text NOT NULL, v text);
CREATE UNIQUE INDEX by_code_code ON by_code (code);
CREATE TABLE keyless (a int, b text);
CREATE TABLE partial (id int NOT NULL, v text);
CREATE UNIQUE INDEX partial_id ON partial (id) WHERE id > 0;
INSERT INTO keyed SELECT i, 'k' || i FROM generate_series(1, 20) i;
INSERT INTO by_code SELECT 'c' || i, 'v' || i FROM generate_series(1, 20) i;
INSERT INTO keyless VALUES (1, 'dup'), (1, 'dup'), (2, 'two'), (3, NULL);
INSERT INTO partial SELECT i, 'p' || i FROM generate_series(1, 20) i;
`

// applicationWrites are the application's updates and deletes on every
// table; with a missing identity PostgreSQL rejects them once published.
const applicationWrites = `
UPDATE keyed SET v = 'changed' WHERE id <= 5; DELETE FROM keyed WHERE id > 15;
UPDATE by_code SET v = 'changed' WHERE code IN ('c1', 'c2'); DELETE FROM by_code WHERE code = 'c3';
UPDATE keyless SET b = 'one of two' WHERE ctid = (SELECT ctid FROM keyless WHERE a = 1 LIMIT 1); DELETE FROM keyless WHERE a = 2;
UPDATE partial SET v = NULL WHERE id = 4; DELETE FROM partial WHERE id BETWEEN 10 AND 12;
`

// sourceSlotsAndPublications counts db's replication slots and publications.
func sourceSlotsAndPublications(t *testing.T, db string) (slots, pubs int) {
	t.Helper()
	if err := queryInt(t, db, `SELECT count(*) FROM pg_replication_slots WHERE database = current_database()`, &slots); err != nil {
		t.Fatal(err)
	}
	if err := queryInt(t, db, `SELECT count(*) FROM pg_publication`, &pubs); err != nil {
		t.Fatal(err)
	}
	return slots, pubs
}

func TestFullRefusesTablesWithoutReplicaIdentity(t *testing.T) {
	src := testenv.CreateDB(t, "identsrc")
	testenv.Exec(t, src, identityTables)
	chainURL := fileChain(t)
	r := sluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
	requireRefusal(t, r, "SLUICE-E-SOURCE-REPLICA-IDENTITY",
		"publication sluice_all_tables",
		"public.by_code (no primary key): ALTER TABLE public.by_code REPLICA IDENTITY USING INDEX by_code_code",
		"public.keyless (no primary key): ALTER TABLE public.keyless REPLICA IDENTITY FULL",
		// A partial unique index cannot identify rows.
		"public.partial (no primary key): ALTER TABLE public.partial REPLICA IDENTITY FULL",
		"--set-replica-identity auto")
	if strings.Contains(r.stderr, "public.keyed") {
		t.Errorf("the refusal lists public.keyed, which has a primary key:\n%s", r.stderr)
	}
	// The source is untouched: no slot, no publication, no chain.
	if slots, pubs := sourceSlotsAndPublications(t, src); slots != 0 || pubs != 0 {
		t.Fatalf("the refused full left %d slots and %d publications on the source", slots, pubs)
	}
	bs, err := blobstore.Open(context.Background(), chainURL, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chain.Open(bs).LoadCatalog(context.Background()); !errcode.Is(err, errcode.ChainNotFound) {
		t.Fatalf("the refused full committed a chain: %v", err)
	}
	// The application's updates and deletes still work.
	testenv.Exec(t, src, applicationWrites)
}

func TestSetReplicaIdentityAutoReplicatesUpdatesAndDeletes(t *testing.T) {
	src := testenv.CreateDB(t, "identsrc")
	testenv.Exec(t, src, identityTables)
	chainURL := fileChain(t)
	r := mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot", "--set-replica-identity", "auto")
	fixes := []string{
		"ALTER TABLE public.by_code REPLICA IDENTITY USING INDEX by_code_code",
		"ALTER TABLE public.keyless REPLICA IDENTITY FULL",
		"ALTER TABLE public.partial REPLICA IDENTITY FULL",
	}
	for _, fix := range fixes {
		if !strings.Contains(r.stdout, "replica identity set: "+fix) {
			t.Errorf("the output does not name %q:\n%s", fix, r.stdout)
		}
		logged := false
		for _, l := range strings.Split(h.workerLog.String(), "\n") {
			if strings.Contains(l, "REPLICA-IDENTITY-SET") && strings.Contains(l, chainURL) && strings.Contains(l, fix) {
				logged = true
			}
		}
		if !logged {
			t.Errorf("the worker did not log %q", fix)
		}
	}
	if strings.Contains(r.stdout, "public.keyed") {
		t.Errorf("the output names public.keyed, whose identity needed nothing:\n%s", r.stdout)
	}
	var idents string
	if err := queryString(src, `SELECT string_agg(relname || '=' || relreplident::text, ' ' ORDER BY relname) FROM pg_class
		WHERE relname IN ('keyed', 'by_code', 'keyless', 'partial') AND relkind = 'r'`, &idents); err != nil {
		t.Fatal(err)
	}
	if idents != "by_code=i keyed=d keyless=f partial=f" {
		t.Fatalf("replica identities after the full: %s", idents)
	}
	full := lastIncremental(t, chainURL, nil)

	// A broker tails the chain from the full.
	dst := testenv.CreateDB(t, "identdst")
	mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(dst), "--through", full)
	stream := fmt.Sprintf("ident-%d", time.Now().UnixNano()%1e6)
	mustSluice(t, "sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst), "--stream-id", stream,
		"--at-chain-id", full, "--poll-interval", "300ms", "--detach")
	defer stopBroker(t, chainURL, stream)

	// The application's updates and deletes work on the published tables,
	// and the producer carries them into the chain.
	testenv.Exec(t, src, applicationWrites)
	mustSluice(t, "backup", "incremental", "--source", testenv.DSN(src), "--target", chainURL)
	waitBrokerAtTip(t, stream, chainURL, nil, time.Minute)
	// So does a restore of the whole chain.
	restored := testenv.CreateDB(t, "identrestored")
	mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(restored))
	for _, table := range []string{"public.keyed", "public.by_code", "public.keyless", "public.partial"} {
		want := describeRows(t, src, table)
		if got := describeRows(t, dst, table); got != want {
			t.Errorf("%s: the broker's target holds %s, the source %s", table, got, want)
		}
		if got := describeRows(t, restored, table); got != want {
			t.Errorf("%s: the restore holds %s, the source %s", table, got, want)
		}
	}
}

func TestTableWithoutReplicaIdentityCreatedWhileStreaming(t *testing.T) {
	src := testenv.CreateDB(t, "identlate")
	testenv.Exec(t, src, `CREATE TABLE keyed (id int PRIMARY KEY, v text); INSERT INTO keyed VALUES (1, 'a')`)
	chainURL := fileChain(t)
	w := ownWorker(t, "ident")
	q := w.args
	mustSluice(t, q("backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")...)
	mustSluice(t, q("backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL, "--rollover-window", "1s", "--idle-window", "1s", "--detach")...)
	defer func() {
		mustSluice(t, q("backup", "stream", "stop", "--target", chainURL)...)
		waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	}()
	waitSlotActive(t, src, true)

	// Published at once by FOR ALL TABLES: the application may insert, but
	// its updates and deletes fail.
	testenv.Exec(t, src, `CREATE TABLE late_keyless (a int, b text); INSERT INTO late_keyless VALUES (1, 'x')`)
	if err := execErr(src, `UPDATE late_keyless SET b = 'y'`); err == nil || !strings.Contains(err.Error(), "replica identity") {
		t.Fatalf("want the application's UPDATE refused for want of a replica identity, got %v", err)
	}
	series := `sluice_source_tables_without_replica_identity{name="` + chainURL + `",role="producer"} `
	metric := func() string {
		body, err := getBody("http://" + w.admin + "/metrics")
		if err != nil {
			return err.Error()
		}
		for _, l := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(l, series); ok {
				return strings.TrimSpace(v)
			}
		}
		return "absent"
	}
	warnings := func() []string {
		var out []string
		for _, l := range strings.Split(w.log.String(), "\n") {
			if strings.Contains(l, "SOURCE-REPLICA-IDENTITY") && strings.Contains(l, "public.late_keyless") {
				out = append(out, l)
			}
		}
		return out
	}
	waitFor(t, time.Minute, "the producer's WARN and gauge for public.late_keyless", func() bool {
		return len(warnings()) > 0 && metric() == "1"
	})
	l := warnings()[0]
	for _, want := range []string{"level=WARN", "ALTER TABLE public.late_keyless REPLICA IDENTITY FULL", "no primary key"} {
		if !strings.Contains(l, want) {
			t.Errorf("the warning lacks %q: %s", want, l)
		}
	}
	// Later windows check again (each window once at its start, at least)
	// without warning again.
	time.Sleep(5 * time.Second)
	if n := len(warnings()); n != 1 {
		t.Fatalf("want one warning for public.late_keyless in this run, got %d:\n%s", n, strings.Join(warnings(), "\n"))
	}

	// The fix from the warning: the gauge falls back, and the update works.
	testenv.Exec(t, src, `ALTER TABLE late_keyless REPLICA IDENTITY FULL; UPDATE late_keyless SET b = 'y'`)
	waitFor(t, time.Minute, "the gauge back at 0", func() bool { return metric() == "0" })
}

// execErr runs sql in db and returns its error.
func execErr(db, sql string) error {
	conn, err := pgxConnect(db)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(context.Background(), sql)
	return err
}

// waitFor polls cond until it holds or within has passed.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(300 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

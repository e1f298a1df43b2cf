package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/testenv"
)

// A table created, and a column added, at the end of one segment, with no
// row change before the producer rotates, reach the next segment only
// through its full's schema: PostgreSQL's stream records a table's
// definition with its next row change, and the next segment's capture
// starts from the full, which already has it. A broker crossing the seam
// (it skips the later fulls) must still create the table and add the
// column before that segment's rows arrive; it once applied them to a
// table and a column the target did not have and failed on every retry.
// Three brokers of one chain, into PostgreSQL, MariaDB on four lanes and
// SQLite, each end with the source's rows.
func TestBrokerCrossesSegmentSeamWithSchemaOnlyInFull(t *testing.T) {
	src := testenv.CreateDB(t, "seamsrc")
	testenv.Exec(t, src, `CREATE TABLE accounts (id bigint PRIMARY KEY, balance int NOT NULL);
		CREATE TABLE ticks (id bigint PRIMARY KEY, at timestamptz NOT NULL DEFAULT now());
		INSERT INTO accounts SELECT i, i FROM generate_series(1, 50) i`)
	chainURL := fileChain(t)
	w := ownWorker(t, "seam")
	q := w.args
	mustSluice(t, q("backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")...)
	mustSluice(t, q("backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL,
		"--rollover-window", "1s", "--idle-window", "1s", "--retain-rotate-at-chain-length", "1", "--detach")...)

	suffix := time.Now().UnixNano() % 1e6
	targets := []struct{ driver, dsn, stream, lanes string }{
		{"postgres", testenv.DSN(testenv.CreateDB(t, "seamtgt")), fmt.Sprintf("seam-pg-%d", suffix), "2"},
		{"mysql", testenv.MySQLDSN(testenv.CreateMySQLDB(t, "seamtgt")), fmt.Sprintf("seam-my-%d", suffix), "4"},
		{"sqlite", t.TempDir() + "/seam.db", fmt.Sprintf("seam-lite-%d", suffix), "1"},
	}
	for _, tg := range targets {
		mustSluice(t, q("sync", "from-backup", "run", "--backup-target", chainURL, "--target-driver", tg.driver,
			"--target", tg.dsn, "--stream-id", tg.stream, "--apply-concurrency", tg.lanes,
			"--poll-interval", "300ms", "--reset-target-data", "--yes", "--detach")...)
	}
	tick := 0
	ticked := func() {
		tick++
		testenv.Exec(t, src, fmt.Sprintf(`INSERT INTO ticks (id) VALUES (%d)`, tick))
	}
	// Every broker applies from a position in the first segments.
	ticked()
	waitCaughtUp(t, src, time.Minute)
	for _, tg := range targets {
		waitBrokerAtTip(t, tg.stream, chainURL, nil, 2*time.Minute)
	}

	// Schema only, then rows of other tables until two more fulls exist:
	// the later one's snapshot was taken after the schema changes.
	testenv.Exec(t, src, `CREATE TABLE late (id bigint PRIMARY KEY, v text);
		ALTER TABLE accounts ADD COLUMN score int NOT NULL DEFAULT 7`)
	_, cat := openChainAt(t, chainURL)
	segments := len(cat.Segments)
	deadline := time.Now().Add(time.Minute)
	for {
		ticked()
		if _, cat = openChainAt(t, chainURL); len(cat.Segments) >= segments+2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the producer did not rotate twice within a minute (%d segments, %d before)", len(cat.Segments), segments)
		}
		time.Sleep(300 * time.Millisecond)
	}
	// Now the rows that need the new table and column.
	testenv.Exec(t, src, `INSERT INTO late SELECT i, 'late ' || i FROM generate_series(1, 20) i;
		UPDATE accounts SET score = id * 2, balance = balance + 1 WHERE id % 2 = 0`)
	ticked()
	waitCaughtUp(t, src, time.Minute)
	mustSluice(t, q("backup", "stream", "stop", "--target", chainURL)...)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	// A seam brings over only what changed: the one after the schema
	// changes touches late and accounts, every other none (so a rotation
	// costs the broker no DDL).
	ch, cat := openChainAt(t, chainURL)
	var touched []string
	for i := 1; i < len(cat.Segments); i++ {
		prev := cat.Segments[i-1]
		end := prev.Full.ID
		if n := len(prev.Incrementals); n > 0 {
			end = prev.Incrementals[n-1].ID
		}
		before, err := ch.SchemaAt(context.Background(), cat, end)
		if err != nil {
			t.Fatal(err)
		}
		after, err := ch.SchemaAt(context.Background(), cat, cat.Segments[i].Full.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range apply.SeamChanges(before, after) {
			touched = append(touched, fmt.Sprintf("seam %d: %s", i, c.Table))
		}
	}
	if len(touched) > 2 {
		t.Errorf("the seams bring over more than the new table and the altered one: %v", touched)
	}
	last := lastIncremental(t, chainURL, nil)
	for _, tg := range targets {
		waitBrokerAt(t, tg.stream, last, 2*time.Minute)
		requireSameNeutralRows(t, src, chainURL, tg.driver+" target "+tg.dsn, targetNeutralRows(t, tg.driver, tg.dsn))
		mustSluice(t, q("sync", "from-backup", "stop", "--backup-target", chainURL, "--stream-id", tg.stream)...)
		waitWorkflowEnd(t, "broker/"+tg.stream, time.Minute)
	}
}

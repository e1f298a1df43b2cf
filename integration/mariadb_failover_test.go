package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// A MariaDB chain follows its source through a failover. Two scratch
// servers replicate by GTID (the replica logs what it applies,
// log_slave_updates); both name their binlogs alike, so the old primary's
// file:offset means nothing on the new one. The producer streams the
// primary under a live workload; then the primary goes away and the
// replica is promoted. Pointed at the replica:
//   - without --follow-failover the producer is refused (SOURCE-MISMATCH,
//     exit 3, the hint naming the flag);
//   - with it, but while the replica still lacks transactions the chain
//     holds, it is refused with SOURCE-GTID-BEHIND (exit 3) and writes
//     nothing;
//   - once the replica has caught up and is promoted, the producer resumes
//     by GTID, streams the new primary's writes (a schema change among
//     them), rotates into a new segment there and survives a SIGKILL of
//     its worker.
//
// The chain holds every transaction once (chainAudit), and a restore of it
// equals the new primary value by value.
func TestMariaDBFollowsAFailoverByGTID(t *testing.T) {
	// Both log what they apply, so either can be promoted and the other
	// follow it (the soak's failovers go back and forth).
	primary := startScratchMariaDB(t, "--log-slave-updates=ON")
	replica := startScratchMariaDB(t, "--server-id=2", "--log-slave-updates=ON")
	mariaExec(t, primary.dsn("root", ""), "CREATE DATABASE source CHARACTER SET utf8mb4")
	srcA, srcB := primary.dsn("root", "source"), replica.dsn("root", "source")
	mariaExec(t, srcA, mariaSourceSchema)
	if _, err := mariaDB(t, srcA, "+05:30").ExecContext(context.Background(), typedInsert(0, 40, false)); err != nil {
		t.Fatal(err)
	}
	mariaExec(t, replica.dsn("root", ""), fmt.Sprintf(`CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = %s,
		MASTER_USER = 'root', MASTER_USE_GTID = slave_pos`, primary.port))
	mariaExec(t, replica.dsn("root", ""), "START SLAVE")
	caughtUp := func() { t.Helper(); gtidCaughtUp(t, srcA, replica.dsn("root", "")) }
	caughtUp()

	chainURL := fileChain(t)
	worker := ownWorker(t, "mariafailover")
	q := worker.args
	stream := func(dsn string, extra ...string) []string {
		return q(append([]string{"backup", "stream", "run", "--source-driver", "mariadb", "--source", dsn, "--target", chainURL,
			"--rollover-window", "1s", "--idle-window", "1s", "--detach"}, extra...)...)
	}
	mustSluice(t, q("backup", "full", "--source-driver", "mariadb", "--source", srcA, "--target", chainURL)...)
	mustSluice(t, stream(srcA)...)
	wl := &mariaWorkload{dsn: srcA, steps: 150, bigTx: 5_000, pause: 20 * time.Millisecond}
	if err := wl.run(context.Background(), t); err != nil {
		t.Fatal(err)
	}
	caughtUp()
	// The replica stops applying; the primary commits more, which the
	// chain takes in but the replica lacks.
	mariaExec(t, replica.dsn("root", ""), "STOP SLAVE")
	mariaExec(t, srcA, "INSERT INTO accounts (id, owner, balance) SELECT 3000000 + seq, 'late', seq FROM seq_1_to_200")
	waitMariaCaughtUp(t, srcA, chainURL, 2*time.Minute)
	mustSluice(t, q("backup", "stream", "stop", "--target", chainURL)...)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	tipBefore := lastIncremental(t, chainURL, nil)

	one := func(extra ...string) result {
		return sluice(t, q(append([]string{"backup", "incremental", "--source-driver", "mariadb", "--source", srcB, "--target", chainURL}, extra...)...)...)
	}
	r := one()
	if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-SOURCE-MISMATCH") || !strings.Contains(r.stderr, "--follow-failover") {
		t.Fatalf("the replica without --follow-failover: want SLUICE-E-SOURCE-MISMATCH (exit 3) naming --follow-failover, got %s", r)
	}
	r = one("--follow-failover")
	if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-SOURCE-GTID-BEHIND") {
		t.Fatalf("a replica behind the chain: want SLUICE-E-SOURCE-GTID-BEHIND (exit 3), got %s", r)
	}
	if got := lastIncremental(t, chainURL, nil); got != tipBefore {
		t.Fatalf("a refused run committed %s", got)
	}

	// The replica catches up; the primary goes away; the replica is
	// promoted and takes the writes.
	mariaExec(t, replica.dsn("root", ""), "START SLAVE")
	caughtUp()
	primary.crash()
	promoted := time.Now()
	mariaExec(t, replica.dsn("root", ""), "STOP SLAVE; RESET SLAVE ALL")
	mustSluice(t, stream(srcB, "--follow-failover", "--retain-rotate-at-chain-length", "4")...)
	var book faultBook
	newPrimary := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			mariaExec(t, srcB, fmt.Sprintf(`INSERT INTO accounts (id, owner, balance) VALUES (%d, 'promoted', %d.5);
				UPDATE accounts SET balance = balance - 1 WHERE id = %d; DELETE FROM accounts WHERE id = %d`, 4000000+i, i, 1+i, 3000001+i))
			if i == from+n/2 && from == 0 {
				mariaExec(t, srcB, "ALTER TABLE accounts ADD COLUMN after_failover int DEFAULT 7")
			}
		}
	}
	newPrimary(0, 40)
	waitMariaCaughtUp(t, srcB, chainURL, 2*time.Minute)
	book.injected("mariadb_failover", time.Since(promoted))
	// A rotation there: its full is the new server's snapshot, in the
	// chain that began on the old one.
	rotateBy := time.Now().Add(3 * time.Minute)
	for segmentsOf(t, chainURL) < 2 {
		if time.Now().After(rotateBy) {
			t.Fatal("the producer did not rotate on the promoted server within three minutes")
		}
		mariaExec(t, srcB, "INSERT INTO beat (at) VALUES (now(6))")
		time.Sleep(300 * time.Millisecond)
	}
	// A restart on the new primary resumes from a position of its own.
	worker.kill()
	newPrimary(100, 40)
	worker.restart()
	waitMariaCaughtUp(t, srcB, chainURL, 3*time.Minute)
	if tip := lastIncrementalPosition(t, chainURL); !strings.Contains(tip, "@mariadb:") {
		t.Errorf("the chain's tip %q does not name the promoted server its file and offset belong to", tip)
	}

	// At soak scale the servers fail over back and forth, each time
	// under writes: the old primary, back from its crash, follows the
	// new one by GTID; once it has caught up the new one crashes, the old
	// one is promoted and the producer is pointed at it.
	cur, old := replica, primary
	for round := 1; round < soakScale(); round++ {
		mariaExec(t, old.dsn("root", ""), fmt.Sprintf(`STOP SLAVE; SET GLOBAL gtid_slave_pos = @@GLOBAL.gtid_binlog_pos;
			CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = %s, MASTER_USER = 'root', MASTER_USE_GTID = slave_pos; START SLAVE`, cur.port))
		curDSN := cur.dsn("root", "source")
		for i := 0; i < 40; i++ {
			id := 5000000 + round*1000 + i
			mariaExec(t, curDSN, fmt.Sprintf(`INSERT INTO accounts (id, owner, balance) VALUES (%d, 'round', %d.5);
				UPDATE accounts SET balance = balance + 1 WHERE id = %d`, id, i, id-i/2))
		}
		waitOnServer(t, curDSN, chainURL, cur != primary, 2*time.Minute)
		gtidCaughtUp(t, curDSN, old.dsn("root", ""))
		cur.crash()
		promoted := time.Now()
		mariaExec(t, old.dsn("root", ""), "STOP SLAVE; RESET SLAVE ALL")
		mustSluice(t, q("backup", "stream", "stop", "--target", chainURL)...)
		waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
		cur, old = old, cur
		curDSN = cur.dsn("root", "source")
		mustSluice(t, stream(curDSN, "--follow-failover", "--retain-rotate-at-chain-length", "4")...)
		mariaExec(t, curDSN, fmt.Sprintf("DELETE FROM accounts WHERE id = %d", 5000000+round*1000))
		waitOnServer(t, curDSN, chainURL, cur != primary, 2*time.Minute)
		book.injected("mariadb_failover", time.Since(promoted))
		t.Logf("failover %d: to %s, recovered in %s", round+1, curDSN, time.Since(promoted).Round(100*time.Millisecond))
	}
	curDSN := cur.dsn("root", "source")
	mustSluice(t, q("backup", "stream", "stop", "--target", chainURL)...)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)

	txs, segments := chainAudit(t, chainURL)
	t.Logf("chain: %d transactions in %d segments, none in two incrementals", txs, segments)
	dst := testenv.CreateMySQLDB(t, "myfailoverdst")
	mustSluice(t, q("restore", "--backup-target", chainURL, "--target-driver", "mysql", "--target", testenv.MySQLDSN(dst))...)
	ch, _ := openChainAt(t, chainURL)
	book.report(t, tallyRows(t, ch, mariaNeutralRows(t, curDSN), targetNeutralRows(t, "mysql", testenv.MySQLDSN(dst))))
	requireNeutralRowsEqual(t, chainURL, "the promoted MariaDB "+curDSN, mariaNeutralRows(t, curDSN),
		fmt.Sprintf("restore of the chain into %s", dst), targetNeutralRows(t, "mysql", testenv.MySQLDSN(dst)))
}

// waitOnServer waits, as waitMariaCaughtUp does, until the chain's tip
// covers the server at dsn, once the tip is a position read on that
// server: tagged with it when it is not the chain's own (followed), else
// untagged. Until then a tip's file and offset belong to the other server.
func waitOnServer(t *testing.T, dsn, chainURL string, followed bool, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(300 * time.Millisecond) {
		if strings.Contains(lastIncrementalPosition(t, chainURL), " @") == followed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the chain's tip %q is not a position of %s within %s", lastIncrementalPosition(t, chainURL), dsn, within)
		}
		mariaExec(t, dsn, "INSERT INTO beat (at) VALUES (now(6))")
	}
	waitMariaCaughtUp(t, dsn, chainURL, within)
}

// gtidCaughtUp waits until the replica at replicaDSN has applied
// everything the primary at primaryDSN has in its binlog.
func gtidCaughtUp(t *testing.T, primaryDSN, replicaDSN string) {
	t.Helper()
	var pos string
	if err := testenv.MySQLAt(t, primaryDSN).QueryRowContext(context.Background(), "SELECT @@GLOBAL.gtid_binlog_pos").Scan(&pos); err != nil {
		t.Fatal(err)
	}
	var r int
	if err := testenv.MySQLAt(t, replicaDSN).QueryRowContext(context.Background(), "SELECT MASTER_GTID_WAIT(?, 120)", pos).Scan(&r); err != nil || r != 0 {
		t.Fatalf("the replica %s did not reach the primary's GTID position %s within 2 minutes (%d, %v)", replicaDSN, pos, r, err)
	}
}

// lastIncrementalPosition is the end position of the chain's tip.
func lastIncrementalPosition(t *testing.T, chainURL string) string {
	t.Helper()
	_, cat := openChainAt(t, chainURL)
	return cat.Tip().EndPosition
}

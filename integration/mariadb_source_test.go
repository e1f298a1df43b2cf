package integration

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// MariaDB → PostgreSQL, → SQLite and → MariaDB (another database on the
// same server) end to end: a full backup of a fresh MariaDB database (a
// keyed table, a keyless one with duplicate rows, keys that change, a table
// of many MySQL types written at a session zone other than UTC), then the
// producer streams a live workload read from the binlog (an ADD COLUMN, a
// new table and a large transaction inside the window, rotation every five
// links) while the broker, started cold with --reset-target-data, applies
// it and its worker is SIGKILLed again and again. At the end the target
// holds exactly the source's rows, compared per neutral kind with the
// source read back through MariaDB's own text output.
func TestMariaDBSourceSurvivesWorkerKills(t *testing.T) {
	// Each pair is kept short (about a minute): 300 workload steps and a
	// 20,000-row transaction still put every change kind, the schema
	// change and the large transaction inside incrementals the kills land
	// in, and at least five kills.
	for _, tc := range []struct {
		name, driver string
		concurrency  int
		// sealed runs the chain encrypted and signed.
		sealed bool
	}{
		{"postgres", "postgres", 2, false},
		{"sqlite", "sqlite", 1, false},
		{"sqlite-encrypted-signed", "sqlite", 1, true},
		{"mariadb", "mysql", 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dsn string
			switch tc.driver {
			case "postgres":
				dsn = testenv.DSN(testenv.CreateDB(t, "mysrctgt"))
			case "sqlite":
				dsn = filepath.Join(t.TempDir(), "replica.db")
			case "mysql":
				dsn = testenv.MySQLDSN(testenv.CreateMySQLDB(t, "mysrctgt"))
			}
			var writer, reader []string
			if tc.sealed {
				kp := newSigningPair(t)
				writer, reader = writerTrust(kp), readerTrust(kp)
			}
			mariaSourceSurvivesWorkerKills(t, tc.name, tc.driver, dsn, tc.concurrency, writer, reader)
		})
	}
}

// newMariaSource creates a MariaDB source database with mariaSourceSchema
// and typed rows 0-39 (signed64: see typedRow), and returns its mysql:// URL.
func newMariaSource(t *testing.T, prefix string, signed64 bool) string {
	t.Helper()
	srcDSN := testenv.MySQLDSN(testenv.CreateMySQLDB(t, prefix))
	mariaExec(t, srcDSN, mariaSourceSchema)
	conn := mariaDB(t, srcDSN, "+05:30")
	if _, err := conn.ExecContext(context.Background(), typedInsert(0, 40, signed64)); err != nil {
		t.Fatal(err)
	}
	return srcDSN
}

func mariaSourceSurvivesWorkerKills(t *testing.T, name, driver, dsn string, concurrency int, writer, reader []string) {
	// SQLite refuses an unsigned value above 2^63-1, as documented
	// (docs/sqlite-target.md): its source keeps within it.
	signed64 := driver == "sqlite"
	srcDSN := newMariaSource(t, "mysrc"+name, signed64)
	chainURL := fileChain(t)
	// The producer runs on a worker of its own; the broker's worker is the
	// one killed, so the kills land while it applies.
	producer := ownWorker(t, "mariasrcproducer"+name)
	pq := producer.args
	worker := ownWorker(t, "mariasrckills"+name)
	q := worker.args
	stream := fmt.Sprintf("mariasrc-%s-%d", name, time.Now().UnixNano()%1e6)
	src := []string{"--source-driver", "mariadb", "--source", srcDSN}

	mustSluice(t, pq(append(append(append([]string{"backup", "full"}, src...), "--target", chainURL), writer...)...)...)
	mustSluice(t, pq(append(append(append([]string{"backup", "stream", "run"}, src...), "--target", chainURL,
		"--rollover-window", "1s", "--idle-window", "1s", "--retain-rotate-at-chain-length", "5", "--detach"), writer...)...)...)
	run := func(flags ...string) {
		mustSluice(t, q(append(append([]string{"sync", "from-backup", "run", "--backup-target", chainURL, "--target-driver", driver,
			"--target", dsn, "--stream-id", stream, "--apply-concurrency", fmt.Sprint(concurrency),
			"--poll-interval", "300ms", "--detach"}, reader...), flags...)...)...)
	}
	run("--reset-target-data", "--yes")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wl := &mariaWorkload{dsn: srcDSN, steps: 300 * soakScale(), bigTx: 20_000 * soakScale(), pause: 30 * time.Millisecond, signed64: signed64}
	done := make(chan error, 1)
	go func() { done <- wl.run(ctx, t) }()

	kills, midApply := killWhileApplying(t, worker, stream, wl, done, 5*soakScale(), func(reset bool) {
		if reset {
			run("--reset-target-data", "--yes") // killed before the reset recorded a position
			return
		}
		run()
	})
	if midApply == 0 {
		t.Logf("none of %d kills landed inside an incremental", kills)
	}
	killed := time.Now()
	mariaExec(t, srcDSN, `UPDATE accounts SET balance = balance + 1 WHERE id % 3 = 0`)
	waitMariaCaughtUp(t, srcDSN, chainURL, 3*time.Minute)
	mustSluice(t, pq("backup", "stream", "stop", "--target", chainURL)...)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	waitBrokerAt(t, stream, lastIncremental(t, chainURL, nil), 5*time.Minute)
	t.Logf("the broker caught up %s after the last kill", time.Since(killed).Round(100*time.Millisecond))
	requireNeutralRowsEqual(t, chainURL, "MariaDB source "+srcDSN, mariaNeutralRows(t, srcDSN),
		driver+" target "+dsn, targetNeutralRows(t, driver, dsn))
	mustSluice(t, q("sync", "from-backup", "stop", "--backup-target", chainURL, "--stream-id", stream)...)
	waitWorkflowEnd(t, "broker/"+stream, time.Minute)
}

// Writes running while `backup full` takes its snapshot land exactly once
// in the chain: either in the full or in the first incremental, never in
// both and never in neither. Two writers hammer a keyless table (duplicate
// rows, deletes of one of them, multi-statement transactions) and a keyed
// one from before the full until after it; one incremental then covers up
// to now, the chain is restored into SQLite and the row multisets must be
// equal to the source's.
func TestMariaDBSourceNoDuplicateAtSeam(t *testing.T) {
	srcDSN := testenv.MySQLDSN(testenv.CreateMySQLDB(t, "mysrcseam"))
	// bulk makes the snapshot take long enough for the writers to run
	// through it.
	mariaExec(t, srcDSN, `
CREATE TABLE hammer (k int, v varchar(20), n int);
CREATE TABLE counter (id int PRIMARY KEY, n bigint NOT NULL);
CREATE TABLE bulk (id int PRIMARY KEY, pad varchar(200));
INSERT INTO counter SELECT seq, 0 FROM seq_0_to_9;
INSERT INTO bulk SELECT seq, REPEAT('p', 200) FROM seq_1_to_300000;
INSERT INTO hammer SELECT seq % 10, 'seed', 0 FROM seq_1_to_100;`)
	src := []string{"--source-driver", "mariadb", "--source", srcDSN}
	chainURL := fileChain(t)

	var stop atomic.Bool
	var during, total atomic.Int64
	var inFull atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			conn, err := testenv.MySQLAt(t, srcDSN).Conn(context.Background())
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			for i := 0; !stop.Load(); i++ {
				stmts := []string{fmt.Sprintf(`INSERT INTO hammer VALUES (%d, 'w%d', %d), (%d, 'dup', 0)`, i%10, w, i, i%10)}
				if i%3 == 0 {
					stmts = append(stmts, `DELETE FROM hammer WHERE v = 'dup' LIMIT 1`)
				}
				if i%4 == 0 {
					stmts = append(stmts, fmt.Sprintf(`UPDATE hammer SET n = n + 1 WHERE v = 'w%d' AND k = %d LIMIT 1`, w, i%10))
				}
				stmts = append(stmts, fmt.Sprintf(`UPDATE counter SET n = n + 1 WHERE id = %d`, i%10))
				if err := mariaTx(context.Background(), conn, stmts); err != nil {
					// The writers' deletes and updates of the keyless table
					// scan it and can deadlock: InnoDB rolled one back whole.
					if strings.Contains(err.Error(), "Error 1213") {
						continue
					}
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
				total.Add(1)
				if inFull.Load() {
					during.Add(1)
				}
			}
		}(w)
	}
	time.Sleep(300 * time.Millisecond)
	inFull.Store(true)
	began := time.Now()
	mustSluice(t, append(append([]string{"backup", "full"}, src...), "--target", chainURL)...)
	inFull.Store(false)
	took := time.Since(began)
	time.Sleep(300 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d write transactions, %d of them while backup full ran (%s)", total.Load(), during.Load(), took.Round(time.Millisecond))
	if during.Load() == 0 {
		t.Fatal("no write committed while the full ran: the test did not test the seam")
	}
	mustSluice(t, append(append([]string{"backup", "incremental"}, src...), "--target", chainURL)...)
	file := filepath.Join(t.TempDir(), "seam.db")
	mustSluice(t, "restore", "--backup-target", chainURL, "--target-driver", "sqlite", "--target", file)
	requireNeutralRowsEqual(t, chainURL, "MariaDB source "+srcDSN, mariaNeutralRows(t, srcDSN),
		"SQLite restore "+file, targetNeutralRows(t, "sqlite", file))
	var n int
	if err := testenv.MySQLAt(t, srcDSN).QueryRow(`SELECT count(*) FROM hammer WHERE v = 'dup'`).Scan(&n); err != nil && err != sql.ErrNoRows {
		t.Fatal(err)
	}
	t.Logf("the keyless table ends with %d duplicate rows", n)
}

package integration

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// sourceFault is one fault of a source: its class in the FAULTS table and
// what injects it (false when it hit nothing, say no replication
// connection was open at that moment).
type sourceFault struct {
	class string
	do    func() bool
}

// sourceFaultRun streams a resilientLoad on a scratch source server (driver
// postgres or mariadb, database at dsn) through a file chain into a
// PostgreSQL target on two lanes, and injects faults one after another,
// round-robin, until each has hit 2 × SLUICE_SOAK_SCALE times, each as
// soon as the broker is seen inside an incremental. After each it waits
// for the run to recover (a transaction committed after the fault is in
// the chain and applied). At the end no source transaction is in two
// incrementals or split across them (chainAudit: no gap, no repeat in the
// chain), and the target equals the source row by row.
func sourceFaultRun(t *testing.T, name, driver, dsn string, faults []sourceFault) {
	t.Helper()
	dst := testenv.CreateDB(t, "fsdst"+name)
	chainURL := fileChain(t)
	r := newFaultRig(t, "source"+name, faultSource{driver: driver, dsn: dsn}, chainURL, nil, nil, "postgres", testenv.DSN(dst), 2)
	r.touch = resilientTouch(t, driver, dsn)
	r.start()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wl := &resilientLoad{driver: driver, dsn: dsn, steps: 400 * soakScale(), pause: 20 * time.Millisecond}
	done := runLoad(ctx, t, wl, r.touch)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	want := 2 * soakScale()
	hits := make([]int, len(faults))
	for round, misses := 0, 0; ; round++ {
		k := round % len(faults)
		if hits[k] >= want {
			if allAtLeast(hits, want) {
				break
			}
			continue
		}
		time.Sleep(time.Duration(300+rng.Intn(900)) * time.Millisecond)
		applying := r.awaitApplying(8 * time.Second)
		if !faults[k].do() {
			if misses++; misses > 50 {
				t.Fatalf("%s hit nothing 50 times", faults[k].class)
			}
			continue
		}
		hits[k]++
		ended := time.Now()
		took := r.awaitRecovery(ended, 3*time.Minute)
		r.book.injected(faults[k].class, took)
		t.Logf("%s %d (workload step %d, mid-apply %v): recovered in %s", faults[k].class, hits[k], wl.progress(), applying,
			took.Round(100*time.Millisecond))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r.finish()
	txs, segments := chainAudit(t, chainURL)
	t.Logf("chain: %d transactions in %d segments, none in two incrementals", txs, segments)
}

func allAtLeast(counts []int, n int) bool {
	for _, c := range counts {
		if c < n {
			return false
		}
	}
	return true
}

// resilientTouch commits one row into the resilientLoad's keyless table,
// returning the error of a source that is not answering (restarting).
func resilientTouch(t *testing.T, driver, dsn string) func(n int) error {
	t.Helper()
	if driver == "postgres" {
		return func(n int) error {
			return pgExec(dsn, fmt.Sprintf("INSERT INTO notes VALUES ('touch', 'touch %d')", n))
		}
	}
	db := testenv.MySQLAt(t, dsn) // a pool: it connects again after a restart
	return func(n int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := db.ExecContext(ctx, fmt.Sprintf("INSERT INTO notes VALUES ('touch', 'touch %d')", n))
		return err
	}
}

// The source PostgreSQL server misbehaves under a live workload while a
// producer streams it and a broker applies it: the producer's walsender is
// terminated (pg_terminate_backend), the server crashes (immediate
// shutdown, so the slot's on-disk position may be older than the chain's
// tip) and is shut down cleanly and started again. The producer resumes
// from the chain's tip each time: no transaction missing from the chain
// or in it twice, and the target equals the source.
//
// sluice:heavy — a live workload under faults; run apart from the other
// heavy tests (deploy/dev/test.sh). The server is a scratch one.
func TestFaultsSourcePostgres(t *testing.T) {
	s := startScratchPostgres(t)
	dsn := s.createDB("source")
	// The keyless table needs a replica identity for the publication.
	if err := pgExec(dsn, resilientSchema+"ALTER TABLE notes REPLICA IDENTITY FULL;"); err != nil {
		t.Fatal(err)
	}
	sourceFaultRun(t, "pg", "postgres", dsn, []sourceFault{
		{"source_walsender_terminated_postgres", func() bool {
			var n int
			if err := pgQueryRow(dsn, `SELECT count(pg_terminate_backend(active_pid))::int FROM pg_replication_slots
				WHERE slot_name LIKE 'sluice\_%' AND active_pid IS NOT NULL`, &n); err != nil {
				t.Fatal(err)
			}
			return n > 0
		}},
		{"source_crash_postgres", func() bool { s.restart(true); return true }},
		{"source_restart_postgres", func() bool { s.restart(false); return true }},
	})
}

// The source MariaDB server misbehaves the same way: the producer's
// binlog dump connection is killed (KILL CONNECTION), the server is killed
// with SIGKILL (crash recovery) and shut down cleanly and started again.
// As above: no gap, no repeat, the target equals the source.
//
// sluice:heavy — a live workload under faults; run apart from the other
// heavy tests (deploy/dev/test.sh). The server is a scratch one.
func TestFaultsSourceMariaDB(t *testing.T) {
	s := startScratchMariaDB(t)
	mariaExec(t, s.dsn("root", ""), "CREATE DATABASE source CHARACTER SET utf8mb4")
	dsn := s.dsn("root", "source")
	mariaExec(t, dsn, resilientSchema)
	admin := testenv.MySQLAt(t, s.dsn("root", "")) // a pool: it connects again after a restart
	sourceFaultRun(t, "my", "mariadb", dsn, []sourceFault{
		{"source_binlog_connection_killed_mariadb", func() bool {
			return killMariaDBConnections(t, admin, "COMMAND LIKE 'Binlog Dump%'") > 0
		}},
		{"source_crash_mariadb", func() bool { s.crash(); return true }},
		{"source_restart_mariadb", func() bool { s.restart(); return true }},
	})
}

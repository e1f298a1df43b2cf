package integration

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// targetFaultRun runs a live PostgreSQL workload through a file chain into
// the rig's target and calls fault again and again (at least faults times,
// each as soon as the broker is seen inside an incremental), recording each
// as class with the time the run took to recover; fault returns whether it
// hit anything (a connection terminated, a server restarted). At the end
// the target must equal the source row by row.
func targetFaultRun(t *testing.T, name, dstDriver, dstDSN string, lanes, faults int, class string, fault func() bool) {
	t.Helper()
	src := testenv.CreateDB(t, "ftsrc"+name)
	testenv.Exec(t, src, workloadSchema)
	r := newFaultRig(t, "target"+name, faultSource{driver: "postgres", dsn: testenv.DSN(src)}, fileChain(t), nil, nil,
		dstDriver, dstDSN, lanes)
	r.touch = pgTouch(testenv.DSN(src))
	r.start()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wl := &workload{db: src, steps: 300 * soakScale(), bigTx: 20_000 * soakScale(), pause: 30 * time.Millisecond}
	done := runLoad(ctx, t, wl, r.touch)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	midApply := 0
	for hit := 0; hit < faults; {
		time.Sleep(time.Duration(300+rng.Intn(900)) * time.Millisecond)
		applying := r.awaitApplying(8 * time.Second)
		if !fault() {
			continue
		}
		hit++
		if applying {
			midApply++
		}
		ended := time.Now()
		took := r.awaitRecovery(ended, 3*time.Minute)
		r.book.injected(class, took)
		t.Logf("%s %d (workload step %d, mid-apply %v): recovered in %s", class, hit, wl.progress(), applying, took.Round(100*time.Millisecond))
	}
	if midApply == 0 {
		t.Fatalf("none of %d faults landed while the broker applied an incremental: the test did not test what it claims", faults)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r.finish()
}

// The broker's connections to a PostgreSQL target are terminated
// (pg_terminate_backend) again and again while it applies a live workload
// on four lanes: it resumes exactly once each time, and the target ends
// equal to the source, no row lost or applied twice. Only the test's own
// target database's connections are terminated.
//
// sluice:heavy — a live workload under faults; run apart from the other
// heavy tests (deploy/dev/test.sh).
func TestFaultsTargetPostgresBackendsTerminated(t *testing.T) {
	dst := testenv.CreateDB(t, "ftdstpg")
	targetFaultRun(t, "pgterm", "postgres", testenv.DSN(dst), 4, 4*soakScale(), "target_backends_terminated_postgres", func() bool {
		var n int
		if err := pgQueryRow(testenv.AdminDSN(), `SELECT count(pg_terminate_backend(pid))::int FROM pg_stat_activity
			WHERE datname = $1 AND pid <> pg_backend_pid()`, &n, dst); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
}

// The broker's connections to a MariaDB target are killed (KILL
// CONNECTION) again and again while it applies on four lanes; as above.
// Only connections to the test's own database are killed.
//
// sluice:heavy — a live workload under faults; run apart from the other
// heavy tests (deploy/dev/test.sh).
func TestFaultsTargetMariaDBConnectionsKilled(t *testing.T) {
	db := testenv.CreateMySQLDB(t, "ftdstmy")
	admin := testenv.MySQL(t, "")
	targetFaultRun(t, "mykill", "mysql", testenv.MySQLDSN(db), 4, 4*soakScale(), "target_connections_killed_mariadb", func() bool {
		return killMariaDBConnections(t, admin, "DB = ?", db) > 0
	})
}

// killMariaDBConnections kills (KILL CONNECTION) every connection of the
// server that the processlist condition where (with args) selects, but the
// caller's own, and returns how many it killed.
func killMariaDBConnections(t *testing.T, admin *sql.DB, where string, args ...any) int {
	t.Helper()
	ctx := context.Background()
	rows, err := admin.QueryContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND "+where, args...)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	killed := 0
	for _, id := range ids {
		// A connection that ended meanwhile is no error worth failing on.
		if _, err := admin.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err == nil {
			killed++
		}
	}
	return killed
}

// The target PostgreSQL server is restarted (alternately crashed with
// immediate shutdown and shut down fast) while the broker applies a live
// workload on four lanes: the broker waits for it, resumes exactly once,
// and the target ends equal to the source. The server is a scratch one
// of the test's own.
//
// sluice:heavy — it restarts a database server of its own (a scratch one),
// whose restart and crash recovery load the machine: it runs in the heavy
// lane, beside the shards but never beside another heavy test.
func TestFaultsTargetPostgresRestarts(t *testing.T) {
	s := startScratchPostgres(t)
	dsn := s.createDB("target")
	n := 0
	targetFaultRun(t, "pgrestart", "postgres", dsn, 4, 2*soakScale(), "target_restart_postgres", func() bool {
		n++
		s.restart(n%2 == 1)
		return true
	})
}

// The target MariaDB server is restarted (alternately killed with SIGKILL
// and shut down cleanly) while the broker applies a live workload on four
// lanes; as above, on a scratch server of the test's own.
//
// sluice:heavy — it restarts a database server of its own (a scratch one),
// whose restart and crash recovery load the machine: it runs in the heavy
// lane, beside the shards but never beside another heavy test.
func TestFaultsTargetMariaDBRestarts(t *testing.T) {
	s := startScratchMariaDB(t)
	mariaExec(t, s.dsn("root", ""), "CREATE DATABASE target CHARACTER SET utf8mb4")
	n := 0
	targetFaultRun(t, "myrestart", "mysql", s.dsn("root", "target"), 4, 2*soakScale(), "target_restart_mariadb", func() bool {
		n++
		if n%2 == 1 {
			s.crash()
		} else {
			s.restart()
		}
		return true
	})
}

package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	mysqltarget "github.com/sluicehq/sluice/internal/target/mysql"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/internal/value"
)

// PostgreSQL → MariaDB end to end, with one apply lane and with four: the
// producer streams the live workload (keyless table, key changes, TOASTed
// values, an added column, a new table, a truncate, a large transaction)
// while the broker, started cold with --reset-target-data into a fresh
// MariaDB database, applies it; the broker's worker is SIGKILLed again and
// again while it applies. MySQL commits implicitly around DDL and TRUNCATE,
// so a kill can land between such a commit and the position's: the target
// must converge anyway. At the end the database holds exactly the source's
// rows, compared value by value through each column's neutral kind.
func TestPostgresToMariaDBSurvivesWorkerKills(t *testing.T) {
	// The large transaction is 50,000 rows, not the SQLite test's 200,000:
	// MariaDB applies it at about 10,000 rows a second on one lane, so
	// 200,000 rows took some 20 s to catch up after the kills and nearly
	// doubled the subtest's time. 50,000 rows still outlast the gap between
	// two kills, so the kills after it is committed land inside it (InnoDB
	// rolls it back each time). c4 runs 400 steps: the loop kills at least
	// eight times anyway, and more steps would only add kills inside the
	// same large incremental.
	for _, tc := range []struct {
		name         string
		concurrency  int
		steps, bigTx int
	}{
		{"c1", 1, 600, 50_000},
		{"c4", 4, 400, 50_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mariaDBSurvivesWorkerKills(t, tc.name, tc.concurrency, tc.steps*soakScale(), tc.bigTx*soakScale())
		})
	}
}

func mariaDBSurvivesWorkerKills(t *testing.T, name string, concurrency, steps, bigTx int) {
	src := testenv.CreateDB(t, "mysqlsrc"+name)
	testenv.Exec(t, src, workloadSchema)
	chainURL := fileChain(t)
	db := testenv.CreateMySQLDB(t, "kills"+name)
	dsn := testenv.MySQLDSN(db)
	// The producer runs on a worker of its own; the broker's worker is the
	// one killed, so the kills land while it applies.
	producer := ownWorker(t, "mysqlproducer"+name)
	pq := producer.args
	worker := ownWorker(t, "mysqlkills"+name)
	q := worker.args
	stream := fmt.Sprintf("mysql-%s-%d", name, time.Now().UnixNano()%1e6)

	mustSluice(t, pq("backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")...)
	mustSluice(t, pq("backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL,
		"--rollover-window", "1s", "--retain-rotate-at-chain-length", "5", "--detach")...)
	run := func(flags ...string) {
		mustSluice(t, q(append([]string{"sync", "from-backup", "run", "--backup-target", chainURL, "--target-driver", "mysql",
			"--target", dsn, "--stream-id", stream, "--apply-concurrency", fmt.Sprint(concurrency),
			"--poll-interval", "300ms", "--detach"}, flags...)...)...)
	}
	run("--reset-target-data", "--yes")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The shared workload adds a column (steps/5), creates a table
	// (2·steps/5), truncates (3·steps/5) and runs the large transaction
	// right after, all while the producer streams: each lands inside an
	// incremental the broker applies under the kills.
	wl := &workload{db: src, steps: steps, bigTx: bigTx, pause: 30 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- wl.run(ctx, t) }()

	kills, midApply := killWhileApplying(t, worker, stream, wl, done, 8*soakScale(), func(reset bool) {
		if reset {
			run("--reset-target-data", "--yes") // killed before the reset recorded a position
			return
		}
		run()
	})
	if midApply == 0 {
		t.Fatalf("none of %d kills landed inside an incremental: the test did not test what it claims", kills)
	}
	killed := time.Now()
	testenv.Exec(t, src, `UPDATE accounts SET balance = balance + 1 WHERE id % 3 = 0`)
	waitCaughtUp(t, src, 3*time.Minute)
	mustSluice(t, pq("backup", "stream", "stop", "--target", chainURL)...)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	waitBrokerAt(t, stream, lastIncremental(t, chainURL, nil), 5*time.Minute)
	t.Logf("the broker caught up %s after the last kill", time.Since(killed).Round(100*time.Millisecond))
	tgt, err := mysqltarget.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close(context.Background())
	requireSameNeutralRows(t, src, chainURL, "MariaDB target "+dsn, func(tb *chain.Table) ([][]value.Value, error) {
		return tgt.ReadRows(context.Background(), tb)
	})
	mustSluice(t, q("sync", "from-backup", "stop", "--backup-target", chainURL, "--stream-id", stream)...)
	waitWorkflowEnd(t, "broker/"+stream, time.Minute)
}

// A MySQL target DSN the worker could not use is refused by the CLI with
// the usage status before any workflow starts: one naming no database, one
// with a parameter the target does not know (a typo must not be ignored),
// and one carrying a literal password (it would be stored in Temporal's
// history; the message must not repeat it).
func TestMySQLTargetUsageRefusals(t *testing.T) {
	chainURL := fileChain(t)
	cl := temporalClient(t)
	defer cl.Close()
	const password = "Lit3ral-pw-in-dsn"
	for _, tc := range []struct {
		name, driver, dsn, code, says string
	}{
		{"no database", "mysql", "mysql://root@127.0.0.1:3306/", string(errcode.ConfigInvalid), "names no database"},
		{"no path", "mariadb", "mysql://root@127.0.0.1:3306", string(errcode.ConfigInvalid), "names no database"},
		{"unknown parameter", "mysql", "mysql://root@127.0.0.1:3306/app?sslmode=disable", string(errcode.ConfigInvalid), `unknown parameter "sslmode"`},
		{"literal password", "mysql", "mysql://root:" + password + "@127.0.0.1:3306/app", string(errcode.LiteralSecret), "carries a literal password"},
		{"literal password, alias", "mariadb", "mariadb://root:" + password + "@127.0.0.1:3306/app", string(errcode.LiteralSecret), "carries a literal password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream := fmt.Sprintf("mysql-refused-%d", time.Now().UnixNano()%1e9)
			r := sluice(t, "sync", "from-backup", "run", "--backup-target", chainURL, "--target-driver", tc.driver,
				"--target", tc.dsn, "--stream-id", stream, "--detach")
			if r.exit != errcode.ExitUsage {
				t.Fatalf("exit %d, want %d: %s", r.exit, errcode.ExitUsage, r)
			}
			if !strings.Contains(r.stderr, tc.code) || !strings.Contains(r.stderr, tc.says) {
				t.Fatalf("stderr does not name %s (%s): %s", tc.code, tc.says, r)
			}
			if strings.Contains(r.stdout+r.stderr, password) {
				t.Fatalf("the output repeats the DSN's password: %s", r)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := cl.DescribeWorkflow(ctx, "broker/"+stream, "")
			var nf *serviceerror.NotFound
			if !errors.As(err, &nf) {
				t.Fatalf("broker/%s: describe returned %v, want not found: the refused command started a workflow", stream, err)
			}
		})
	}
}

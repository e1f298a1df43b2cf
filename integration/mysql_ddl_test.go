package integration

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// MySQL commits DDL and TRUNCATE implicitly, so they cannot share a
// transaction with their apply marks. For each, the broker's worker is
// SIGKILLed while it holds just before and just after the statement (a
// failpoint the MySQL target offers tests, SLUICE_TEST_MYSQL_HOLD_IMPLICIT);
// the restarted broker finishes the incremental and MariaDB holds every row
// exactly once — a keyless table with duplicate rows included — and the
// schema change exactly once.
func TestMariaDBImplicitCommitSurvivesSIGKILL(t *testing.T) {
	for _, tc := range []struct {
		op, side string
		change   string
		wantK    []string
		wantKL   []string
	}{
		{"schema", "before", `ALTER TABLE k ADD COLUMN c text DEFAULT 'dflt'`, []string{"1|a|dflt", "2|b|c2"}, []string{"1|x", "1|x", "2|y"}},
		{"schema", "after", `ALTER TABLE k ADD COLUMN c text DEFAULT 'dflt'`, []string{"1|a|dflt", "2|b|c2"}, []string{"1|x", "1|x", "2|y"}},
		{"truncate", "before", `TRUNCATE kl`, []string{"1|a", "2|b"}, []string{"2|y"}},
		{"truncate", "after", `TRUNCATE kl`, []string{"1|a", "2|b"}, []string{"2|y"}},
	} {
		t.Run(tc.op+"-"+tc.side, func(t *testing.T) {
			src := testenv.CreateDB(t, "myddl")
			testenv.Exec(t, src, `CREATE TABLE k (id int PRIMARY KEY, v text); CREATE TABLE kl (a int, b text); ALTER TABLE kl REPLICA IDENTITY FULL;`)
			chainURL := fileChain(t)
			mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
			fullID := lastIncremental(t, chainURL, nil)
			marker := filepath.Join(t.TempDir(), "held")
			worker := ownWorker(t, "myddl-"+tc.op+"-"+tc.side, "SLUICE_TEST_MYSQL_HOLD_IMPLICIT="+tc.side+":"+marker)
			q := worker.args
			db := testenv.CreateMySQLDB(t, "myddl")
			stream := fmt.Sprintf("myddl-%s-%s-%d", tc.op, tc.side, time.Now().UnixNano()%1e6)
			run := func(flags ...string) {
				mustSluice(t, q(append([]string{"sync", "from-backup", "run", "--backup-target", chainURL, "--target-driver", "mysql",
					"--target", testenv.MySQLDSN(db), "--stream-id", stream, "--poll-interval", "300ms", "--detach"}, flags...)...)...)
			}
			run("--reset-target-data", "--yes")
			waitBrokerAt(t, stream, fullID, 2*time.Minute)

			testenv.Exec(t, src, `INSERT INTO kl VALUES (1, 'x'), (1, 'x'); INSERT INTO k VALUES (1, 'a');`)
			testenv.Exec(t, src, tc.change)
			if tc.op == "schema" {
				testenv.Exec(t, src, `INSERT INTO k VALUES (2, 'b', 'c2'); INSERT INTO kl VALUES (2, 'y');`)
			} else {
				testenv.Exec(t, src, `INSERT INTO k VALUES (2, 'b'); INSERT INTO kl VALUES (2, 'y');`)
			}
			mustSluice(t, "backup", "incremental", "--source", testenv.DSN(src), "--target", chainURL)
			incID := lastIncremental(t, chainURL, nil)

			deadline := time.Now().Add(2 * time.Minute)
			for {
				if _, err := os.Stat(marker); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the broker never reached the %s side of the %s", tc.side, tc.op)
				}
				time.Sleep(100 * time.Millisecond)
			}
			worker.kill()
			cl := temporalClient(t)
			defer cl.Close()
			_ = cl.TerminateWorkflow(context.Background(), "broker/"+stream, "", "SIGKILL test")
			worker.restart()
			run()
			waitBrokerAt(t, stream, incID, 2*time.Minute)

			my := testenv.MySQL(t, db)
			cols := "id, v"
			if tc.op == "schema" {
				cols = "id, v, c"
			}
			for _, check := range []struct {
				query string
				want  []string
			}{
				{"SELECT " + cols + " FROM k ORDER BY id", tc.wantK},
				{"SELECT a, b FROM kl ORDER BY a, b", tc.wantKL},
			} {
				got := mysqlRows(t, my, check.query)
				if strings.Join(got, "\n") != strings.Join(check.want, "\n") {
					t.Errorf("%s:\n got %q\nwant %q", check.query, got, check.want)
				}
			}
			mustSluice(t, q("sync", "from-backup", "stop", "--backup-target", chainURL, "--stream-id", stream)...)
			waitWorkflowEnd(t, "broker/"+stream, time.Minute)
		})
	}
}

// mysqlRows runs a query on MariaDB (testenv.SQLRows).
func mysqlRows(t *testing.T, db *sql.DB, query string) []string {
	t.Helper()
	return testenv.SQLRows(t, db, query)
}

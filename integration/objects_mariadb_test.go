package integration

import (
	"context"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// mariaAppSchema is an application's schema on MariaDB: a view on a view
// (named so that the dependent one sorts first), a function the outer
// view calls, a procedure, a trigger writing an audit table, an event,
// and table comments.
const mariaAppSchema = `
CREATE TABLE accounts (id int PRIMARY KEY AUTO_INCREMENT, owner varchar(40) NOT NULL, balance int NOT NULL DEFAULT 0) COMMENT 'who holds what';
CREATE TABLE audit (account int NOT NULL, op varchar(10) NOT NULL, PRIMARY KEY (account, op)) COMMENT 'every insert, as the trigger saw it';
CREATE TABLE beat (id int PRIMARY KEY AUTO_INCREMENT, at datetime(6) NOT NULL);
CREATE FUNCTION doubled(x int) RETURNS int DETERMINISTIC RETURN x * 2;
CREATE PROCEDURE open_account(IN who varchar(40), IN amount int)
BEGIN
  INSERT INTO accounts (owner, balance) VALUES (who, amount);
  SELECT LAST_INSERT_ID() AS id;
END;
CREATE VIEW z_rich AS SELECT id, owner, balance FROM accounts WHERE balance > 100;
CREATE VIEW a_richest AS SELECT owner, doubled(balance) AS twice FROM z_rich ORDER BY balance DESC LIMIT 3;
CREATE TRIGGER accounts_audit AFTER INSERT ON accounts FOR EACH ROW INSERT INTO audit (op, account) VALUES ('insert', NEW.id);
CREATE EVENT sweep_audit ON SCHEDULE EVERY 1 DAY STARTS '2030-01-01 00:00:00' DO DELETE FROM audit WHERE account < 0;
CALL open_account('first', 500);
INSERT INTO accounts (owner, balance) VALUES ('second', 50), ('third', 150);
`

// TestMariaDBSchemaObjectsTravel: a MariaDB source with mariaAppSchema, a
// stream and a broker started cold into another MariaDB database with
// --trust-store-objects. A restore creates the views, routines, trigger,
// event and comments and prints a count per kind; mariadb-dump --no-data
// --routines --triggers --events of source and target are then equal once
// definers, AUTO_INCREMENT counters, the target's event status (DISABLE ON
// SLAVE), its triggers' guard and sluice's own control tables are left
// out, and the restored tables' columns are compared apart (the target
// builds them from the recorded kinds). While the stream runs, the source
// adds a view and alters the function: the broker's target then dumps
// the same, and its audit table holds the source's rows exactly once (the
// trigger stayed quiet for the broker's rows) while an application's
// insert on it fires the trigger. PostgreSQL and SQLite targets run none
// of the objects and say so; a definer the target lacks refuses the
// restore with SLUICE-E-TARGET-DEFINER-MISSING (exit 3), and
// --object-definer CURRENT_USER creates them as sluice's account instead.
func TestMariaDBSchemaObjectsTravel(t *testing.T) {
	srcDB := testenv.CreateMySQLDB(t, "objsrc")
	srcDSN := testenv.MySQLDSN(srcDB)
	mariaExec(t, srcDSN, mariaAppSchema)
	chainURL := fileChain(t)
	src := []string{"--source-driver", "mariadb", "--source", srcDSN}
	mustSluice(t, append(append([]string{"backup", "full"}, src...), "--target", chainURL)...)
	mustSluice(t, append(append([]string{"backup", "stream", "run"}, src...), "--target", chainURL,
		"--rollover-window", "1s", "--idle-window", "1s", "--detach")...)
	dstDB := testenv.CreateMySQLDB(t, "objdst")
	stream := fmt.Sprintf("mariaobj-%d", time.Now().UnixNano()%1e6)
	mustSluice(t, "sync", "from-backup", "run", "--backup-target", chainURL, "--target-driver", "mysql",
		"--target", testenv.MySQLDSN(dstDB), "--stream-id", stream, "--poll-interval", "300ms",
		"--reset-target-data", "--yes", "--detach", "--trust-store-objects")

	restored := testenv.CreateMySQLDB(t, "objrst")
	r := mustSluice(t, "restore", "--backup-target", chainURL, "--target-driver", "mysql", "--target", testenv.MySQLDSN(restored),
		"--trust-store-objects")
	t.Logf("restore:\n%s", r.stdout)
	if !strings.Contains(r.stdout, "schema objects created: comment 2, event 1, function 1, procedure 1, trigger 1, view 2") {
		t.Errorf("the restore's output lacks the objects it created:\n%s", r.stdout)
	}
	sameMariaObjects(t, srcDB, restored)

	// While the stream runs: a new view, the function altered, rows that
	// fire the source's trigger.
	mariaExec(t, srcDSN, `CREATE VIEW poor AS SELECT owner FROM accounts WHERE balance <= 100;
		CREATE OR REPLACE FUNCTION doubled(x int) RETURNS int DETERMINISTIC RETURN x + x;
		CALL open_account('late', 700);
		INSERT INTO accounts (owner, balance) VALUES ('later', 5), ('latest', 900);`)
	waitMariaCaughtUp(t, srcDSN, chainURL, 2*time.Minute)
	mustSluice(t, "backup", "stream", "stop", "--target", chainURL)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	waitBrokerAt(t, stream, lastIncremental(t, chainURL, nil), 2*time.Minute)
	sameMariaObjects(t, srcDB, dstDB)
	srcPool, dstPool := testenv.MySQL(t, srcDB), testenv.MySQL(t, dstDB)
	for _, q := range []string{"SELECT COUNT(*) FROM audit", "SELECT COUNT(*) FROM poor", "SELECT GROUP_CONCAT(twice ORDER BY twice) FROM a_richest"} {
		var s, d string
		if err := srcPool.QueryRow(q).Scan(&s); err != nil {
			t.Fatal(err)
		}
		if err := dstPool.QueryRow(q).Scan(&d); err != nil {
			t.Fatalf("%s on the broker's target: %v", q, err)
		}
		if s != d {
			t.Errorf("%s: the source has %s, the broker's target %s", q, s, d)
		}
	}
	// The AUTO_INCREMENT key came along, to the restore and the broker.
	for _, db := range []string{restored, dstDB} {
		var extra string
		if err := testenv.MySQL(t, "").QueryRow("SELECT EXTRA FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'accounts' AND COLUMN_NAME = 'id'", db).Scan(&extra); err != nil || extra != "auto_increment" {
			t.Errorf("accounts.id in %s has EXTRA %q (%v), want auto_increment", db, extra, err)
		}
	}
	// A cutover moves the counter past the source's, and an
	// application's session on the target then takes the next key and
	// fires the trigger.
	r = mustSluice(t, "sync", "from-backup", "cutover", "--backup-target", chainURL, "--target-driver", "mysql", "--target", testenv.MySQLDSN(dstDB),
		"--stream-id", stream, "--sequence-margin", "100", "--wait", "2m")
	t.Logf("cutover:\n%s", r.stdout)
	if !strings.Contains(r.stdout, "set      "+srcDB+".accounts: ") || !strings.Contains(r.stdout, "→ 106") {
		t.Errorf("the cutover's output lacks the accounts counter set to 106:\n%s", r.stdout)
	}
	waitWorkflowEnd(t, "broker/"+stream, time.Minute)
	var before, after int
	if err := dstPool.QueryRow("SELECT COUNT(*) FROM audit").Scan(&before); err != nil {
		t.Fatal(err)
	}
	res, err := dstPool.Exec("INSERT INTO accounts (owner, balance) VALUES ('on the target', 1)")
	if err != nil {
		t.Fatalf("an application's insert without a key on the target: %v", err)
	}
	if id, err := res.LastInsertId(); err != nil || id != 107 {
		t.Errorf("an application's insert on the target after the cutover took key %d (%v); want 107, past the source's 6 and the margin of 100", id, err)
	}
	if err := dstPool.QueryRow("SELECT COUNT(*) FROM audit").Scan(&after); err != nil || after != before+1 {
		t.Errorf("an application's insert on the target left %d audit rows (had %d, %v): the trigger did not fire", after, before, err)
	}

	// Other engines run none of them, and say why.
	pg := testenv.CreateDB(t, "objmypg")
	r = mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(pg), "--trust-store-objects")
	if !strings.Contains(r.stdout, "schema objects not run: ") || !strings.Contains(r.stdout, "postgres target") {
		t.Errorf("a PostgreSQL target's restore:\n%s\nwant it to say the MariaDB objects were not run", r.stdout)
	}
	lite := filepath.Join(t.TempDir(), "objects.db")
	r = mustSluice(t, "restore", "--backup-target", chainURL, "--target-driver", "sqlite", "--target", lite, "--trust-store-objects")
	if !strings.Contains(r.stdout, "schema objects not run: ") {
		t.Errorf("an SQLite target's restore:\n%s\nwant it to say the MariaDB objects were not run", r.stdout)
	}

	// A definer the target has no account for refuses the restore.
	mariaExec(t, srcDSN, "CREATE DEFINER = `sluice_it_ghost`@`%` VIEW haunted AS SELECT 1 AS one")
	ghostChain := fileChain(t)
	mustSluice(t, append(append([]string{"backup", "full"}, src...), "--target", ghostChain)...)
	refused := testenv.CreateMySQLDB(t, "objghost")
	r = sluice(t, "restore", "--backup-target", ghostChain, "--target-driver", "mysql", "--target", testenv.MySQLDSN(refused), "--trust-store-objects")
	if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-TARGET-DEFINER-MISSING") || !strings.Contains(r.stderr, "sluice_it_ghost@%") {
		t.Errorf("a restore of a view whose definer the target lacks: %s\nwant exit 3 with SLUICE-E-TARGET-DEFINER-MISSING naming sluice_it_ghost@%%", r)
	}
	// --object-definer creates them all as an account the target has.
	mapped := testenv.CreateMySQLDB(t, "objmapped")
	r = mustSluice(t, "restore", "--backup-target", ghostChain, "--target-driver", "mysql", "--target", testenv.MySQLDSN(mapped),
		"--trust-store-objects", "--object-definer", "CURRENT_USER")
	var definer string
	if err := testenv.MySQL(t, "").QueryRow("SELECT DEFINER FROM information_schema.VIEWS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'haunted'", mapped).Scan(&definer); err != nil {
		t.Fatalf("the view of the missing definer after --object-definer CURRENT_USER: %v\n%s", err, r.stdout)
	}
	if strings.Contains(definer, "ghost") {
		t.Errorf("--object-definer CURRENT_USER left the view's definer %s", definer)
	}
}

// sameMariaObjects fails the test unless the dumps of the two databases'
// objects (mariaObjectsDump) are equal, and their tables hold the same
// comments.
func sameMariaObjects(t *testing.T, a, b string) {
	t.Helper()
	da, db := mariaObjectsDump(t, a), mariaObjectsDump(t, b)
	if da != db {
		t.Errorf("mariadb-dump of %s and %s differ (- only in the first, + only in the second):\n%s", a, b, lineDiff(da, db))
	}
	comments := func(name string) string {
		var s string
		q := "SELECT GROUP_CONCAT(TABLE_NAME, ': ', TABLE_COMMENT ORDER BY TABLE_NAME SEPARATOR '; ') FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE' AND TABLE_NAME NOT LIKE 'sluice\\_%'"
		if err := testenv.MySQL(t, "").QueryRow(q, name).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if ca, cb := comments(a), comments(b); ca != cb {
		t.Errorf("table comments differ: %s has %q, %s %q", a, ca, b, cb)
	}
}

var (
	dumpDefiner   = regexp.MustCompile("DEFINER=`[^`]*`@`[^`]*`")
	dumpCounter   = regexp.MustCompile(` AUTO_INCREMENT=[0-9]+`)
	dumpEvent     = regexp.MustCompile(`ON COMPLETION (NOT )?PRESERVE (ENABLE|DISABLE ON SLAVE|DISABLE)`)
	dumpGuard     = regexp.MustCompile(`(?m)FOR EACH ROW IF @sluice_apply IS NULL THEN (.*); END IF $`)
	dumpTable     = regexp.MustCompile("(?s)CREATE TABLE `[^`]*` \\(.*?\\) ENGINE=[^;]*;\n")
	dumpTableDrop = regexp.MustCompile("(?m)^(DROP TABLE IF EXISTS `sluice_[^`]*`;|CREATE TABLE `sluice_[^`]*`.*)\n")
)

// mariaObjectsDump is mariadb-dump --no-data --routines --triggers
// --events of database db, with what is expected to differ between a
// source and sluice's target left out: definers, AUTO_INCREMENT counters,
// an event's status (a target's events are disabled), a trigger's guard
// (IF @sluice_apply IS NULL THEN …; END IF) and the bodies of CREATE
// TABLE (compared by their columns' kinds elsewhere; the target builds its
// tables from them), and sluice's own control tables.
func mariaObjectsDump(t *testing.T, db string) string {
	t.Helper()
	u, err := url.Parse(testenv.MySQLAdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--no-data", "--routines", "--triggers", "--events", "--skip-comments", "--skip-dump-date",
		"-h", u.Hostname(), "-P", u.Port(), "-u", u.User.Username()}
	if pw, ok := u.User.Password(); ok {
		args = append(args, "-p"+pw)
	}
	for _, name := range controlTables(t, db) {
		args = append(args, "--ignore-table="+db+"."+name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "mariadb-dump", append(args, db)...).CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-dump %s: %v\n%s", db, err, out)
	}
	s := string(out)
	s = dumpDefiner.ReplaceAllString(s, "DEFINER=?")
	s = dumpCounter.ReplaceAllString(s, "")
	s = dumpEvent.ReplaceAllString(s, "ON COMPLETION ${1}PRESERVE ?")
	s = dumpGuard.ReplaceAllString(s, "FOR EACH ROW $1 ")
	s = dumpTable.ReplaceAllStringFunc(s, func(tb string) string { return tb[:strings.Index(tb, "(")] + "(…);\n" })
	return dumpTableDrop.ReplaceAllString(s, "")
}

// controlTables lists sluice's own tables in db.
func controlTables(t *testing.T, db string) []string {
	t.Helper()
	rows, err := testenv.MySQL(t, "").Query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME LIKE 'sluice\\_%'", db)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

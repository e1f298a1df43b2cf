package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/target/targettest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// generalLog turns MariaDB's general log on, into mysql.general_log, for
// the test, and puts both settings back when it ends. The setting is the
// server's, but it only adds rows to that table: the tests below read the
// rows of a user of their own, so concurrent tests are neither disturbed
// nor read.
func generalLog(t *testing.T) *sql.DB {
	t.Helper()
	admin := testenv.MySQL(t, "")
	var on, output string
	if err := admin.QueryRow(`SELECT @@GLOBAL.general_log, @@GLOBAL.log_output`).Scan(&on, &output); err != nil {
		t.Fatal(err)
	}
	next := output
	if !strings.Contains(strings.ToUpper(output), "TABLE") {
		next = strings.TrimPrefix(strings.ReplaceAll(output+",TABLE", "NONE,", ""), ",")
	}
	for _, q := range []string{`SET GLOBAL log_output = '` + next + `'`, `SET GLOBAL general_log = ON`} {
		if _, err := admin.Exec(q); err != nil {
			t.Skipf("cannot turn the general log on: %v", err)
		}
	}
	t.Cleanup(func() {
		restore := testenv.MySQL(t, "")
		if _, err := restore.Exec(`SET GLOBAL general_log = ` + on); err != nil {
			t.Errorf("put general_log back to %s: %v", on, err)
		}
		if _, err := restore.Exec(`SET GLOBAL log_output = '` + output + `'`); err != nil {
			t.Errorf("put log_output back to %s: %v", output, err)
		}
	})
	return admin
}

var loggedUsers atomic.Int64

// loggedTarget is a target on a new database, connected as a new user
// holding privileges on that database alone (those docs/security.md
// lists), whose statements the general log records by user.
type loggedTarget struct {
	*Target
	admin *sql.DB
	user  string
}

func newLoggedTarget(t *testing.T, admin *sql.DB) *loggedTarget {
	t.Helper()
	db := testenv.CreateMySQLDB(t, "slog")
	// Unique across runs too: the log keeps rows of users long dropped.
	user := fmt.Sprintf("slog_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9, loggedUsers.Add(1))
	for _, q := range []string{
		"CREATE USER '" + user + "'@'%'",
		"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX, REFERENCES ON `" + db + "`.* TO '" + user + "'@'%'",
	} {
		if _, err := admin.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() { _, _ = admin.Exec("DROP USER IF EXISTS '" + user + "'@'%'") })
	u, err := url.Parse(testenv.MySQLDSN(db))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(user)
	tg, err := Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tg.Close(context.Background()) })
	return &loggedTarget{Target: tg, admin: admin, user: user}
}

// Statements returns what the general log holds of the target's user:
// every statement run (Query), prepared (Prepare) or executed (Execute),
// in order.
func (l *loggedTarget) Statements(t *testing.T) []string {
	t.Helper()
	rows, err := l.admin.Query(`SELECT command_type, CONVERT(argument USING utf8mb4) FROM mysql.general_log
		WHERE user_host LIKE ? AND command_type IN ('Query', 'Prepare', 'Execute')
		ORDER BY event_time`, l.user+"[%")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var kind, arg string
		if err := rows.Scan(&kind, &arg); err != nil {
			t.Fatal(err)
		}
		out = append(out, arg)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Every forged schema is refused by every reader, and the general log
// shows only statements the same readers send for the clean schema:
// nothing of the forgery ran.
func TestForgedSchemaStatementLog(t *testing.T) {
	admin := generalLog(t)
	base := newLoggedTarget(t, admin)
	targettest.CleanReaders(t, base.Target)
	expected := base.Statements(t)
	if !slices.ContainsFunc(expected, func(s string) bool { return strings.HasPrefix(s, "CREATE TABLE") }) {
		t.Fatalf("the general log of the clean run holds no CREATE TABLE: %q", expected)
	}
	for _, f := range targettest.Forgeries() {
		t.Run(f.Name, func(t *testing.T) {
			l := newLoggedTarget(t, admin)
			targettest.ForgedReaders(t, l.Target, f)
			got := l.Statements(t)
			if len(got) == 0 {
				t.Fatal("nothing logged for the forged run")
			}
			targettest.RequireExpected(t, expected, got)
		})
	}
}

// Names holding quotes, semicolons and comment openers are kept as the
// names: the table is restored and replayed under exactly them, the rows
// are the chain's, and every statement carrying them holds them only
// inside quotes.
func TestHostileNamesStatementLog(t *testing.T) {
	admin := generalLog(t)
	l := newLoggedTarget(t, admin)
	tb, want := targettest.HostileNames(t, l.Target)
	targettest.RequireInertNames(t, l.Statements(t), true)
	bt := func(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
	testenv.WantSQLRows(t, l.DB(), `SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name NOT LIKE 'sluice%'`, tb.Name)
	var flat []string
	for _, r := range want {
		flat = append(flat, strings.Join(r, "|"))
	}
	testenv.WantSQLRows(t, l.DB(), "SELECT CONCAT_WS('|', "+bt(targettest.HostileKey)+", "+bt(targettest.HostileColumn1)+", "+bt(targettest.HostileColumn2)+") FROM "+bt(tb.Name)+" ORDER BY 1", flat...)
}

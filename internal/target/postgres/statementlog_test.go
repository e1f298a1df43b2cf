package postgres

import (
	"bufio"
	"context"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/ddlcheck"
	"github.com/sluicehq/sluice/internal/target/targettest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// serverLog is the test server's log file (deploy/dev/services.sh's
// cluster); SLUICE_TEST_PG_LOG overrides it.
func serverLog() string {
	if p := os.Getenv("SLUICE_TEST_PG_LOG"); p != "" {
		return p
	}
	return "/var/log/postgresql/postgresql-15-main.log"
}

// loggedDB is a scratch database whose every statement the server logs
// (log_statement = 'all', set on the database so the target's new sessions
// pick it up), with the log's size when it was made.
type loggedDB struct {
	name  string
	path  string
	start int64
}

// newLoggedDB creates such a database, skipping when the server log
// cannot be read or its line prefix does not name the database.
func newLoggedDB(t *testing.T, prefix string) *loggedDB {
	t.Helper()
	path := serverLog()
	f, err := os.Open(path)
	if err != nil {
		t.Skipf("the PostgreSQL server log is not readable here: %v", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	admin := testenv.Admin(t)
	defer admin.Close(context.Background())
	var linePrefix string
	if err := admin.QueryRow(context.Background(), "SHOW log_line_prefix").Scan(&linePrefix); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(linePrefix, "%u@%d ") {
		t.Skipf("log_line_prefix %q does not carry user@database", linePrefix)
	}
	db := testenv.CreateDB(t, prefix)
	if _, err := admin.Exec(context.Background(), "ALTER DATABASE "+pgx.Identifier{db}.Sanitize()+" SET log_statement = 'all'"); err != nil {
		t.Fatal(err)
	}
	return &loggedDB{name: db, path: path, start: st.Size()}
}

// logLine is the start of an entry: the time and process, then for a
// session's entry user@database (%q drops it for other processes).
var (
	logStart = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? \S+ \[\d+\] `)
	logLine  = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? \S+ \[\d+\] (\S*)@(\S*) (\w+):  (.*)$`)
)

// statementMessage is the message log_statement writes: "statement: …"
// (simple protocol) or "execute <name>: …" (extended protocol).
var statementMessage = regexp.MustCompile(`^(?:statement|execute [^:]*): ((?s).*)$`)

// Statements returns every statement the server logged for the database
// since it was made, in order. The server writes a line as it runs the
// statement, so a short wait lets the last ones reach the file.
func (l *loggedDB) Statements(t *testing.T) []string {
	t.Helper()
	time.Sleep(200 * time.Millisecond)
	f, err := os.Open(l.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(l.start, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	type entry struct{ db, level, msg string }
	var entries []entry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Text()
		if logStart.MatchString(line) {
			e := entry{}
			if m := logLine.FindStringSubmatch(line); m != nil {
				e = entry{db: m[3], level: m[4], msg: m[5]}
			}
			entries = append(entries, e)
			continue
		}
		// A statement of several lines continues on lines of its own
		// (the server starts each with a tab).
		if n := len(entries); n > 0 {
			entries[n-1].msg += "\n" + strings.TrimPrefix(line, "\t")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.db != l.name || e.level != "LOG" {
			continue
		}
		if m := statementMessage.FindStringSubmatch(e.msg); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

// openLogged opens a target on the logged database.
func openLogged(t *testing.T, l *loggedDB) *Target {
	t.Helper()
	tgt, err := Open(context.Background(), testenv.DSN(l.name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tgt.Close(context.Background()) })
	return tgt
}

// requireOneStatementEach fails unless every logged statement parses as
// exactly one statement: the simple protocol logs a string of several
// statements as one entry.
func requireOneStatementEach(t *testing.T, stmts []string) {
	t.Helper()
	for _, s := range stmts {
		if err := ddlcheck.PGOneStatement(s); err != nil {
			t.Errorf("the server ran more than one statement in a call: %v: %q", err, s)
		}
	}
}

// Every forged schema is refused by every reader, and the server's
// statement log shows only statements the same readers send for the clean
// schema, each alone: nothing of the forgery ran.
func TestForgedSchemaStatementLog(t *testing.T) {
	base := newLoggedDB(t, "slog_clean")
	targettest.CleanReaders(t, openLogged(t, base))
	expected := base.Statements(t)
	if !slices.ContainsFunc(expected, func(s string) bool { return strings.HasPrefix(s, "CREATE TABLE") }) {
		t.Fatalf("the log of the clean run holds no CREATE TABLE; is log_statement honoured? %q", expected)
	}
	requireOneStatementEach(t, expected)
	for _, f := range targettest.Forgeries() {
		t.Run(f.Name, func(t *testing.T) {
			l := newLoggedDB(t, "slog_forged")
			targettest.ForgedReaders(t, openLogged(t, l), f)
			got := l.Statements(t)
			if len(got) == 0 {
				t.Fatal("nothing logged for the forged run")
			}
			targettest.RequireExpected(t, expected, got)
			requireOneStatementEach(t, got)
		})
	}
}

// Names holding quotes, semicolons and comment openers are kept as the
// names: the table is restored and replayed under exactly them, the rows
// are the chain's, and every logged statement is one statement.
func TestHostileNamesStatementLog(t *testing.T) {
	l := newLoggedDB(t, "slog_names")
	tgt := openLogged(t, l)
	tb, want := targettest.HostileNames(t, tgt)
	stmts := l.Statements(t)
	requireOneStatementEach(t, stmts)
	targettest.RequireInertNames(t, stmts, false)
	ctx := context.Background()
	rows, err := tgt.Conn().Query(ctx, "SELECT "+ident(targettest.HostileKey)+"::text, "+ident(targettest.HostileColumn1)+", "+ident(targettest.HostileColumn2)+" FROM "+ident(tb.Schema, tb.Name)+" ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	var got [][]string
	for rows.Next() {
		var a, b, c string
		if err := rows.Scan(&a, &b, &c); err != nil {
			t.Fatal(err)
		}
		got = append(got, []string{a, b, c})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(got, want, slices.Equal[[]string]) {
		t.Errorf("rows %q, want %q", got, want)
	}
	var tables []string
	trows, err := tgt.Conn().Query(ctx, `SELECT relname FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for trows.Next() {
		var n string
		if err := trows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	if !slices.Contains(tables, targettest.HostileTableName) {
		t.Errorf("public holds %q, not %q", tables, targettest.HostileTableName)
	}
}

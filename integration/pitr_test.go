package integration

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// pgStep is one step of the point-in-time workload: after it committed, the
// source's clock and what its tables then held.
type pgStep struct {
	after   string // RFC 3339 time on the source's clock, after the commit
	markers string // the marker table's steps, in order
	accts   string // the other table, rendered
}

// pgSnapshot renders the source's two tables.
func pgSnapshot(t *testing.T, db string) (markers, accts string) {
	t.Helper()
	if err := queryString(db, `SELECT coalesce(string_agg(step::text, ',' ORDER BY step), '') FROM marker`, &markers); err != nil {
		t.Fatal(err)
	}
	if err := queryString(db, `SELECT coalesce(string_agg(id || ':' || bal, ',' ORDER BY id), '') FROM acct`, &accts); err != nil {
		t.Fatal(err)
	}
	return markers, accts
}

func pgClock(t *testing.T, db string) string {
	t.Helper()
	var s string
	if err := queryString(db, `SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// A PostgreSQL source writes a marker row per step (and moves money between
// accounts in the same transaction); restores to points between steps,
// inside a long transaction's span, exactly at a commit and at a commit LSN
// hold exactly what had committed by then, across two incrementals and a
// rotation; points outside the chain and malformed ones are refused before
// the target is touched.
func TestRestoreUntilPostgres(t *testing.T) {
	src := testenv.CreateDB(t, "pitrsrc")
	testenv.Exec(t, src, `
CREATE TABLE marker (step int PRIMARY KEY, note text);
CREATE TABLE acct (id int PRIMARY KEY, bal int NOT NULL);
INSERT INTO acct SELECT i, 100 FROM generate_series(1, 5) i;`)
	chainURL := fileChain(t)
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
	beforeAny := pgClock(t, src)
	m0, a0 := pgSnapshot(t, src)

	var steps []pgStep
	step := func(i int) {
		testenv.Exec(t, src, fmt.Sprintf(`BEGIN;
INSERT INTO marker VALUES (%d, 'step');
UPDATE acct SET bal = bal - %d WHERE id = %d;
UPDATE acct SET bal = bal + %d WHERE id = %d;
COMMIT;`, i, i, i%5+1, i, (i+1)%5+1))
		m, a := pgSnapshot(t, src)
		steps = append(steps, pgStep{after: pgClock(t, src), markers: m, accts: a})
		time.Sleep(20 * time.Millisecond)
	}
	for i := 1; i <= 3; i++ {
		step(i)
	}
	mustSluice(t, "backup", "incremental", "--source", testenv.DSN(src), "--target", chainURL)

	// One transaction spans a point: it began before it and commits after.
	conn, err := pgxConnect(src)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO marker VALUES (4, 'long')`); err != nil {
		t.Fatal(err)
	}
	insideLong := pgClock(t, src)
	time.Sleep(50 * time.Millisecond)
	if _, err := tx.Exec(ctx, `UPDATE acct SET bal = bal + 1000 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	m, a := pgSnapshot(t, src)
	steps = append(steps, pgStep{after: pgClock(t, src), markers: m, accts: a})
	for i := 5; i <= 6; i++ {
		step(i)
	}
	mustSluice(t, "backup", "incremental", "--source", testenv.DSN(src), "--target", chainURL)

	// The commit times and LSNs the chain recorded, as inspect prints them.
	commits := inspectCommits(t, chainURL)
	if len(commits) != 6 {
		t.Fatalf("the chain holds %d transactions, want 6: %v", len(commits), commits)
	}

	restore := func(what string, flag, value string) result {
		t.Helper()
		dst := testenv.CreateDB(t, "pitrdst")
		r := mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(dst), flag, value)
		t.Logf("%s: %s", what, strings.TrimSpace(r.stdout))
		gotM, gotA := pgSnapshot(t, dst)
		return result{stdout: r.stdout, stderr: gotM + "\n" + gotA}
	}
	check := func(what, flag, value, markers, accts string) result {
		t.Helper()
		r := restore(what, flag, value)
		if want := markers + "\n" + accts; r.stderr != want {
			t.Errorf("%s (%s %s): the target holds\n%s\nwant\n%s", what, flag, value, r.stderr, want)
		}
		return r
	}

	check("before the first transaction", "--until", beforeAny, m0, a0)
	for i, s := range steps {
		if i == 3 || i == len(steps)-1 {
			// The long transaction's own point is checked below; a point
			// after the newest transaction is outside the chain (refused
			// below) until the producer commits a later one.
			continue
		}
		check(fmt.Sprintf("after step %d", i+1), "--until", s.after, s.markers, s.accts)
	}
	// Inside the long transaction's span: it committed after the point.
	check("inside a transaction's span", "--until", insideLong, steps[2].markers, steps[2].accts)
	// Exactly at a commit: inclusive.
	r := check("exactly at the long transaction's commit", "--until", commits[3].time, steps[3].markers, steps[3].accts)
	if !strings.Contains(r.stdout, "last transaction applied: committed "+commits[3].time) ||
		!strings.Contains(r.stdout, "first transaction left out: committed "+commits[4].time) {
		t.Errorf("the restore does not name the transactions on either side of the point:\n%s", r.stdout)
	}
	check("at a commit LSN", "--until-position", commits[4].position, steps[4].markers, steps[4].accts)
	check("at the newest transaction", "--until", commits[5].time, steps[5].markers, steps[5].accts)

	// Refusals, each before the target is touched.
	refused := func(what string, exit int, code string, args ...string) {
		t.Helper()
		dst := testenv.CreateDB(t, "pitrno")
		r := sluice(t, append([]string{"restore", "--backup-target", chainURL, "--target", testenv.DSN(dst)}, args...)...)
		if r.exit != exit || !strings.Contains(r.stderr, code) || !strings.Contains(r.stderr, "hint:") {
			t.Errorf("%s: want exit %d with %s, got %s", what, exit, code, r)
		}
		if publicTableExists(t, dst, "marker") {
			t.Errorf("%s: the refused restore created tables in the target", what)
		}
	}
	refused("a time before the full", 3, "SLUICE-E-POINT-OUTSIDE-CHAIN", "--until", "2001-01-01T00:00:00Z")
	refused("a time after the newest transaction", 3, "SLUICE-E-POINT-OUTSIDE-CHAIN", "--until", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	refused("a time just after the newest transaction", 3, "SLUICE-E-POINT-OUTSIDE-CHAIN", "--until", steps[len(steps)-1].after)
	refused("an LSN after the tip", 3, "SLUICE-E-POINT-OUTSIDE-CHAIN", "--until-position", "FFFF/0")
	refused("a time without an offset", 2, "SLUICE-E-POINT-INVALID", "--until", "2026-12-05 14:03:00")
	refused("a malformed LSN", 2, "SLUICE-E-POINT-INVALID", "--until-position", "16B3748")
	refused("a GTID for a PostgreSQL chain", 2, "SLUICE-E-POINT-INVALID", "--until-position", "0-1-42")
	refused("--until with --through", 2, "SLUICE-E-USAGE", "--until", beforeAny, "--through", "x")
}

// chainCommit is one transaction as backup inspect names it.
type chainCommit struct{ time, position string }

func (c chainCommit) String() string { return c.time + "@" + c.position }

// inspectCommits returns every transaction of the chain's incrementals in
// order, read with backup list and backup inspect --json.
func inspectCommits(t *testing.T, chainURL string) []chainCommit {
	t.Helper()
	var listing struct {
		Segments []struct {
			Links []struct {
				ID   string `json:"id"`
				Kind string `json:"kind"`
			} `json:"links"`
		} `json:"segments"`
	}
	r := mustSluice(t, "backup", "list", "--target", chainURL, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &listing); err != nil {
		t.Fatalf("backup list --json: %v\n%s", err, r.stdout)
	}
	var out []chainCommit
	for _, s := range listing.Segments {
		for _, l := range s.Links {
			if l.Kind != "incremental" {
				continue
			}
			r := mustSluice(t, "backup", "inspect", "--target", chainURL, "--link", l.ID, "--json")
			for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				if line == "" {
					continue
				}
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("backup inspect --json line %q: %v", line, err)
				}
				if rec["op"] != "commit" {
					continue
				}
				at, _ := rec["commit_time"].(string)
				pos, _ := rec["commit_lsn"].(string)
				if g, ok := rec["gtid"].(string); ok {
					pos = g
				}
				out = append(out, chainCommit{time: at, position: pos})
			}
		}
	}
	return out
}

// A MariaDB source's chain restores into SQLite up to a GTID: exactly the
// markers committed at or before it.
func TestRestoreUntilMariaDBGTIDIntoSQLite(t *testing.T) {
	srcDSN := testenv.MySQLDSN(testenv.CreateMySQLDB(t, "mypitr"))
	mariaExec(t, srcDSN, `
CREATE TABLE marker (step int PRIMARY KEY, note varchar(20));
CREATE TABLE acct (id int PRIMARY KEY, bal int NOT NULL);
INSERT INTO acct VALUES (1, 100), (2, 100), (3, 100);`)
	src := []string{"--source-driver", "mariadb", "--source", srcDSN}
	chainURL := fileChain(t)
	mustSluice(t, append(append([]string{"backup", "full"}, src...), "--target", chainURL)...)

	db := testenv.MySQLAt(t, srcDSN)
	snapshot := func(q func(string) ([]string, error)) string {
		t.Helper()
		m, err := q(`SELECT step FROM marker ORDER BY step`)
		if err != nil {
			t.Fatal(err)
		}
		a, err := q(`SELECT id || ':' || bal FROM acct ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(m, ",") + "\n" + strings.Join(a, ",")
	}
	mariaQ := func(q string) ([]string, error) {
		rows, err := db.Query(strings.ReplaceAll(q, "id || ':' || bal", "concat(id, ':', bal)"))
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, rows.Err()
	}
	type gtidStep struct{ gtid, want string }
	var steps []gtidStep
	for i := 1; i <= 5; i++ {
		mariaExec(t, srcDSN, fmt.Sprintf(`START TRANSACTION;
INSERT INTO marker VALUES (%d, 'step');
UPDATE acct SET bal = bal - %d WHERE id = %d;
UPDATE acct SET bal = bal + %d WHERE id = %d;
COMMIT;`, i, i, i%3+1, i, (i+1)%3+1))
		var gtid string
		if err := db.QueryRow(`SELECT @@gtid_binlog_pos`).Scan(&gtid); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, gtidStep{gtid: gtid, want: snapshot(mariaQ)})
		if i == 2 {
			mustSluice(t, append(append([]string{"backup", "incremental"}, src...), "--target", chainURL)...)
		}
	}
	mustSluice(t, append(append([]string{"backup", "incremental"}, src...), "--target", chainURL)...)

	for i, s := range []int{0, 1, 2, 4} {
		st := steps[s]
		file := filepath.Join(t.TempDir(), fmt.Sprintf("pitr%d.db", i))
		r := mustSluice(t, "restore", "--backup-target", chainURL, "--target-driver", "sqlite", "--target", file, "--until-position", st.gtid)
		t.Logf("GTID %s: %s", st.gtid, strings.TrimSpace(r.stdout))
		got := snapshot(sqliteQuery(file))
		if got != st.want {
			t.Errorf("restore to GTID %s (after step %d): the target holds\n%s\nwant\n%s", st.gtid, s+1, got, st.want)
		}
	}
	// The chain's own record of the last step's GTID agrees with the server's.
	if commits := inspectCommits(t, chainURL); len(commits) != 5 || !strings.HasSuffix(steps[4].gtid, commits[4].position) {
		t.Errorf("the chain's transactions %v; the server's last GTID %s", commits, steps[4].gtid)
	}
	r := sluice(t, "restore", "--backup-target", chainURL, "--target-driver", "sqlite", "--target", filepath.Join(t.TempDir(), "no.db"), "--until-position", "0/16B3748")
	if r.exit != 2 || !strings.Contains(r.stderr, "SLUICE-E-POINT-INVALID") {
		t.Errorf("an LSN for a MariaDB chain: want exit 2 with SLUICE-E-POINT-INVALID, got %s", r)
	}
}

// sqliteQuery returns a reader of one text column from an SQLite file.
func sqliteQuery(file string) func(string) ([]string, error) {
	return func(q string) ([]string, error) {
		db, err := sql.Open("sqlite", file)
		if err != nil {
			return nil, err
		}
		defer db.Close()
		rows, err := db.Query(q)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, rows.Err()
	}
}

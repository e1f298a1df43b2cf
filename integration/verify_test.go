package integration

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/workflows"
)

// verifyRows inserts rows from to through of the verify fixture's table t.
const verifyRows = `INSERT INTO t SELECT i, 'v' || i, i / 7.0, i / 3.0, '2026-01-01 00:00:00+00'::timestamptz + i * interval '1 hour',
	'2026-01-01'::date + i, decode(md5(i::text), 'hex'), jsonb_build_object('i', i), ARRAY['a', 'b' || i]
	FROM generate_series(%d, %d) i`

var verifySchema = `
CREATE TABLE t (id int PRIMARY KEY, v text, n numeric(12,3), f float8, at timestamptz, d date, b bytea, j jsonb, tags text[]);
` + fmt.Sprintf(verifyRows, 1, 500) + `;
INSERT INTO t VALUES (0, NULL, NULL, -0.25, NULL, NULL, '', NULL, '{}');
CREATE TABLE k (a int, b text);
INSERT INTO k VALUES (1, 'dup'), (1, 'dup'), (2, 'once'), (NULL, NULL);
ALTER TABLE k REPLICA IDENTITY FULL;
`

// verifyOut runs sluice verify and decodes its JSON outcome.
func verifyOut(t *testing.T, want int, args ...string) (workflows.VerifyResult, result) {
	t.Helper()
	r := sluice(t, append([]string{"verify", "--json"}, args...)...)
	if r.exit != want {
		t.Fatalf("sluice verify %s: want exit %d, got %s", strings.Join(args, " "), want, r)
	}
	var res workflows.VerifyResult
	if want <= 1 {
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("decode the outcome: %v\n%s", err, r)
		}
	}
	return res, r
}

// differing lists "table:status" of the tables that differ.
func differing(res workflows.VerifyResult) string {
	var out []string
	for _, tb := range res.Tables {
		if tb.Status != "equal" {
			out = append(out, tb.Name+":"+tb.Status)
		}
	}
	return strings.Join(out, ",")
}

// TestVerifyNamesEachDifference restores a source into a PostgreSQL
// target, proves it equal at both depths, and then finds a changed row, a
// missing row and a duplicated row of a keyless table, each naming its
// table and how it differs.
func TestVerifyNamesEachDifference(t *testing.T) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, verifySchema)
	chainURL := fileChain(t)
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL)
	dst := testenv.CreateDB(t, "dst")
	mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(dst))
	pair := []string{"--source", testenv.DSN(src), "--target", testenv.DSN(dst)}

	// Equal, as a workflow and locally, at both depths.
	res, _ := verifyOut(t, 0, append(pair, "--depth", "checksum")...)
	if len(res.Tables) != 2 || differing(res) != "" || res.Tables[1].Name != "public.t" || res.Tables[1].SourceChecksum == "" || res.Tables[1].SourceRows != 501 {
		t.Fatalf("equal databases: %+v", res)
	}
	r := mustSluice(t, append([]string{"verify", "--local", "--depth", "count"}, pair...)...)
	if !strings.Contains(r.stdout, "equal    public.k: 4 rows") || !strings.Contains(r.stdout, "a source written meanwhile moves") {
		t.Fatalf("text output:\n%s", r)
	}

	cases := []struct {
		name, change, undo, want, detail string
		countSees                        bool
	}{
		{"a changed row", `UPDATE t SET v = 'changed' WHERE id = 42`, `UPDATE t SET v = 'v42' WHERE id = 42`,
			"public.t:checksum", "checksums differ", false},
		{"a changed timestamp", `UPDATE t SET at = at + interval '1 microsecond' WHERE id = 7`, `UPDATE t SET at = at - interval '1 microsecond' WHERE id = 7`,
			"public.t:checksum", "checksums differ", false},
		{"a missing row", `DELETE FROM t WHERE id = 9`, fmt.Sprintf(verifyRows, 9, 9),
			"public.t:count", "1 rows fewer", true},
		{"a duplicated row in a keyless table", `INSERT INTO k VALUES (2, 'once')`, `DELETE FROM k WHERE ctid = (SELECT max(ctid) FROM k WHERE a = 2)`,
			"public.k:count", "1 rows more", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			testenv.Exec(t, dst, c.change)
			res, r := verifyOut(t, 1, append(pair, "--depth", "checksum", "--local")...)
			if differing(res) != c.want || !strings.Contains(r.stdout, c.detail) {
				t.Fatalf("want %s (%q), got %s:\n%s", c.want, c.detail, differing(res), r.stdout)
			}
			res, _ = verifyOut(t, map[bool]int{true: 1, false: 0}[c.countSees], append(pair, "--depth", "count", "--local")...)
			if c.countSees != (differing(res) == c.want) {
				t.Fatalf("count depth: %s", differing(res))
			}
			testenv.Exec(t, dst, c.undo)
			verifyOut(t, 0, append(pair, "--depth", "checksum", "--local")...)
		})
	}

	// Filters, and usage errors before anything starts.
	res, _ = verifyOut(t, 0, append(pair, "--local", "--exclude-table", "k")...)
	if len(res.Tables) != 1 || res.Tables[0].Name != "public.t" || len(res.Skipped) != 1 {
		t.Fatalf("--exclude-table k: %+v", res)
	}
	testenv.Exec(t, dst, `DROP TABLE k`)
	res, r = verifyOut(t, 1, append(pair, "--local")...)
	if differing(res) != "public.k:missing" || !strings.Contains(r.stderr, "SLUICE-E-VERIFY-MISMATCH") {
		t.Fatalf("a table missing on the target: %s\n%s", differing(res), r)
	}
	for _, bad := range [][]string{
		{"--depth", "rowz"},
		{"--wait-broker", "s"},
		{"--include-table", "nothing_like_it", "--local"},
		{"--include-table", "["},
	} {
		if r := sluice(t, append(append([]string{"verify"}, pair...), bad...)...); r.exit != 2 {
			t.Errorf("verify %s: want exit 2, got %s", strings.Join(bad, " "), r)
		}
	}
}

// TestVerifyAcrossEngines compares a PostgreSQL source with its restores
// into SQLite and MariaDB by checksum: values normalised by kind agree
// across engines, and a changed value is still found.
func TestVerifyAcrossEngines(t *testing.T) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, verifySchema)
	chainURL := fileChain(t)
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL)

	file := filepath.Join(t.TempDir(), "replica.db")
	mustSluice(t, "restore", "--backup-target", chainURL, "--target-driver", "sqlite", "--target", file)
	res, _ := verifyOut(t, 0, "--source", testenv.DSN(src), "--target-driver", "sqlite", "--target", file, "--depth", "checksum")
	if differing(res) != "" || len(res.Tables) != 2 {
		t.Fatalf("SQLite replica: %+v", res)
	}

	my := testenv.CreateMySQLDB(t, "verify")
	mustSluice(t, "restore", "--backup-target", chainURL, "--target-driver", "mysql", "--target", testenv.MySQLDSN(my))
	res, _ = verifyOut(t, 0, "--source", testenv.DSN(src), "--target-driver", "mysql", "--target", testenv.MySQLDSN(my), "--depth", "checksum")
	if differing(res) != "" {
		t.Fatalf("MariaDB replica: %+v", res)
	}
	if _, err := testenv.MySQL(t, my).Exec("UPDATE t SET f = f + 0.5 WHERE id = 3"); err != nil {
		t.Fatal(err)
	}
	res, _ = verifyOut(t, 1, "--source", testenv.DSN(src), "--target-driver", "mysql", "--target", testenv.MySQLDSN(my), "--depth", "checksum", "--local")
	if differing(res) != "public.t:checksum" {
		t.Fatalf("MariaDB replica with a changed float: %s", differing(res))
	}
}

// TestVerifyWaitsForTheBroker compares a broker's target only once the
// broker applied the chain's newest incremental.
func TestVerifyWaitsForTheBroker(t *testing.T) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, verifySchema)
	chainURL := fileChain(t)
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
	dst := testenv.CreateDB(t, "dst")
	stream := fmt.Sprintf("verify-%d", time.Now().UnixNano()%1e6)
	mustSluice(t, "sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst), "--stream-id", stream,
		"--reset-target-data", "--yes", "--poll-interval", "2s", "--detach")
	t.Cleanup(func() { stopBroker(t, chainURL, stream) })
	testenv.Exec(t, src, `UPDATE t SET v = 'moved' WHERE id <= 100; DELETE FROM k WHERE a = 2`)
	mustSluice(t, "backup", "incremental", "--source", testenv.DSN(src), "--target", chainURL)
	res, _ := verifyOut(t, 0, "--source", testenv.DSN(src), "--target", testenv.DSN(dst), "--depth", "checksum",
		"--wait-broker", stream, "--backup-target", chainURL)
	if res.Broker == nil || res.Broker.LastApplied != res.Broker.Tip || differing(res) != "" {
		t.Fatalf("after waiting for the broker: %+v", res)
	}
	// A stream the target does not know is a refusal.
	_, r := verifyOut(t, 3, "--source", testenv.DSN(src), "--target", testenv.DSN(dst), "--wait-broker", "no-such-stream",
		"--backup-target", chainURL, "--wait-timeout", "2s", "--local")
	if !strings.Contains(r.stderr, "SLUICE-E-VERIFY-BROKER-BEHIND") {
		t.Fatalf("unknown stream: %s", r)
	}
}

package integration

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/workflows"
)

// pgKindsValues are the verify kinds table's values (after id): row id
// takes pgKindsValues[id % 4]. Rows of index 0 and 1 differ in every
// column; the last is all NULL.
var pgKindsValues = []string{
	`0, 0, 0, 1.50, 0.000, 0.5, 0.1, false, '', '', '', '\x', '2000-01-01', '2000-01-01 00:00:00', '2000-01-01 00:00:00+00',
	 '00:00:00', '00:00:00+00', '0 seconds', '00000000-0000-0000-0000-000000000000', '{}', '{}', 'sad', '{}', '{}'`,
	`32767, 2147483647, 9223372036854775807, -12345678901234567890.1234567890, 123456789.125, 3.4028235e38, 1.7976931348623157e308,
	 true, 'ünï 🚀', 'abcdefghij', 'ab', '\xdeadbeef00', '9999-12-31', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:08.000001+05:30',
	 '24:00:00', '23:59:59.999999-07:30', '1 year 2 mons 3 days 04:05:06.5', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11',
	 '{"a": [1, 2.50]}', '{"b": {"c": null}}', 'happy', '{1,NULL,3}', '{"a b",NULL,"\"q\""}'`,
	`-32768, -2147483648, -9223372036854775808, 0.10, -0.001, -1.25, -2.5e-300, true, 'tab	nl
quote'' bs\', 'x', 'abcde', '\x00ff', '0001-01-01', '1999-12-31 23:59:59', '1970-01-01 00:00:00+00', '12:34:56.789012',
	 '12:00:00+05:45', '-1 days -00:00:00.000001', 'ffffffff-ffff-ffff-ffff-ffffffffffff', '[]', '[1, "x"]', 'ok', '{{1,2},{3,4}}', '{""}'`,
	`NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
}

const pgKindsColumns = "i2, i4, i8, n, n3, f4, f8, bo, tx, vc, ch, by, d, ts, tz, tm, ttz, iv, u, j, jb, e, ai, at"

const pgKindsSchema = `
CREATE TYPE mood AS ENUM ('sad', 'happy', 'ok');
CREATE TABLE kinds (id int PRIMARY KEY, i2 smallint, i4 int, i8 bigint, n numeric, n3 numeric(12,3), f4 real, f8 float8,
  bo boolean, tx text, vc varchar(10), ch char(5), by bytea, d date, ts timestamp(6), tz timestamptz, tm time, ttz timetz,
  iv interval, u uuid, j json, jb jsonb, e mood, ai int[], at text[]);
`

// verifyAny runs sluice verify --json and decodes its outcome whatever
// its exit status (a failure's outcome is empty).
func verifyAny(t *testing.T, args ...string) (workflows.VerifyResult, result) {
	t.Helper()
	r := sluice(t, append([]string{"verify", "--json"}, args...)...)
	var res workflows.VerifyResult
	if r.exit <= 1 {
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("decode the outcome: %v\n%s", err, r)
		}
	}
	return res, r
}

// replica is a target a chain was restored into, for the verify tests.
type replica struct {
	name, driver, dsn string
	// table quotes the target's table for the source's table name.
	table func(name string) string
	exec  func(t *testing.T, stmt string)
}

// copyFrom sets column col of row id to its value in row donor, in the
// replica's own SQL.
func (r replica) copyFrom(t *testing.T, tbl, col string, id, donor int) {
	t.Helper()
	q := r.table(tbl)
	if r.driver == "mysql" {
		r.exec(t, fmt.Sprintf("UPDATE %s AS a JOIN %s AS b ON b.id = %d SET a.`%s` = b.`%s` WHERE a.id = %d", q, q, donor, col, col, id))
		return
	}
	r.exec(t, fmt.Sprintf(`UPDATE %s SET "%s" = b."%s" FROM %s AS b WHERE b.id = %d AND %s.id = %d`, q, col, col, q, donor, quoteLast(q), id))
}

// quoteLast is the last part of a quoted, possibly schema-qualified name.
func quoteLast(q string) string { return q[strings.LastIndex(q, ".")+1:] }

// replicas restores the chain into a fresh PostgreSQL database, an SQLite
// file and a MariaDB database. pgSchema is the PostgreSQL target's schema
// of the chain's tables.
func replicas(t *testing.T, chainURL, pgSchema string) []replica {
	pg := testenv.CreateDB(t, "vkdst")
	mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(pg))
	file := filepath.Join(t.TempDir(), "replica.db")
	mustSluice(t, "restore", "--backup-target", chainURL, "--target-driver", "sqlite", "--target", file)
	my := testenv.CreateMySQLDB(t, "vkdst")
	mustSluice(t, "restore", "--backup-target", chainURL, "--target-driver", "mysql", "--target", testenv.MySQLDSN(my))
	lite, err := sql.Open("sqlite", file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lite.Close() })
	return []replica{
		{"postgres", "postgres", testenv.DSN(pg), func(n string) string { return `"` + pgSchema + `"."` + n + `"` },
			func(t *testing.T, stmt string) { testenv.Exec(t, pg, stmt) }},
		{"sqlite", "sqlite", file, func(n string) string { return `"` + n + `"` },
			func(t *testing.T, stmt string) {
				if _, err := lite.Exec(stmt); err != nil {
					t.Fatalf("sqlite: %v\n%s", err, stmt)
				}
			}},
		{"mariadb", "mysql", testenv.MySQLDSN(my), func(n string) string { return "`" + n + "`" },
			func(t *testing.T, stmt string) {
				if _, err := testenv.MySQL(t, my).Exec(stmt); err != nil {
					t.Fatalf("mariadb: %v\n%s", err, stmt)
				}
			}},
	}
}

// checkMappingsAndDifferences verifies each replica equal to the source at
// checksum and rows depth, then, in each, copies one column's value from
// row donor into row 4*i (one row per column, each differing from the
// donor in every column) and checks that verify names exactly those rows,
// each with its one differing column.
func checkMappingsAndDifferences(t *testing.T, srcArgs []string, reps []replica, tbl, qualified string, columns []string, donor int) {
	for _, r := range reps {
		t.Run(r.name, func(t *testing.T) {
			pair := append(slices.Clone(srcArgs), "--target-driver", r.driver, "--target", r.dsn, "--local", "--include-table", tbl)
			for _, depth := range []string{"checksum", "rows"} {
				res, out := verifyAny(t, append(pair, "--depth", depth)...)
				if out.exit != 0 || differing(res) != "" {
					text := sluice(t, append([]string{"verify"}, append(pair, "--depth", "rows", "--max-rows", "40")...)...)
					t.Fatalf("%s depth: every documented mapping should compare equal:\n%s", depth, text)
				}
			}
			want := map[string]string{}
			for i, c := range columns {
				id := 4 * i
				r.copyFrom(t, tbl, c, id, donor)
				want[fmt.Sprint(id)] = c
			}
			res, out := verifyOut(t, 1, append(pair, "--depth", "checksum")...)
			if differing(res) != qualified+":checksum" || !strings.Contains(out.stderr, "SLUICE-E-VERIFY-MISMATCH") {
				t.Fatalf("checksum depth after a change per column: %s\n%s", differing(res), out)
			}
			res, out = verifyOut(t, 1, append(pair, "--depth", "rows", "--max-rows", "100")...)
			tb := res.Tables[0]
			got := map[string]string{}
			for _, d := range tb.Rows {
				if d.Kind != "changed" || len(d.Key) != 1 || d.Key[0] == nil {
					t.Fatalf("a row not reported as changed by its key: %+v\n%s", d, out)
				}
				got[*d.Key[0]] = strings.Join(d.Differing, ",")
			}
			if fmt.Sprint(got) != fmt.Sprint(want) || tb.MoreRows {
				t.Errorf("rows depth named %v (more %v), want %v\n%s", got, tb.MoreRows, want, out.stdout)
			}
		})
	}
}

// TestVerifyAgreesWithEveryMappingFromPostgres restores a PostgreSQL
// table holding a column of every kind the PostgreSQL source records (at
// the edges the targets hold, and NULLs) into each target, and checks that
// verify finds each one equal — an unconstrained numeric's 1.50 reads back
// from MariaDB as 1.5, by its documented rule — and catches a true
// difference in every column, naming the row.
func TestVerifyAgreesWithEveryMappingFromPostgres(t *testing.T) {
	src := testenv.CreateDB(t, "vksrc")
	var rows []string
	for id := range 140 {
		rows = append(rows, fmt.Sprintf("(%d, %s)", id, pgKindsValues[id%4]))
	}
	testenv.Exec(t, src, pgKindsSchema+"INSERT INTO kinds (id, "+pgKindsColumns+") VALUES "+strings.Join(rows, ",\n"))
	chainURL := fileChain(t)
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL)
	checkMappingsAndDifferences(t, []string{"--source", testenv.DSN(src)}, replicas(t, chainURL, "public"),
		"kinds", "public.kinds", strings.Split(pgKindsColumns, ", "), 1)
}

// TestVerifyAgreesWithEveryMappingFromMariaDB does the same for a MariaDB
// source's table of every type docs/cross-engine-types.md maps.
func TestVerifyAgreesWithEveryMappingFromMariaDB(t *testing.T) {
	srcDSN := newMariaSource(t, "vksrc", true)
	conn := mariaDB(t, srcDSN, "+05:30")
	if _, err := conn.ExecContext(t.Context(), typedInsert(40, 100, true)); err != nil {
		t.Fatal(err)
	}
	db := srcDSN[strings.LastIndex(srcDSN, "/")+1:]
	chainURL := fileChain(t)
	mustSluice(t, "backup", "full", "--source-driver", "mariadb", "--source", srcDSN, "--target", chainURL)
	checkMappingsAndDifferences(t, []string{"--source-driver", "mariadb", "--source", srcDSN}, replicas(t, chainURL, db),
		"typed", db+".typed", strings.Split(typedColumns, ", "), 1)
}

// TestVerifyColumnMissingOrExtra drops a column from a target's table and
// adds one to another's: verify reports each as a difference with its own
// code, at every depth, instead of failing on the target's SQL error.
func TestVerifyColumnMissingOrExtra(t *testing.T) {
	src := testenv.CreateDB(t, "vcsrc")
	testenv.Exec(t, src, verifySchema)
	chainURL := fileChain(t)
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL)
	for _, r := range replicas(t, chainURL, "public") {
		t.Run(r.name, func(t *testing.T) {
			pair := []string{"--source", testenv.DSN(src), "--target-driver", r.driver, "--target", r.dsn, "--local"}
			r.exec(t, "ALTER TABLE "+r.table("k")+" DROP COLUMN b")
			r.exec(t, "ALTER TABLE "+r.table("t")+" ADD COLUMN added int")
			for _, depth := range []string{"count", "checksum", "rows"} {
				res, out := verifyOut(t, 1, append(pair, "--depth", depth)...)
				if differing(res) != "public.k:columns,public.t:columns" || !strings.Contains(out.stderr, "SLUICE-E-VERIFY-COLUMNS-DIFFER") {
					t.Fatalf("%s depth: %s\n%s", depth, differing(res), out)
				}
				k, tt := res.Tables[0], res.Tables[1]
				if strings.Join(k.MissingColumns, ",") != "b" || len(k.ExtraColumns) != 0 || k.Code != "SLUICE-E-VERIFY-COLUMNS-DIFFER" ||
					strings.Join(tt.ExtraColumns, ",") != "added" || len(tt.MissingColumns) != 0 || tt.SourceRows != 501 || tt.TargetRows != 501 {
					t.Fatalf("%s depth: %+v", depth, res.Tables)
				}
			}
			r2 := sluice(t, append([]string{"verify"}, append(pair, "--depth", "checksum")...)...)
			if !strings.Contains(r2.stdout, "DIFFERS  public.k: the target lacks column(s) b") || !strings.Contains(r2.stderr, "hint:") {
				t.Fatalf("text output:\n%s", r2)
			}
		})
	}
}

// TestVerifyRowsNamesDifferingRows checks the rows depth end to end on a
// PostgreSQL replica: a changed, a missing and an extra row of a keyed
// table and a duplicated row of a keyless one, each named with its values.
func TestVerifyRowsNamesDifferingRows(t *testing.T) {
	src := testenv.CreateDB(t, "vrsrc")
	testenv.Exec(t, src, verifySchema)
	chainURL := fileChain(t)
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL)
	dst := testenv.CreateDB(t, "vrdst")
	mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(dst))
	testenv.Exec(t, dst, `UPDATE t SET v = 'changed' WHERE id = 42; DELETE FROM t WHERE id = 9;
		INSERT INTO t (id, v) VALUES (1000, 'new'); INSERT INTO k VALUES (2, 'once')`)
	pair := []string{"--source", testenv.DSN(src), "--target", testenv.DSN(dst), "--depth", "rows"}
	// As a workflow (the rows travel in its result) and locally.
	for _, local := range []bool{false, true} {
		args := pair
		if local {
			args = append(slices.Clone(pair), "--local")
		}
		res, out := verifyOut(t, 1, args...)
		if differing(res) != "public.k:count,public.t:checksum" {
			t.Fatalf("differing %s\n%s", differing(res), out)
		}
		r := sluice(t, append([]string{"verify"}, args...)...)
		for _, want := range []string{
			`changed  id="42": v source "v42", target "changed"`,
			`missing  id="9": on the source only (id="9", v="v9",`,
			`extra    id="1000": on the target only (id="1000", v="new", n=NULL`,
			`extra    (a="2", b="once"): source holds 1, target 2`,
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("want %s in\n%s", want, r.stdout)
			}
		}
		if r.exit != 1 || !strings.Contains(r.stderr, "SLUICE-E-VERIFY-MISMATCH") {
			t.Fatalf("exit: %s", r)
		}
	}
	res, _ := verifyOut(t, 1, append(pair, "--local", "--max-rows", "1", "--include-table", "t")...)
	if tb := res.Tables[0]; len(tb.Rows) != 1 || !tb.MoreRows {
		t.Fatalf("--max-rows 1: %+v", tb)
	}
}

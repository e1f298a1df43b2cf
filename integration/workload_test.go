package integration

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	// Tests reach the real PostgreSQL to build databases, workloads and comparisons.
	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/testenv"
)

// workloadSchema is the source schema the producer tests start from.
const workloadSchema = `
CREATE TABLE accounts (id bigint PRIMARY KEY, owner text NOT NULL, balance numeric(12,2), tags text[], note text);
CREATE TABLE events (kind text, payload jsonb);                -- no key
ALTER TABLE events REPLICA IDENTITY FULL;
CREATE TABLE moves (id int PRIMARY KEY, v text);                -- keys change
CREATE TABLE docs (id int PRIMARY KEY, body text, counter int); -- TOASTed bodies
INSERT INTO accounts SELECT i, 'owner' || i, i * 1.5, ARRAY['a', 'b'], NULL FROM generate_series(1, 2000) i;
INSERT INTO events SELECT 'seed', jsonb_build_object('i', i) FROM generate_series(1, 200) i;
INSERT INTO moves SELECT i, 'm' || i FROM generate_series(1, 500) i;
INSERT INTO docs SELECT i, repeat(md5(i::text), 300), 0 FROM generate_series(1, 50) i;
`

// workload drives a mix of transactions against the source: single- and
// multi-row, key changes, deletes, updates that leave TOASTed values
// unchanged, a keyless table, and at fixed steps an ADD COLUMN, a new table,
// a truncate and a transaction of bigTx rows.
type workload struct {
	db    string
	steps int
	bigTx int
	pause time.Duration

	stepCounter
}

func (w *workload) run(ctx context.Context, t *testing.T) error {
	conn, err := pgx.Connect(ctx, testenv.DSN(w.db))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	rng := rand.New(rand.NewSource(42))
	nextID := int64(1_000_000)
	lateRows := 0
	for step := 0; step < w.steps; step++ {
		var sql []string
		switch {
		case step == w.steps/5:
			sql = append(sql, `ALTER TABLE accounts ADD COLUMN score int DEFAULT 0`)
		case step == 2*w.steps/5:
			sql = append(sql, `CREATE TABLE late (id bigint PRIMARY KEY, v text, at timestamptz)`)
		case step == 3*w.steps/5:
			sql = append(sql, `TRUNCATE events`)
		case step == 3*w.steps/5+1:
			sql = append(sql, fmt.Sprintf(`INSERT INTO accounts (id, owner, balance) SELECT %d + i, 'bulk', i FROM generate_series(1, %d) i`, nextID, w.bigTx))
			nextID += int64(w.bigTx) + 1
		default:
			n := 1 + rng.Intn(5)
			for i := 0; i < n; i++ {
				switch rng.Intn(9) {
				case 0:
					sql = append(sql, fmt.Sprintf(`INSERT INTO accounts (id, owner, balance, tags) VALUES (%d, 'new%d', %d.25, ARRAY['x', NULL])`, nextID, step, rng.Intn(1000)))
					nextID++
				case 1:
					sql = append(sql, fmt.Sprintf(`UPDATE accounts SET balance = balance + 1, note = 'step %d' WHERE id = %d`, step, 1+rng.Intn(2000)))
				case 2:
					sql = append(sql, fmt.Sprintf(`DELETE FROM accounts WHERE id = %d`, 1+rng.Intn(2000)))
				case 3:
					sql = append(sql, fmt.Sprintf(`INSERT INTO events VALUES ('k%d', '{"step": %d}'), ('dup', '{"same": true}')`, step, step))
				case 4:
					sql = append(sql, `UPDATE events SET payload = payload || '{"seen": 1}' WHERE ctid = (SELECT ctid FROM events WHERE kind = 'dup' LIMIT 1)`)
				case 5:
					sql = append(sql, `DELETE FROM events WHERE ctid = (SELECT ctid FROM events ORDER BY kind LIMIT 1)`)
				case 6:
					id := 1 + rng.Intn(500)
					sql = append(sql, fmt.Sprintf(`UPDATE moves SET id = id + 100000, v = v || '>' WHERE id = %d`, id))
				case 7:
					sql = append(sql, fmt.Sprintf(`UPDATE docs SET counter = counter + 1 WHERE id = %d`, 1+rng.Intn(50)))
				case 8:
					if step > 2*w.steps/5 {
						sql = append(sql, fmt.Sprintf(`INSERT INTO late VALUES (%d, 'late', now())`, lateRows))
						lateRows++
					}
				}
			}
		}
		if len(sql) == 0 {
			continue
		}
		if _, err := conn.Exec(ctx, "BEGIN; "+strings.Join(sql, "; ")+"; COMMIT"); err != nil {
			return fmt.Errorf("workload step %d: %w", step, err)
		}
		if err := w.finished(ctx, step, w.pause); err != nil {
			return err
		}
	}
	return nil
}

// requireSameRows fails unless every table of the source holds the same rows
// in the target (count and an ordered checksum of their text form).
func requireSameRows(t *testing.T, src, dst string) {
	t.Helper()
	ctx := context.Background()
	sc, dc := connectPair(t, src, dst)
	rows, err := sc.Query(ctx, `SELECT quote_ident(schemaname) || '.' || quote_ident(tablename) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var diffs []string
	for _, tb := range tables {
		q := fmt.Sprintf(`SELECT count(*), coalesce(md5(string_agg(x::text, E'\n' ORDER BY x::text)), '') FROM %s x`, tb)
		var n1, n2 int64
		var s1, s2 string
		if err := sc.QueryRow(ctx, q).Scan(&n1, &s1); err != nil {
			t.Fatal(err)
		}
		if err := dc.QueryRow(ctx, q).Scan(&n2, &s2); err != nil {
			diffs = append(diffs, fmt.Sprintf("%s: %v", tb, err))
			continue
		}
		if n1 != n2 || s1 != s2 {
			diffs = append(diffs, fmt.Sprintf("%s: source %d rows (%s), target %d rows (%s)", tb, n1, s1, n2, s2))
		}
	}
	if len(diffs) > 0 {
		t.Fatalf("target %s differs from source %s:\n%s", dst, src, strings.Join(diffs, "\n"))
	}
}

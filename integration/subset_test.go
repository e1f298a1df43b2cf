package integration

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	sqlitetarget "github.com/sluicehq/sluice/internal/target/sqlite"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/internal/value"
)

// subsetSchema has a customers table, orders referencing it, and two
// audit tables every subset of the test leaves out.
const subsetSchema = `
CREATE TABLE customers (id bigint PRIMARY KEY, name text NOT NULL);
CREATE TABLE orders (id bigint PRIMARY KEY, customer_id bigint NOT NULL REFERENCES customers (id), amount numeric(12,2) NOT NULL);
CREATE TABLE audit_log (id bigserial PRIMARY KEY, note text);
CREATE TABLE audit_login (id bigint PRIMARY KEY, who text);
INSERT INTO customers SELECT g, 'customer ' || g FROM generate_series(1, 20) g;
INSERT INTO orders SELECT g, 1 + g % 20, g * 1.5 FROM generate_series(1, 40) g;
INSERT INTO audit_log (note) SELECT 'seed ' || g FROM generate_series(1, 10) g;
INSERT INTO audit_login SELECT g, 'seed ' || g FROM generate_series(1, 10) g;`

// runSubsetWorkload writes steps transactions over every table: mixed
// ones, ones touching only the audit tables (left out by every subset of
// the test), ones touching only customers, updates and deletes of orders,
// an added column on orders and on audit_log, two tables created half way
// (orders_archive, audit_new), and truncates of audit tables alone and of
// an audit table together with orders_archive.
func runSubsetWorkload(t *testing.T, db string, steps int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgxConnect(db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx := func(stmts ...string) {
		t.Helper()
		b, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stmts {
			if _, err := b.Exec(ctx, s); err != nil {
				_ = b.Rollback(ctx)
				t.Fatalf("%s: %v", s, err)
			}
		}
		if err := b.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= steps; i++ {
		c, o := 100+i, 1000+i
		tx(fmt.Sprintf(`INSERT INTO customers VALUES (%d, 'new customer %d')`, c, i),
			fmt.Sprintf(`INSERT INTO orders (id, customer_id, amount) VALUES (%d, %d, %d.25)`, o, c, i),
			fmt.Sprintf(`INSERT INTO audit_log (note) VALUES ('order %d')`, o))
		// Only tables every subset of the test leaves out.
		tx(fmt.Sprintf(`INSERT INTO audit_log (note) VALUES ('login %d')`, i),
			fmt.Sprintf(`INSERT INTO audit_login VALUES (%d, 'who %d') ON CONFLICT (id) DO UPDATE SET who = excluded.who`, 100+i, i))
		switch {
		case i%5 == 0:
			tx(fmt.Sprintf(`UPDATE orders SET amount = amount + 1 WHERE id IN (%d, %d)`, o-2, i),
				fmt.Sprintf(`DELETE FROM orders WHERE id = %d`, o-4))
		case i%7 == 0:
			tx(fmt.Sprintf(`UPDATE customers SET name = name || ' (renamed)' WHERE id = %d`, i))
		}
		switch i {
		case steps / 3:
			tx(`ALTER TABLE orders ADD COLUMN tag text`)
			tx(`ALTER TABLE audit_log ADD COLUMN extra text`)
		case steps / 2:
			tx(`CREATE TABLE orders_archive (id bigint PRIMARY KEY, amount numeric(12,2))`,
				`CREATE TABLE audit_new (id int PRIMARY KEY, note text)`)
		case 2 * steps / 3:
			tx(`TRUNCATE audit_login`)
			tx(`TRUNCATE audit_log, orders_archive`)
		}
		if i > steps/3 {
			tx(fmt.Sprintf(`UPDATE orders SET tag = 'tag %d' WHERE id = %d`, i, o))
		}
		if i > steps/2 {
			tx(fmt.Sprintf(`INSERT INTO orders_archive VALUES (%d, %d.5)`, i, i),
				fmt.Sprintf(`INSERT INTO audit_new VALUES (%d, 'new %d')`, i, i))
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// One PostgreSQL chain fans out to two targets with different subsets of
// its tables: an SQLite file that takes only orders (--include-table
// orders) and a PostgreSQL database that leaves out the audit tables
// (--exclude-table 'audit*'). Both start cold and follow a live workload
// that touches every table, including transactions that touch only tables
// left out, truncates, added columns and tables created on the way; each
// ends with exactly the source's rows of its tables and no other table. The
// status shows each stream's subset, a run asking for another subset is
// refused, and a restore with --include-table creates and fills only the
// tables it names (the foreign key to a table left out is not created).
func TestSubsetsFanOutOneChain(t *testing.T) {
	src := testenv.CreateDB(t, "subsrc")
	testenv.Exec(t, src, subsetSchema)
	chainURL := fileChain(t)
	producer := ownWorker(t, "subproducer")
	pq := producer.args
	worker := ownWorker(t, "subbroker")
	q := worker.args
	suffix := time.Now().UnixNano() % 1e6
	liteStream, pgStream := fmt.Sprintf("sub-lite-%d", suffix), fmt.Sprintf("sub-pg-%d", suffix)
	file := filepath.Join(t.TempDir(), "orders.db")
	dst := testenv.CreateDB(t, "subdst")

	mustSluice(t, pq("backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")...)
	mustSluice(t, pq("backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL,
		"--rollover-window", "1s", "--detach")...)
	liteRun := func(flags ...string) result {
		return sluice(t, q(append([]string{"sync", "from-backup", "run", "--backup-target", chainURL, "--target-driver", "sqlite",
			"--target", file, "--stream-id", liteStream, "--poll-interval", "300ms"}, flags...)...)...)
	}
	if r := liteRun("--include-table", "orders", "--reset-target-data", "--yes", "--detach"); r.exit != 0 {
		t.Fatalf("start the SQLite broker: %s", r)
	}
	mustSluice(t, q("sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst),
		"--stream-id", pgStream, "--poll-interval", "300ms", "--exclude-table", "audit*", "--reset-target-data", "--yes", "--detach")...)

	runSubsetWorkload(t, src, 60)
	// The last incrementals hold only transactions of tables both subsets
	// leave out: each broker's position must still move past them.
	for i := range 3 {
		testenv.Exec(t, src, fmt.Sprintf(`INSERT INTO audit_log (note) VALUES ('tail %d'); INSERT INTO audit_new VALUES (%d, 'tail')`, i, 1000+i))
		time.Sleep(1200 * time.Millisecond)
	}
	waitCaughtUp(t, src, 3*time.Minute)
	mustSluice(t, pq("backup", "stream", "stop", "--target", chainURL)...)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	last := lastIncremental(t, chainURL, nil)
	waitBrokerAt(t, liteStream, last, 5*time.Minute)
	waitBrokerAt(t, pgStream, last, 5*time.Minute)

	// The SQLite file holds orders alone, equal to the source's.
	lite, err := sql.Open("sqlite", file)
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	var liteTables []string
	rows, err := lite.Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sluice%' AND name NOT LIKE 'sqlite%' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		liteTables = append(liteTables, n)
	}
	rows.Close()
	if !slices.Equal(liteTables, []string{"orders"}) {
		t.Errorf("the SQLite target holds tables %v, want only orders", liteTables)
	}
	tgt, err := sqlitetarget.Open(context.Background(), file)
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close(context.Background())
	requireNeutralTableEqual(t, src, chainURL, "public.orders", "SQLite target "+file, tgt.ReadRows)

	// The PostgreSQL target holds every table but the audit ones, each
	// equal to the source's.
	tables := pgLines(t, dst, `SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' AND table_name NOT LIKE 'sluice%'`)
	if want := []string{"customers", "orders", "orders_archive"}; !slices.Equal(tables, want) {
		t.Errorf("the PostgreSQL target holds tables %v, want %v", tables, want)
	}
	for _, tb := range []string{"customers", "orders", "orders_archive"} {
		query := `SELECT x::text FROM ` + tb + ` x`
		if got, want := pgLines(t, dst, query), pgLines(t, src, query); !slices.Equal(got, want) {
			t.Errorf("PostgreSQL target: %s holds %d rows, the source %d; first %q, want %q", tb, len(got), len(want), first(got), first(want))
		}
	}

	// The status shows each stream's subset.
	for stream, want := range map[string]string{liteStream: "include orders", pgStream: "exclude audit*"} {
		out := mustSluice(t, "sync", "from-backup", "status", "--stream-id", stream).stdout
		if !strings.Contains(out, "subset:") || !strings.Contains(out, want) {
			t.Errorf("status of %s does not show its subset %q:\n%s", stream, want, out)
		}
	}

	// Another subset for a running stream is refused, before anything is
	// applied; the stored position stays the one the first run wrote.
	mustSluice(t, q("sync", "from-backup", "stop", "--backup-target", chainURL, "--stream-id", liteStream)...)
	waitWorkflowEnd(t, "broker/"+liteStream, time.Minute)
	r := liteRun("--include-table", "orders*")
	if r.exit != errcode.ExitRefused || !strings.Contains(r.stderr, string(errcode.BrokerSubsetChanged)) {
		t.Errorf("a run with another subset: %s\nwant exit %d with %s", r, errcode.ExitRefused, errcode.BrokerSubsetChanged)
	}
	mustSluice(t, q("sync", "from-backup", "stop", "--backup-target", chainURL, "--stream-id", pgStream)...)
	waitWorkflowEnd(t, "broker/"+pgStream, time.Minute)

	// A restore of orders alone: the full's other three tables are left
	// out (the summary says so), the incrementals apply only to orders,
	// and orders' foreign key to customers, which is not restored, is not
	// created.
	restored := testenv.CreateDB(t, "subrestore")
	out := mustSluice(t, q("restore", "--backup-target", chainURL, "--target", testenv.DSN(restored), "--include-table", "public.orders")...).stdout
	if !strings.Contains(out, "left out 3 tables") {
		t.Errorf("the restore's summary does not say it left out 3 tables:\n%s", out)
	}
	if got := pgLines(t, restored, `SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' AND table_name NOT LIKE 'sluice%'`); !slices.Equal(got, []string{"orders"}) {
		t.Errorf("the restore created tables %v, want only orders", got)
	}
	query := `SELECT x::text FROM orders x`
	if got, want := pgLines(t, restored, query), pgLines(t, src, query); !slices.Equal(got, want) {
		t.Errorf("restored orders: %d rows, the source %d", len(got), len(want))
	}
}

// requireNeutralTableEqual compares one table of the chain's newest schema
// in the PostgreSQL source and in a target (read reads it back as neutral
// values), row multisets rendered through their neutral kinds.
func requireNeutralTableEqual(t *testing.T, src, chainURL, table, what string, read func(context.Context, *chain.Table) ([][]value.Value, error)) {
	t.Helper()
	ctx := context.Background()
	ch, cat := openChainAt(t, chainURL)
	schema, err := ch.SchemaAt(ctx, cat, cat.Tip().ID)
	if err != nil {
		t.Fatal(err)
	}
	var tb *chain.Table
	for i := range schema.Tables {
		if schema.Tables[i].QualifiedName() == table {
			tb = &schema.Tables[i]
		}
	}
	if tb == nil {
		t.Fatalf("the chain's schema has no table %s", table)
	}
	source, err := pgNeutralRows(t, src)(tb)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := read(ctx, tb)
	if err != nil {
		t.Fatalf("%s: read %s: %v", what, table, err)
	}
	var want, got []string
	for _, r := range source {
		want = append(want, renderRow(t, tb, r))
	}
	for _, r := range stored {
		got = append(got, renderRow(t, tb, r))
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("%s: %s holds %d rows, the source %d: %s", what, table, len(got), len(want), firstDiff(want, got))
	}
}

// Invalid patterns are refused by the CLI before a workflow starts, with
// SLUICE-E-FILTER-INVALID and exit status 2, by the broker and by restore.
func TestSubsetInvalidPatternRefused(t *testing.T) {
	chainURL := fileChain(t)
	file := filepath.Join(t.TempDir(), "r.db")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"broker, two dots", []string{"sync", "from-backup", "run", "--backup-target", chainURL, "--target-driver", "sqlite", "--target", file,
			"--stream-id", "s", "--include-table", "a.b.c", "--detach"}},
		{"broker, empty", []string{"sync", "from-backup", "run", "--backup-target", chainURL, "--target-driver", "sqlite", "--target", file,
			"--stream-id", "s", "--exclude-table", " ", "--detach"}},
		{"restore, bad glob", []string{"restore", "--backup-target", chainURL, "--target-driver", "sqlite", "--target", file,
			"--exclude-table", "orders[", "--detach"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sluice(t, tc.args...)
			if r.exit != errcode.ExitUsage || !strings.Contains(r.stderr, string(errcode.FilterInvalid)) {
				t.Fatalf("%s\nwant exit %d with %s", r, errcode.ExitUsage, errcode.FilterInvalid)
			}
		})
	}
}

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

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/testenv"
)

// mariaFilterSchema is the MariaDB source of the filter test: the tables
// of filterSchema in MySQL types, a column masked null (phone) and one
// truncated (orders.note), and beat (the caught-up wait's writes; taken by
// the filters, since the MySQL-family capture commits no incremental for
// transactions that touch only excluded tables: the chain's tip ends at the
// last transaction it delivered).
const mariaFilterSchema = `
CREATE TABLE customers (id bigint PRIMARY KEY, email varchar(255) NOT NULL UNIQUE, name text, ssn varchar(32),
  card varchar(32), tier int NOT NULL DEFAULT 3, phone varchar(20));
CREATE TABLE orders (id bigint PRIMARY KEY, customer_email varchar(255) NOT NULL, amount decimal(12,2), note varchar(100));
CREATE TABLE secrets (id int PRIMARY KEY, token text);
CREATE TABLE audit_log (at datetime(6) NOT NULL DEFAULT now(6), note text);
CREATE TABLE beat (id int AUTO_INCREMENT PRIMARY KEY, at datetime(6));
INSERT INTO customers VALUES (-1, 'first.customer@example.com', 'Ἀθηνᾶ First', 'SSN-FIRST-X', '5500-0000-0000-0004', 1, '+1-555-0100');
INSERT INTO orders VALUES (-1, 'first.customer@example.com', 9.99, 'Ünïcødé-note-first');
INSERT INTO secrets VALUES (-1, 'secret-token-first');
INSERT INTO audit_log (note) VALUES ('audit-note-first');
`

// mariaFilterFlags are the producer's filters over MariaDB database db:
// two tables out by pattern (one qualified, one bare), one column out,
// and masks of every strategy.
func mariaFilterFlags(db string) []string {
	return []string{
		"--exclude-table", "secret*", "--exclude-table", db + ".audit_*",
		"--exclude-column", db + ".customers.ssn",
		"--mask", db + ".customers.email=email", "--mask", db + ".customers.name=hash",
		"--mask", db + ".customers.card=keep-last:4", "--mask", db + ".customers.tier=fixed:0",
		"--mask", db + ".customers.phone=null",
		"--mask", db + ".orders.customer_email=email", "--mask", db + ".orders.note=truncate:5",
		"--mask-key-env", "SLUICE_TEST_MASK_KEY",
	}
}

// mariaFilterWorkload is filterWorkload on MariaDB: inserts, updates of
// masked columns (the unique e-mail, the hashed name, the card) and of
// the orders joining on the e-mail, deletes, a transaction touching only
// an excluded table after every step, a change of the excluded column's
// type, a truncate of an excluded table and, half way, a new table the
// filters take (later) and one they leave out (secret_later).
type mariaFilterWorkload struct {
	dsn   string
	steps int
	stepCounter
}

func (w *mariaFilterWorkload) run(ctx context.Context, t *testing.T) error {
	conn, err := testenv.MySQLAt(t, w.dsn).Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for i := 0; i < w.steps; i++ {
		// Statements MariaDB commits implicitly run on their own.
		var ddl []string
		switch i {
		case w.steps / 3:
			ddl = append(ddl, `ALTER TABLE customers MODIFY ssn varchar(40)`)
		case w.steps / 2:
			ddl = append(ddl, `CREATE TABLE later (id int PRIMARY KEY, v text)`, `CREATE TABLE secret_later (id int PRIMARY KEY, token text)`)
		case 3 * w.steps / 4:
			ddl = append(ddl, `TRUNCATE TABLE audit_log`)
		}
		for _, s := range ddl {
			if _, err := conn.ExecContext(ctx, s); err != nil {
				return fmt.Errorf("step %d: %s: %w", i, s, err)
			}
		}
		stmts := []string{
			fmt.Sprintf(`INSERT INTO customers (id, email, name, ssn, card, tier, phone) VALUES (%d, 'person.%d@example.org', 'Zoë Person %d', 'SSN-%06d-X', '4111-2222-3333-%04d', %d, '+1-555-%04d')`, i, i, i, i, i, i%5, i),
			fmt.Sprintf(`INSERT INTO orders VALUES (%d, 'person.%d@example.org', %d.25, 'Ünïcødé-note-%d')`, i, i/2, i, i),
			fmt.Sprintf(`INSERT INTO audit_log (note) VALUES ('audit-note-%d')`, i),
		}
		switch {
		case i%7 == 3:
			stmts = append(stmts, fmt.Sprintf(`UPDATE customers SET email = 'renamed.%d@example.net', name = NULL, card = '4111-9999-8888-%04d' WHERE id = %d`, i-1, i, i-1),
				fmt.Sprintf(`UPDATE orders SET customer_email = 'renamed.%d@example.net' WHERE customer_email = 'person.%d@example.org'`, i-1, i-1))
		case i%11 == 5:
			stmts = append(stmts, fmt.Sprintf(`DELETE FROM orders WHERE id = %d`, i-2),
				fmt.Sprintf(`DELETE FROM customers WHERE id = %d AND NOT EXISTS (SELECT 1 FROM orders WHERE orders.customer_email = customers.email)`, i-4))
		}
		if i > w.steps/2 {
			stmts = append(stmts, fmt.Sprintf(`INSERT INTO later VALUES (%d, 'later-%d')`, i, i),
				fmt.Sprintf(`INSERT INTO secret_later VALUES (%d, 'later-secret-token-%d')`, i, i))
		}
		if err := mariaTx(ctx, conn, stmts); err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
		// A transaction that touches only excluded tables.
		if err := mariaTx(ctx, conn, []string{fmt.Sprintf(`INSERT INTO secrets VALUES (%d, 'secret-token-%d')`, i, i),
			fmt.Sprintf(`INSERT INTO audit_log (note) VALUES ('audit-note-secret-%d')`, i)}); err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
		if err := w.finished(ctx, i, 20*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// sqlLines returns a query's rows through database/sql (MariaDB or
// SQLite), each as its columns' text joined by '|' (NULL as ∅), sorted.
func sqlLines(t *testing.T, db *sql.DB, query string) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		dest := make([]any, len(cols))
		for i := range vals {
			dest[i] = &vals[i]
		}
		if err := rows.Scan(dest...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = "∅"
			if v.Valid {
				parts[i] = v.String
			}
		}
		out = append(out, strings.Join(parts, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	slices.Sort(out)
	return out
}

// maskTruncate5 is truncate:5 computed here: the first five code points.
func maskTruncate5(v string) string {
	r := []rune(v)
	if len(r) <= 5 {
		return v
	}
	return string(r[:5])
}

// filteredTarget is a target of the MariaDB filter test and the queries
// that read its catalog: its tables' names, customers' column names, and
// the number of unique indexes on customers.email alone.
type filteredTarget struct {
	what                    string
	db                      *sql.DB
	tables, columns, unique string
}

// requireMariaFilteredReplica checks that a target holds exactly what the
// filters let cross of the MariaDB source src: the tables taken, the
// excluded column absent, every masked value as computed here from the
// source's row, the masked e-mail unique (and its unique index kept) and
// the orders joining the customers on it as often as on the source.
func requireMariaFilteredReplica(t *testing.T, src *sql.DB, dst filteredTarget) {
	t.Helper()
	what := dst.what
	if got, want := sqlLines(t, dst.db, dst.tables), []string{"beat", "customers", "later", "orders"}; !slices.Equal(got, want) {
		t.Errorf("%s holds tables %v, want %v", what, got, want)
	}
	cols := sqlLines(t, dst.db, dst.columns)
	if want := []string{"card", "email", "id", "name", "phone", "tier"}; !slices.Equal(cols, want) {
		t.Errorf("%s: customers has columns %v, want %v (no ssn)", what, cols, want)
	}
	var want []string
	for _, line := range sqlLines(t, src, `SELECT id, email, name, card, tier, phone FROM customers`) {
		f := strings.Split(line, "|")
		name, card := f[2], f[3]
		if name != "∅" {
			name = hmacHex(name)
		}
		if card != "∅" {
			card = maskKeepLast4(card)
		}
		want = append(want, strings.Join([]string{f[0], maskEmail(f[1]), name, card, "0", "∅"}, "|"))
	}
	slices.Sort(want)
	got := sqlLines(t, dst.db, `SELECT id, email, name, card, tier, phone FROM customers`)
	if !slices.Equal(got, want) {
		t.Errorf("%s: customers differ from the source masked (%d rows, want %d); first got %q, want %q", what, len(got), len(want), first(got), first(want))
	}
	want = nil
	for _, line := range sqlLines(t, src, `SELECT id, customer_email, amount, note FROM orders`) {
		f := strings.Split(line, "|")
		want = append(want, strings.Join([]string{f[0], maskEmail(f[1]), f[2], maskTruncate5(f[3])}, "|"))
	}
	slices.Sort(want)
	if got := sqlLines(t, dst.db, `SELECT id, customer_email, amount, note FROM orders`); !slices.Equal(got, want) {
		t.Errorf("%s: orders differ from the source masked (%d rows, want %d); first got %q, want %q", what, len(got), len(want), first(got), first(want))
	}
	if got := sqlLines(t, dst.db, `SELECT count(*) - count(DISTINCT email) FROM customers`); !slices.Equal(got, []string{"0"}) {
		t.Errorf("%s: the masked e-mails are not unique (%v duplicates)", what, got)
	}
	if got := sqlLines(t, dst.db, dst.unique); !slices.Equal(got, []string{"1"}) {
		t.Errorf("%s: the unique index on the masked e-mail is missing (%v)", what, got)
	}
	join := `SELECT count(*) FROM orders o JOIN customers c ON c.email = o.customer_email`
	if got, want := sqlLines(t, dst.db, join), sqlLines(t, src, join); !slices.Equal(got, want) || want[0] == "0" {
		t.Errorf("%s: the masked e-mails join %v orders, the source's %v", what, got, want)
	}
	if got, want := sqlLines(t, dst.db, `SELECT id, v FROM later`), sqlLines(t, src, `SELECT id, v FROM later`); !slices.Equal(got, want) || len(want) == 0 {
		t.Errorf("%s: later holds %d rows, the source %d", what, len(got), len(want))
	}
}

// MariaDB source, filters and masks from the first full on (tables left
// out by qualified and bare patterns, one of them created mid-stream; a
// column left out; masks email, hash, keep-last:4, fixed:0 on an int, null
// and truncate:5): the broker into an SQLite file (started cold, SIGKILLed
// while it applies) and a restore into a fresh MariaDB database each hold
// exactly the included tables, customers without ssn, every masked value
// equal to the strategy computed here from the source's rows, the masked
// e-mail still unique and still joining the orders as on the source. No
// stored object of the chain, nor backup inspect of any link, holds an
// original or excluded value; a run without the filters is refused with
// FILTER-CHANGED.
func TestFiltersAndMasksFromMariaDB(t *testing.T) {
	srcDB := testenv.CreateMySQLDB(t, "fltsrc")
	srcDSN := testenv.MySQLDSN(srcDB)
	mariaExec(t, srcDSN, mariaFilterSchema)
	chainURL := fileChain(t)
	file := filepath.Join(t.TempDir(), "replica.db")
	producer := ownWorker(t, "mariafltproducer", "SLUICE_TEST_MASK_KEY="+filterMaskKey)
	pq := producer.args
	worker := ownWorker(t, "mariafltbroker")
	q := worker.args
	stream := fmt.Sprintf("mariaflt-%d", time.Now().UnixNano()%1e6)
	src := []string{"--source-driver", "mariadb", "--source", srcDSN, "--target", chainURL}
	flags := mariaFilterFlags(srcDB)

	mustSluice(t, pq(slices.Concat([]string{"backup", "full"}, src, flags)...)...)
	mustSluice(t, pq(slices.Concat([]string{"backup", "stream", "run"}, src,
		[]string{"--rollover-window", "1s", "--idle-window", "1s", "--detach"}, flags)...)...)
	run := func(flags ...string) {
		mustSluice(t, q(append([]string{"sync", "from-backup", "run", "--backup-target", chainURL, "--target-driver", "sqlite",
			"--target", file, "--stream-id", stream, "--poll-interval", "300ms", "--detach"}, flags...)...)...)
	}
	run("--reset-target-data", "--yes")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wl := &mariaFilterWorkload{dsn: srcDSN, steps: 120 * soakScale()}
	done := make(chan error, 1)
	go func() { done <- wl.run(ctx, t) }()
	killWhileApplying(t, worker, stream, wl, done, 3*soakScale(), func(reset bool) {
		if reset {
			run("--reset-target-data", "--yes")
			return
		}
		run()
	})
	// The workload's last transaction touched only excluded tables: the
	// wait's beats (an included table) are what the tip ends at.
	waitMariaCaughtUp(t, srcDSN, chainURL, 3*time.Minute)
	mustSluice(t, pq("backup", "stream", "stop", "--target", chainURL)...)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	waitBrokerAt(t, stream, lastIncremental(t, chainURL, nil), 5*time.Minute)

	source := testenv.MySQLAt(t, srcDSN)
	lite, err := sql.Open("sqlite", file)
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	requireMariaFilteredReplica(t, source, filteredTarget{
		what:    "SQLite broker target",
		db:      lite,
		tables:  `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sluice%' AND name NOT LIKE 'sqlite%'`,
		columns: `SELECT name FROM pragma_table_info('customers')`,
		unique: `SELECT count(*) FROM pragma_index_list('customers') AS il WHERE il."unique" = 1
			AND (SELECT group_concat(name) FROM pragma_index_info(il.name)) = 'email'`,
	})

	restored := testenv.CreateMySQLDB(t, "fltrestore")
	mustSluice(t, q("restore", "--backup-target", chainURL, "--target-driver", "mysql", "--target", testenv.MySQLDSN(restored))...)
	requireMariaFilteredReplica(t, source, filteredTarget{
		what: "MariaDB restore",
		db:   testenv.MySQLAt(t, testenv.MySQLDSN(restored)),
		tables: fmt.Sprintf(`SELECT table_name FROM information_schema.tables WHERE table_schema = '%s'
			AND table_name NOT LIKE 'sluice%%'`, restored),
		columns: fmt.Sprintf(`SELECT column_name FROM information_schema.columns WHERE table_schema = '%s'
			AND table_name = 'customers'`, restored),
		unique: fmt.Sprintf(`SELECT count(*) FROM (SELECT index_name FROM information_schema.statistics
			WHERE table_schema = '%s' AND table_name = 'customers' AND non_unique = 0
			GROUP BY index_name HAVING group_concat(column_name) = 'email') u`, restored),
	})

	originals := []string{"person.1@", "person.17@", "renamed.", "first.customer", "Zoë Person", "Ἀθηνᾶ", "4111-2222-3333",
		"4111-9999-8888", "5500-0000", "+1-555-", "Ünïcødé-note", "SSN-", "secret-token", "audit-note", "later-secret-token"}
	requireNoOriginals(t, chainURL, originals)
	_, cat := openChainAt(t, chainURL)
	for _, l := range cat.Links() {
		out := mustSluice(t, "backup", "inspect", "--target", chainURL, "--link", l.ID).stdout
		for _, o := range originals {
			if strings.Contains(out, o) {
				t.Errorf("backup inspect of %s shows %q", l.ID, o)
			}
		}
	}
	list := mustSluice(t, "backup", "list", "--target", chainURL).stdout
	for _, want := range []string{"columns -" + srcDB + ".customers.ssn", srcDB + ".customers.tier=fixed:0", srcDB + ".orders.note=truncate:5"} {
		if !strings.Contains(list, want) {
			t.Errorf("backup list does not show %q:\n%s", want, list)
		}
	}

	// A run without the filters is refused before anything is captured.
	r := sluice(t, pq(slices.Concat([]string{"backup", "stream", "run"}, src, []string{"--rollover-window", "1s"})...)...)
	if r.exit != errcode.ExitRefused || !strings.Contains(r.stderr, string(errcode.FilterChanged)) {
		t.Fatalf("a run without the filters: %s, want exit %d with %s", r, errcode.ExitRefused, errcode.FilterChanged)
	}
	mustSluice(t, q("sync", "from-backup", "stop", "--backup-target", chainURL, "--stream-id", stream)...)
	waitWorkflowEnd(t, "broker/"+stream, time.Minute)
}

package integration

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/testenv"
)

// filterMaskKey is the mask key the filter tests' workers hold in
// SLUICE_TEST_MASK_KEY.
const filterMaskKey = "integration-mask-key-0123456789abcdef"

const filterSchema = `
CREATE TABLE customers (id bigint PRIMARY KEY, email text NOT NULL UNIQUE, name text, ssn text, card text, tier int NOT NULL DEFAULT 3);
CREATE TABLE orders (id bigint PRIMARY KEY, customer_email text NOT NULL, amount numeric(12,2));
CREATE TABLE secrets (id int PRIMARY KEY, token text);
CREATE TABLE audit_log (at timestamptz NOT NULL DEFAULT now(), note text);
ALTER TABLE audit_log REPLICA IDENTITY FULL; -- published FOR ALL TABLES, excluded or not
`

// filterFlags are the producer's filters in the tests: two tables out by
// pattern, one column out, and a mask of every kind the schema allows.
var filterFlags = []string{
	"--exclude-table", "secret*", "--exclude-table", "public.audit_*",
	"--exclude-column", "public.customers.ssn",
	"--mask", "public.customers.email=email", "--mask", "public.customers.name=hash",
	"--mask", "public.customers.card=keep-last:4", "--mask", "public.customers.tier=fixed:0",
	"--mask", "public.orders.customer_email=email",
	"--mask-key-env", "SLUICE_TEST_MASK_KEY",
}

func hmacHex(v string) string {
	m := hmac.New(sha256.New, []byte(filterMaskKey))
	m.Write([]byte(v))
	return hex.EncodeToString(m.Sum(nil))
}

// maskEmail is the email strategy computed here, independently of the
// producer: the local part's keyed hash (16 hex characters), the domain kept.
func maskEmail(v string) string {
	at := strings.LastIndexByte(v, '@')
	return hmacHex(v[:at])[:16] + v[at:]
}

func maskKeepLast4(v string) string {
	r := []rune(v)
	if len(r) <= 4 {
		return v
	}
	return strings.Repeat("*", len(r)-4) + string(r[len(r)-4:])
}

// filterWorkload writes steps of customers, orders, secrets and audit
// rows: inserts, updates of masked and key columns, deletes, transactions
// that touch only excluded tables, and, half way, a new table the filters
// take (later) and one they leave out (secret_later).
type filterWorkload struct {
	db    string
	steps int
	stepCounter
}

func (w *filterWorkload) run(ctx context.Context, t *testing.T) error {
	conn, err := pgxConnect(w.db)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for i := 0; i < w.steps; i++ {
		stmts := []string{
			fmt.Sprintf(`INSERT INTO customers (id, email, name, ssn, card, tier) VALUES (%d, 'person.%d@example.org', 'Zoë Person %d', 'SSN-%06d-X', '4111-2222-3333-%04d', %d)`, i, i, i, i, i, i%5),
			fmt.Sprintf(`INSERT INTO orders VALUES (%d, 'person.%d@example.org', %d.25)`, i, i/2, i),
			fmt.Sprintf(`INSERT INTO audit_log (note) VALUES ('audit-note-%d')`, i),
		}
		switch {
		case i%7 == 3:
			stmts = append(stmts, fmt.Sprintf(`UPDATE customers SET email = 'renamed.%d@example.net', name = NULL WHERE id = %d`, i-1, i-1),
				fmt.Sprintf(`UPDATE orders SET customer_email = 'renamed.%d@example.net' WHERE customer_email = 'person.%d@example.org'`, i-1, i-1))
		case i%11 == 5:
			stmts = append(stmts, fmt.Sprintf(`DELETE FROM orders WHERE id = %d`, i-2), fmt.Sprintf(`DELETE FROM customers WHERE id = %d AND NOT EXISTS (SELECT 1 FROM orders WHERE customer_email = customers.email)`, i-4))
		}
		if i == w.steps/2 {
			stmts = append(stmts,
				`CREATE TABLE later (id int PRIMARY KEY, v text)`,
				`CREATE TABLE secret_later (id int PRIMARY KEY, token text)`)
		}
		if i > w.steps/2 {
			stmts = append(stmts, fmt.Sprintf(`INSERT INTO later VALUES (%d, 'later-%d')`, i, i),
				fmt.Sprintf(`INSERT INTO secret_later VALUES (%d, 'later-secret-token-%d')`, i, i))
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				_ = tx.Rollback(ctx)
				return fmt.Errorf("step %d: %s: %w", i, s, err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		// A transaction that touches only excluded tables.
		if _, err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO secrets VALUES (%d, 'secret-token-%d')`, i, i)); err != nil {
			return err
		}
		if err := w.finished(ctx, i, 20*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// pgLines returns a query's rows, each as its columns' text joined by '|'
// (NULL as ∅), sorted.
func pgLines(t *testing.T, db, query string) []string {
	t.Helper()
	conn, err := pgxConnect(db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			if v == nil {
				parts[i] = "∅"
			} else {
				parts[i] = fmt.Sprint(v)
			}
		}
		out = append(out, strings.Join(parts, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// requireFilteredReplica checks that db holds exactly what the filters let
// cross of the source src: the tables taken, the excluded column absent,
// every masked value as the strategies make it, the masked e-mail still
// unique and still joining the orders.
func requireFilteredReplica(t *testing.T, src, db, what string) {
	t.Helper()
	tables := pgLines(t, db, `SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' AND table_name NOT LIKE 'sluice%'`)
	if want := []string{"customers", "later", "orders"}; !slices.Equal(tables, want) {
		t.Errorf("%s holds tables %v, want %v", what, tables, want)
	}
	cols := pgLines(t, db, `SELECT column_name::text FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'customers'`)
	if slices.Contains(cols, "ssn") || !slices.Contains(cols, "email") {
		t.Errorf("%s: customers has columns %v, want no ssn", what, cols)
	}
	var want []string
	for _, line := range pgLines(t, src, `SELECT id::text, email, coalesce(name, '∅'), coalesce(card, '∅') FROM customers`) {
		f := strings.Split(line, "|")
		name := f[2]
		if name != "∅" {
			name = hmacHex(name)
		}
		want = append(want, strings.Join([]string{f[0], maskEmail(f[1]), name, maskKeepLast4(f[3]), "0"}, "|"))
	}
	slices.Sort(want)
	got := pgLines(t, db, `SELECT id::text, email, coalesce(name, '∅'), coalesce(card, '∅'), tier::text FROM customers`)
	if !slices.Equal(got, want) {
		t.Errorf("%s: customers differ from the source masked (%d rows, want %d); first got %q, want %q", what, len(got), len(want), first(got), first(want))
	}
	want = nil
	for _, line := range pgLines(t, src, `SELECT id::text, customer_email, amount::text FROM orders`) {
		f := strings.Split(line, "|")
		want = append(want, strings.Join([]string{f[0], maskEmail(f[1]), f[2]}, "|"))
	}
	slices.Sort(want)
	if got := pgLines(t, db, `SELECT id::text, customer_email, amount::text FROM orders`); !slices.Equal(got, want) {
		t.Errorf("%s: orders differ from the source masked (%d rows, want %d)", what, len(got), len(want))
	}
	join := `SELECT count(*)::text FROM orders o JOIN customers c ON c.email = o.customer_email`
	if got, want := pgLines(t, db, join), pgLines(t, src, join); !slices.Equal(got, want) {
		t.Errorf("%s: the masked e-mails join %v orders, the source's %v", what, got, want)
	}
	if got := pgLines(t, db, `SELECT count(*)::text FROM pg_indexes WHERE tablename = 'customers' AND indexdef LIKE 'CREATE UNIQUE INDEX%(email)'`); !slices.Equal(got, []string{"1"}) {
		t.Errorf("%s: the unique index on the masked e-mail is missing (%v)", what, got)
	}
	if got, want := pgLines(t, db, `SELECT count(*)::text FROM later`), pgLines(t, src, `SELECT count(*)::text FROM later`); !slices.Equal(got, want) {
		t.Errorf("%s: later holds %v rows, the source %v", what, got, want)
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// requireNoOriginals searches every object of a file chain, as stored and,
// for chunks, decoded, for values the filters must have kept out: masked
// originals (local parts, names, card numbers) and excluded values (SSNs,
// tokens, audit notes).
func requireNoOriginals(t *testing.T, chainURL string, originals []string) {
	t.Helper()
	root := strings.TrimPrefix(chainURL, "file://")
	objects := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		objects++
		forms := [][]byte{data}
		if _, body, err := chain.DecodeChunk(data); err == nil {
			forms = append(forms, body)
		}
		for _, form := range forms {
			for _, o := range originals {
				if bytes.Contains(form, []byte(o)) {
					t.Errorf("%s holds %q", path, o)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if objects < 5 {
		t.Fatalf("walked only %d objects of %s", objects, root)
	}
}

// PostgreSQL source, filters and masks from the first full on: the broker
// (started cold, SIGKILLed while it applies) and a restore each hold
// exactly what the filters let cross, the masked values as the strategies
// make them (keyed hash and e-mail deterministic, so the unique e-mail
// stays unique and still joins the orders), and no stored object holds an
// original or excluded value. A run under other filters is refused; with
// --rotate-on-filter-change it starts a new segment, which backup list
// shows.
func TestFiltersAndMasksFromPostgres(t *testing.T) {
	src := testenv.CreateDB(t, "fltsrc")
	testenv.Exec(t, src, filterSchema)
	testenv.Exec(t, src, `INSERT INTO customers VALUES (-1, 'first.customer@example.com', 'Ἀθηνᾶ First', 'SSN-FIRST-X', '5500-0000-0000-0004', 1);
		INSERT INTO orders VALUES (-1, 'first.customer@example.com', 9.99);
		INSERT INTO secrets VALUES (-1, 'secret-token-first')`)
	chainURL := fileChain(t)
	keyEnv := "SLUICE_TEST_MASK_KEY=" + filterMaskKey
	producer := ownWorker(t, "fltproducer", keyEnv)
	pq := producer.args
	worker := ownWorker(t, "fltbroker")
	q := worker.args
	stream := fmt.Sprintf("flt-%d", time.Now().UnixNano()%1e6)

	mustSluice(t, pq(append([]string{"backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot"}, filterFlags...)...)...)
	mustSluice(t, pq(append([]string{"backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL,
		"--rollover-window", "1s", "--detach"}, filterFlags...)...)...)
	dst := testenv.CreateDB(t, "fltdst")
	run := func(flags ...string) {
		mustSluice(t, q(append([]string{"sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst),
			"--stream-id", stream, "--poll-interval", "300ms", "--detach"}, flags...)...)...)
	}
	run("--reset-target-data", "--yes")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wl := &filterWorkload{db: src, steps: 120 * soakScale()}
	done := make(chan error, 1)
	go func() { done <- wl.run(ctx, t) }()
	killWhileApplying(t, worker, stream, wl, done, 3*soakScale(), func(reset bool) {
		if reset {
			run("--reset-target-data", "--yes")
			return
		}
		run()
	})
	waitCaughtUp(t, src, 3*time.Minute)
	mustSluice(t, pq("backup", "stream", "stop", "--target", chainURL)...)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	waitBrokerAt(t, stream, lastIncremental(t, chainURL, nil), 5*time.Minute)
	requireFilteredReplica(t, src, dst, "broker target")

	restored := testenv.CreateDB(t, "fltrestore")
	mustSluice(t, q("restore", "--backup-target", chainURL, "--target", testenv.DSN(restored))...)
	requireFilteredReplica(t, src, restored, "restore")

	originals := []string{"person.1@", "person.17@", "first.customer", "Zoë Person", "Ἀθηνᾶ", "4111-2222-3333", "5500-0000",
		"SSN-", "secret-token", "audit-note", "later-secret-token"}
	requireNoOriginals(t, chainURL, originals)
	// backup inspect of every link shows none of them either.
	_, cat := openChainAt(t, chainURL)
	for _, l := range cat.Links() {
		out := mustSluice(t, "backup", "inspect", "--target", chainURL, "--link", l.ID).stdout
		for _, o := range originals {
			if strings.Contains(out, o) {
				t.Errorf("backup inspect of %s shows %q", l.ID, o)
			}
		}
	}

	// The mask key is named in the histories, never given: neither they nor
	// the producer's log hold it.
	cl := temporalClient(t)
	defer cl.Close()
	var seen strings.Builder
	for _, id := range []string{"backup-full/" + chainURL, "producer/" + chainURL} {
		hist, _ := rawHistory(t, cl, id)
		seen.WriteString(hist)
	}
	if !strings.Contains(seen.String(), "SLUICE_TEST_MASK_KEY") {
		t.Fatal("the histories were not read: they do not name the mask key's variable")
	}
	for where, text := range map[string]string{"the histories": seen.String(), "the producer's log": producer.log.String()} {
		if strings.Contains(text, filterMaskKey) {
			t.Errorf("the mask key appears in %s", where)
		}
	}

	// Other filters are refused before anything is captured…
	r := sluice(t, pq("backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL, "--rollover-window", "1s")...)
	if r.exit != errcode.ExitRefused || !strings.Contains(r.stderr, string(errcode.FilterChanged)) {
		t.Fatalf("a run without the filters: %s, want exit %d with %s", r, errcode.ExitRefused, errcode.FilterChanged)
	}
	// …unless the run starts a new segment under them. The old segment's
	// closing incremental is still masked with its key, so the run names it.
	testenv.Exec(t, src, `INSERT INTO customers VALUES (100000, 'after.rotation@example.org', 'After', 'SSN-AFTER', '1', 1)`)
	mustSluice(t, pq("backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL, "--rollover-window", "1s",
		"--exclude-table", "secret*", "--exclude-table", "audit*", "--mask-key-env", "SLUICE_TEST_MASK_KEY", "--rotate-on-filter-change", "--detach")...)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, cat := openChainAt(t, chainURL)
		if len(cat.Segments) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no new segment after --rotate-on-filter-change")
		}
		time.Sleep(500 * time.Millisecond)
	}
	mustSluice(t, pq("backup", "stream", "stop", "--target", chainURL)...)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	list := mustSluice(t, "backup", "list", "--target", chainURL).stdout
	for _, want := range []string{"segment 0: tables -public.audit_* -secret*; columns -public.customers.ssn; masks public.customers.card=keep-last:4",
		"segment 1: tables -audit* -secret*"} {
		if !strings.Contains(list, want) {
			t.Errorf("backup list does not show %q:\n%s", want, list)
		}
	}
	mustSluice(t, q("sync", "from-backup", "stop", "--backup-target", chainURL, "--stream-id", stream)...)
	waitWorkflowEnd(t, "broker/"+stream, time.Minute)
}

// Filters the source cannot take are refused before anything exists: a key
// column excluded, a text strategy on a number, a fixed value the type
// refuses, a missing mask key; each with its code and exit status, and no
// slot left behind.
func TestFilterRefusalsBeforeAnythingExists(t *testing.T) {
	src := testenv.CreateDB(t, "fltref")
	testenv.Exec(t, src, filterSchema)
	keyEnv := "SLUICE_TEST_MASK_KEY=" + filterMaskKey
	w := ownWorker(t, "fltrefusals", keyEnv)
	for _, tc := range []struct {
		name  string
		flags []string
		code  errcode.Code
		exit  int
	}{
		{"bad pattern", []string{"--include-table", "a.b.c"}, errcode.FilterInvalid, errcode.ExitUsage},
		{"bad strategy", []string{"--mask", "public.customers.name=rot13"}, errcode.FilterInvalid, errcode.ExitUsage},
		{"no key flag", []string{"--mask", "public.customers.name=hash"}, errcode.MaskKeyMissing, errcode.ExitUsage},
		{"key not in the worker", []string{"--mask", "public.customers.name=hash", "--mask-key-env", "SLUICE_NO_SUCH_KEY"}, errcode.MaskKeyMissing, errcode.ExitUsage},
		{"key column", []string{"--exclude-column", "public.customers.id"}, errcode.FilterKeyColumn, errcode.ExitUsage},
		{"unknown column", []string{"--exclude-column", "public.customers.nope"}, errcode.FilterInvalid, errcode.ExitUsage},
		{"text strategy on a number", []string{"--mask", "public.orders.amount=truncate:2"}, errcode.MaskUnsupported, errcode.ExitUsage},
		{"fixed value the type refuses", []string{"--mask", "public.customers.tier=fixed:many"}, errcode.MaskUnsupported, errcode.ExitUsage},
		{"null on NOT NULL", []string{"--mask", "public.orders.customer_email=null"}, errcode.MaskUnsupported, errcode.ExitUsage},
		{"truncate on a unique column", []string{"--mask", "public.customers.email=truncate:3"}, errcode.MaskUnsupported, errcode.ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chainURL := fileChain(t)
			r := sluice(t, w.args(append([]string{"backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot"}, tc.flags...)...)...)
			if r.exit != tc.exit || !strings.Contains(r.stderr, string(tc.code)) {
				t.Fatalf("exit %d, want %d with %s: %s", r.exit, tc.exit, tc.code, r)
			}
			var slots int
			if err := queryInt(t, src, `SELECT count(*)::int FROM pg_replication_slots WHERE database = current_database()`, &slots); err != nil {
				t.Fatal(err)
			}
			if slots != 0 {
				t.Fatalf("a refused full left %d slots", slots)
			}
		})
	}
}

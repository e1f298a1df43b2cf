package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	// Tests reach the real PostgreSQL to read the source's rows.
	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	sqlitetarget "github.com/sluicehq/sluice/internal/target/sqlite"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/internal/value"
)

// PostgreSQL → SQLite end to end: the producer streams a live workload
// (keyless table, key changes, TOASTed values, an added column, a new table,
// a truncate, a large transaction) while the broker, started cold with
// --reset-target-data into an SQLite file, applies it; the broker's worker
// is SIGKILLed again and again while it applies. At the end the file holds exactly the
// source's rows, compared value by value through each column's neutral kind.
func TestPostgresToSQLiteSurvivesWorkerKills(t *testing.T) {
	src := testenv.CreateDB(t, "sqlsrc")
	testenv.Exec(t, src, workloadSchema)
	chainURL := fileChain(t)
	file := filepath.Join(t.TempDir(), "replica.db")
	// The producer runs on a worker of its own; the broker's worker is the
	// one killed, so the kills land while it applies.
	producer := ownWorker(t, "sqliteproducer")
	pq := producer.args
	worker := ownWorker(t, "sqlitekills")
	q := worker.args
	stream := fmt.Sprintf("sqlite-%d", time.Now().UnixNano()%1e6)

	mustSluice(t, pq("backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")...)
	mustSluice(t, pq("backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL,
		"--rollover-window", "1s", "--retain-rotate-at-chain-length", "5", "--detach")...)
	run := func(flags ...string) {
		mustSluice(t, q(append([]string{"sync", "from-backup", "run", "--backup-target", chainURL, "--target-driver", "sqlite",
			"--target", file, "--stream-id", stream, "--poll-interval", "300ms", "--detach"}, flags...)...)...)
	}
	run("--reset-target-data", "--yes")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wl := &workload{db: src, steps: 600 * soakScale(), bigTx: 200_000 * soakScale(), pause: 30 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- wl.run(ctx, t) }()

	killWhileApplying(t, worker, stream, wl, done, 8*soakScale(), func(reset bool) {
		if reset {
			run("--reset-target-data", "--yes") // killed before the reset recorded a position
			return
		}
		run()
	})
	testenv.Exec(t, src, `UPDATE accounts SET balance = balance + 1 WHERE id % 3 = 0`)
	waitCaughtUp(t, src, 3*time.Minute)
	mustSluice(t, pq("backup", "stream", "stop", "--target", chainURL)...)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	waitBrokerAt(t, stream, lastIncremental(t, chainURL, nil), 5*time.Minute)
	tgt, err := sqlitetarget.Open(context.Background(), file)
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close(context.Background())
	requireSameNeutralRows(t, src, chainURL, "SQLite target "+file, func(tb *chain.Table) ([][]value.Value, error) {
		return tgt.ReadRows(context.Background(), tb)
	})
	mustSluice(t, q("sync", "from-backup", "stop", "--backup-target", chainURL, "--stream-id", stream)...)
	waitWorkflowEnd(t, "broker/"+stream, time.Minute)
}

// An SQLite target takes one writer: more lanes are refused before anything
// starts, and a relative path (the worker would resolve it) too.
func TestSQLiteTargetUsageRefusals(t *testing.T) {
	chainURL := fileChain(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"lanes", []string{"--target", filepath.Join(t.TempDir(), "r.db"), "--apply-concurrency", "4"}},
		{"relative path", []string{"--target", "replica.db"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"sync", "from-backup", "run", "--backup-target", chainURL, "--target-driver", "sqlite",
				"--stream-id", "s", "--detach"}, tc.args...)
			r := sluice(t, args...)
			if r.exit != errcode.ExitUsage {
				t.Fatalf("exit %d, want %d: %s", r.exit, errcode.ExitUsage, r)
			}
		})
	}
}

// requireSameNeutralRows compares every table of the chain's newest schema
// in the PostgreSQL source and in a target (named by what, for messages),
// row multisets of values rendered through their neutral kinds; read reads
// one table of the target back as neutral values (a target's ReadRows).
func requireSameNeutralRows(t *testing.T, src, chainURL, what string, read func(*chain.Table) ([][]value.Value, error)) {
	t.Helper()
	requireNeutralRowsEqual(t, chainURL, "source "+src, pgNeutralRows(t, src), what, read)
}

// requireNeutralRowsEqual compares every table of the chain's newest schema
// as readSrc reads it from the source (named by srcWhat) and as read reads
// it from a target (named by what): row multisets of values rendered
// through their neutral kinds.
func requireNeutralRowsEqual(t *testing.T, chainURL, srcWhat string, readSrc func(*chain.Table) ([][]value.Value, error), what string, read func(*chain.Table) ([][]value.Value, error)) {
	t.Helper()
	ctx := context.Background()
	ch, cat := openChainAt(t, chainURL)
	schema, err := ch.SchemaAt(ctx, cat, cat.Tip().ID)
	if err != nil {
		t.Fatal(err)
	}
	var diffs []string
	for i := range schema.Tables {
		tb := &schema.Tables[i]
		source, err := readSrc(tb)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, r := range source {
			want = append(want, renderRow(t, tb, r))
		}
		stored, err := read(tb)
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("%s: %v", tb.Name, err))
			continue
		}
		var got []string
		for _, r := range stored {
			got = append(got, renderRow(t, tb, r))
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(want, got) {
			diffs = append(diffs, fmt.Sprintf("%s: source %d rows, target %d rows; first difference: %s", tb.Name, len(want), len(got), firstDiff(want, got)))
		}
	}
	if len(diffs) > 0 {
		t.Fatalf("%s differs from %s:\n%s", what, srcWhat, strings.Join(diffs, "\n"))
	}
}

// pgNeutralRows returns a reader of a PostgreSQL source database's tables
// as neutral values, decoded from their text form by each column's kind;
// its connection closes when the test ends.
func pgNeutralRows(t *testing.T, src string) func(*chain.Table) ([][]value.Value, error) {
	t.Helper()
	return pgNeutralRowsAt(t, testenv.DSN(src))
}

// pgNeutralRowsAt is pgNeutralRows of the database a postgres:// URL names
// (on a server other than the shared one, say).
func pgNeutralRowsAt(t *testing.T, dsn string) func(*chain.Table) ([][]value.Value, error) {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range chain.PostgresTextSettings() {
		cfg.RuntimeParams[k] = v // the settings the chain's text values are read under
	}
	sc, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close(ctx) })
	return func(tb *chain.Table) ([][]value.Value, error) {
		cols := make([]string, len(tb.Columns))
		for j, c := range tb.Columns {
			cols[j] = pgx.Identifier{c.Name}.Sanitize() + "::text"
		}
		rows, err := sc.Query(ctx, "SELECT "+strings.Join(cols, ", ")+" FROM "+pgx.Identifier{tb.Schema, tb.Name}.Sanitize())
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out [][]value.Value
		for rows.Next() {
			texts := make([]*string, len(cols))
			dest := make([]any, len(cols))
			for j := range texts {
				dest[j] = &texts[j]
			}
			if err := rows.Scan(dest...); err != nil {
				return nil, err
			}
			vals := make([]value.Value, len(cols))
			for j, s := range texts {
				if s == nil {
					vals[j] = value.Value{Null: true}
					continue
				}
				if vals[j], err = value.DecodePGText(tb.Columns[j].NeutralKind(), []byte(*s)); err != nil {
					return nil, fmt.Errorf("source %s.%s = %q: %w", tb.Name, tb.Columns[j].Name, *s, err)
				}
			}
			out = append(out, vals)
		}
		return out, rows.Err()
	}
}

// renderRow renders a row's values in PostgreSQL's text form by kind.
func renderRow(t *testing.T, tb *chain.Table, vals []value.Value) string {
	t.Helper()
	parts := make([]string, len(vals))
	for i, v := range vals {
		if v.Null {
			parts[i] = "NULL"
			continue
		}
		b, err := value.EncodePGText(tb.Columns[i].NeutralKind(), v)
		if err != nil {
			t.Fatalf("render %s.%s: %v", tb.Name, tb.Columns[i].Name, err)
		}
		parts[i] = string(b)
	}
	return strings.Join(parts, "|")
}

func firstDiff(a, b []string) string {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return fmt.Sprintf("source %q, target %q", a[i], b[i])
		}
	}
	if len(a) > len(b) {
		return fmt.Sprintf("source has %q more", a[len(b)])
	}
	if len(b) > len(a) {
		return fmt.Sprintf("target has %q more", b[len(a)])
	}
	return "none"
}

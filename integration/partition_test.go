package integration

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// partitionedSchema has a range-partitioned table with a default partition
// and a list-partitioned sub-partition, and a hash-partitioned table, with
// keys, a unique constraint, an index and a check on the parents.
const partitionedSchema = `
CREATE TABLE public.events (
	id bigint NOT NULL,
	at date NOT NULL,
	kind text NOT NULL,
	body text,
	CONSTRAINT events_pkey PRIMARY KEY (id, at, kind),
	CONSTRAINT events_kind_check CHECK (kind <> '')
) PARTITION BY RANGE (at);
CREATE TABLE public.events_2026_01 PARTITION OF public.events FOR VALUES FROM ('2026-01-01') TO ('2026-02-01');
CREATE TABLE public.events_2026_02 PARTITION OF public.events FOR VALUES FROM ('2026-02-01') TO ('2026-03-01')
	PARTITION BY LIST (kind);
CREATE TABLE public.events_2026_02_click PARTITION OF public.events_2026_02 FOR VALUES IN ('click');
CREATE TABLE public.events_2026_02_rest PARTITION OF public.events_2026_02 DEFAULT;
CREATE TABLE public.events_other PARTITION OF public.events DEFAULT;
CREATE INDEX events_kind_idx ON public.events (kind);
CREATE TABLE public.accounts (id int NOT NULL, email text NOT NULL, CONSTRAINT accounts_pkey PRIMARY KEY (id),
	CONSTRAINT accounts_id_email_key UNIQUE (id, email)) PARTITION BY HASH (id);
CREATE TABLE public.accounts_0 PARTITION OF public.accounts FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE public.accounts_1 PARTITION OF public.accounts FOR VALUES WITH (MODULUS 2, REMAINDER 1);
INSERT INTO public.events SELECT g, date '2026-01-01' + (g % 90), CASE WHEN g % 3 = 0 THEN 'click' ELSE 'view' END, 'e' || g FROM generate_series(1, 300) g;
INSERT INTO public.accounts SELECT g, 'a' || g || '@x' FROM generate_series(1, 50) g;`

// partitionLayout describes how a database's tables are partitioned: each
// partition's parent and bound, each partitioned table's key, and the
// indexes and constraints of every table.
func partitionLayout(t *testing.T, db string) string {
	t.Helper()
	var s string
	q := `SELECT string_agg(line, E'\n' ORDER BY line) FROM (
		SELECT c.relname || ' partition of ' || p.relname || ' ' || pg_get_expr(c.relpartbound, c.oid) AS line
		FROM pg_class c JOIN pg_inherits i ON i.inhrelid = c.oid JOIN pg_class p ON p.oid = i.inhparent
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
		UNION ALL
		SELECT c.relname || ' partitioned by ' || pg_get_partkeydef(c.oid) FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'p'
		UNION ALL
		SELECT c.relname || ' index ' || pg_get_indexdef(ix.indexrelid) FROM pg_index ix JOIN pg_class c ON c.oid = ix.indrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relname NOT LIKE 'sluice%'
		UNION ALL
		SELECT c.relname || ' constraint ' || co.conname || ' ' || pg_get_constraintdef(co.oid) FROM pg_constraint co
		JOIN pg_class c ON c.oid = co.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relname NOT LIKE 'sluice%'
	) x`
	if err := queryString(db, q, &s); err != nil {
		t.Fatalf("read the partition layout of %s: %v", db, err)
	}
	return s
}

// Partitioned tables come across whole: the parents with their keys, each
// partition attached with its bound, keys, indexes and constraints on the
// parents; changes on the leaves, rows moved between partitions included,
// apply to the same leaves; a partition created or detached while the
// stream runs is created or detached on the target too.
func TestPartitionedTablesRoundTrip(t *testing.T) {
	src := testenv.CreateDB(t, "partsrc")
	restored := testenv.CreateDB(t, "partrestored")
	dst := testenv.CreateDB(t, "partdst")
	testenv.Exec(t, src, partitionedSchema)
	chainURL := "file://" + filepath.Join(t.TempDir(), "chain")
	stream := fmt.Sprintf("parts-%d", time.Now().UnixNano()%1e6)

	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
	mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(restored))
	want := partitionLayout(t, src)
	if got := partitionLayout(t, restored); got != want {
		t.Fatalf("restored partition layout differs.\nsource:\n%s\nrestored:\n%s", want, got)
	}
	requireSameRows(t, src, restored)

	mustSluice(t, "backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL, "--rollover-window", "1s", "--detach")
	mustSluice(t, "sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst),
		"--stream-id", stream, "--poll-interval", "300ms", "--reset-target-data", "--yes", "--detach")
	testenv.Exec(t, src, `
		INSERT INTO public.events SELECT g, date '2026-02-10', 'click', 'new' FROM generate_series(1001, 1010) g;
		UPDATE public.events SET at = date '2026-02-15', kind = 'scroll' WHERE id BETWEEN 1 AND 20;   -- moves rows across partitions
		UPDATE public.events SET body = 'edited' WHERE id BETWEEN 21 AND 30;
		DELETE FROM public.events WHERE id BETWEEN 31 AND 40;
		UPDATE public.accounts SET id = id + 1000 WHERE id <= 5;                                       -- moves between hash partitions
		DELETE FROM public.accounts WHERE id = 6`)
	// Partitions come and go while the stream runs: a new one, filled at
	// once, and one detached (noticed with its next change).
	testenv.Exec(t, src, `
		CREATE TABLE public.events_2026_04 PARTITION OF public.events FOR VALUES FROM ('2026-04-01') TO ('2026-05-01');
		INSERT INTO public.events SELECT g, date '2026-04-02', 'view', 'april' FROM generate_series(2001, 2005) g`)
	testenv.Exec(t, src, `ALTER TABLE public.events DETACH PARTITION public.events_2026_01`)
	testenv.Exec(t, src, `UPDATE public.events_2026_01 SET body = 'archived'`)
	want = partitionLayout(t, src)
	waitCaughtUp(t, src, 2*time.Minute)
	mustSluice(t, "backup", "stream", "stop", "--target", chainURL)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	waitBrokerAtTip(t, stream, chainURL, nil, 2*time.Minute)
	requireSameRows(t, src, dst)
	if got := partitionLayout(t, dst); got != want {
		t.Fatalf("the broker's cold start and the partitions created and detached while it ran left another layout.\nsource:\n%s\ntarget:\n%s", want, got)
	}
	stopBroker(t, chainURL, stream)
}

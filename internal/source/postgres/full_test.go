package postgres

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/testenv"
)

func openChain(t *testing.T) *chain.Chain {
	t.Helper()
	s, err := blobstore.Open(context.Background(), "file://"+filepath.Join(t.TempDir(), "chain"), blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return chain.Open(s)
}

// readRows decodes every row of one table of a full back into text.
func readRows(t *testing.T, ch *chain.Chain, m *chain.Manifest, table string) []string {
	t.Helper()
	var out []string
	for _, td := range m.Tables {
		if td.Table != table {
			continue
		}
		for _, ref := range td.Chunks {
			hdr, body, err := ch.ReadChunk(context.Background(), ref)
			if err != nil {
				t.Fatal(err)
			}
			it := chain.NewTupleIter(body, hdr.Columns)
			for it.Next() {
				v := it.Values()
				out = append(out, fmt.Sprintf("%x|%s", v[0], v[1]))
			}
			if it.Err() != nil {
				t.Fatal(it.Err())
			}
		}
	}
	return out
}

func TestFullBackupIsOneSnapshot(t *testing.T) {
	db := testenv.CreateDB(t, "snap")
	testenv.Exec(t, db, `CREATE TABLE t (id int PRIMARY KEY, v text);
		INSERT INTO t SELECT i, 'before' FROM generate_series(1, 1000) i;
		CREATE TABLE other (id int);`)
	ch := openChain(t)
	m, err := FullBackup(context.Background(), ch, FullBackupOptions{
		DSN:       testenv.DSN(db),
		AttemptID: "a1",
		Parallel:  2,
		AfterSnapshot: func(ctx context.Context) error {
			conn, err := pgx.Connect(ctx, testenv.DSN(db))
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			_, err = conn.Exec(ctx, `UPDATE t SET v = 'after';
				DELETE FROM t WHERE id <= 10;
				INSERT INTO t SELECT i, 'new' FROM generate_series(1001, 1500) i;
				INSERT INTO other VALUES (1);`)
			return err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	rows := readRows(t, ch, m, "public.t")
	if len(rows) != 1000 {
		t.Fatalf("backup holds %d rows of t, the snapshot had 1000", len(rows))
	}
	for _, r := range rows {
		if r[len(r)-len("before"):] != "before" {
			t.Fatalf("a write committed after the snapshot is in the backup: %s", r)
		}
	}
	if got := readRows(t, ch, m, "public.other"); len(got) != 0 {
		t.Fatalf("table other holds %d rows written after the snapshot", len(got))
	}
	cat, err := ch.LoadCatalog(context.Background())
	if err != nil || cat.ChainID != m.ID || cat.Tip().EndPosition != m.EndPosition {
		t.Fatalf("catalog does not name the full: %v %+v", err, cat)
	}
}

func TestChainSlot(t *testing.T) {
	db := testenv.CreateDB(t, "slot")
	testenv.Exec(t, db, `CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1);`)
	ctx := context.Background()
	ch := openChain(t)
	admin := testenv.Admin(t)
	defer admin.Close(ctx)
	slot := DefaultSlotName(ch.Store().String())

	// A leftover inactive slot of this chain's name, from an attempt that never
	// committed, is replaced.
	if _, err := admin.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput') FROM (SELECT 1) x WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, slot); err != nil {
		t.Fatal(err)
	}
	// The leftover lives in another database here; the backup must still
	// anchor a fresh slot on its own database.
	m, err := FullBackup(ctx, ch, FullBackupOptions{DSN: testenv.DSN(db), ChainSlot: true, AttemptID: "a1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot) })
	var confirmed, database string
	if err := admin.QueryRow(ctx, `SELECT coalesce(confirmed_flush_lsn::text, ''), database FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&confirmed, &database); err != nil {
		t.Fatalf("chain slot %s missing after the full: %v", slot, err)
	}
	if database != db || m.Source.Slot != slot || m.EndPosition != confirmed {
		t.Fatalf("slot %s on %s confirmed at %s; manifest slot %q anchor %s", slot, database, confirmed, m.Source.Slot, m.EndPosition)
	}

	// An explicitly named slot that exists is never taken over.
	other := openChain(t)
	_, err = FullBackup(ctx, other, FullBackupOptions{DSN: testenv.DSN(db), ChainSlot: true, SlotName: slot, AttemptID: "a2"})
	if !errcode.Is(err, errcode.SlotExists) {
		t.Fatalf("want %s, got %v", errcode.SlotExists, err)
	}
	// A second full on the same chain is refused before touching the source.
	_, err = FullBackup(ctx, ch, FullBackupOptions{DSN: testenv.DSN(db), ChainSlot: true, AttemptID: "a3"})
	if !errcode.Is(err, errcode.ChainExists) {
		t.Fatalf("want %s, got %v", errcode.ChainExists, err)
	}
}

func TestFailedAttemptLeavesNothingNamed(t *testing.T) {
	db := testenv.CreateDB(t, "fail")
	testenv.Exec(t, db, `CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t SELECT generate_series(1, 100000);`)
	ctx := context.Background()
	ch := openChain(t)
	// The store fails the fifth chunk write: four chunks are already stored.
	failing := chain.Open(&failingStore{Store: ch.Store(), after: 4})
	_, err := FullBackup(ctx, failing, FullBackupOptions{DSN: testenv.DSN(db), ChainSlot: true, AttemptID: "a1", ChunkBytes: 64 << 10})
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("want the injected store failure, got %v", err)
	}
	if _, err := ch.LoadCatalog(ctx); !errcode.Is(err, errcode.ChainNotFound) {
		t.Fatalf("a failed attempt committed a catalog: %v", err)
	}
	admin := testenv.Admin(t)
	defer admin.Close(ctx)
	var n int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, DefaultSlotName(ch.Store().String())).Scan(&n); err != nil || n != 0 {
		t.Fatalf("a failed attempt left its chain slot behind (%d, %v)", n, err)
	}
	// The retry succeeds and writes many chunks.
	m, err := FullBackup(ctx, ch, FullBackupOptions{DSN: testenv.DSN(db), ChainSlot: true, AttemptID: "a2", ChunkBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, m.Source.Slot) })
	if len(m.Tables[0].Chunks) < 10 || m.Tables[0].Rows != 100000 {
		t.Fatalf("want 100000 rows in many small chunks, got %d rows in %d chunks", m.Tables[0].Rows, len(m.Tables[0].Chunks))
	}
	objs, err := ch.Store().List(ctx, "data/a1/")
	if err != nil || len(objs) != 0 {
		t.Fatalf("the failed attempt's data is still there: %d objects, %v", len(objs), err)
	}
}

// failingStore fails every chunk write after the first `after`.
type failingStore struct {
	blobstore.Store
	after int64
	puts  atomic.Int64
}

func (f *failingStore) Put(ctx context.Context, key string, data []byte) error {
	if strings.HasPrefix(key, "data/") && f.puts.Add(1) > f.after {
		return errors.New("injected store failure")
	}
	return f.Store.Put(ctx, key, data)
}

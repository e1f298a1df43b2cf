package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

var txn = chaintest.Txn

// restoreIncremental applies m on conn as a restore applies an
// incremental (apply.RestoreOptions: one lane, one transaction, every
// record checked), under a position at the full written first; progress,
// when set, is told the changes applied so far.
func restoreIncremental(ctx context.Context, conn *pgx.Conn, ch *chain.Chain, m *chain.Manifest, s *chain.Schema, progress func(int64)) error {
	const stream, owner, full = "restore:c", "run-1", "full-1"
	tgt := &Target{conn: conn, dsn: conn.Config().ConnString()}
	if err := tgt.State().EnsureControlTables(ctx); err != nil {
		return err
	}
	row, err := apply.Row(apply.Token{Engine: apply.EngineBroker, Stream: stream, ChainID: "c", LastApplied: full, Owner: owner})
	if err != nil {
		return err
	}
	if err := tgt.State().ReplaceState(ctx, stream, &row); err != nil {
		return err
	}
	o := apply.RestoreOptions(stream, owner, full, target.Subset{}, 0, "")
	o.Progress = progress
	_, err = apply.ApplyIncremental(ctx, ch, m, s, tgt, o)
	return err
}

// writeIncremental stores records as an incremental (chaintest.WriteIncremental).
func writeIncremental(t testing.TB, records []chain.Change, perChunk int) (*chain.Chain, *chain.Manifest) {
	t.Helper()
	return chaintest.WriteIncremental(t, records, perChunk)
}

func TestApplyIncremental(t *testing.T) {
	conn := targetDB(t, itemsDDL)
	fresh := &chain.Table{Schema: "public", Name: "tags", Columns: []chain.Column{notNull(col("id", "integer")), col("tag", "text")},
		PrimaryKey: []string{"id"}}
	var recs []chain.Change
	recs = append(recs, txn(10,
		ins("public.items", tv("1"), tv("a"), tv("note"), tv("1")),
		ins("public.items", tv("2"), tv("b"), null, tv("2")))...)
	recs = append(recs, txn(11,
		chain.Change{Op: chain.OpSchema, Table: "public.tags", Schema: fresh},
		ins("public.tags", tv("1"), tv("t")),
		upd("public.items", 0, nil, row(tv("1"), tv("A"), toast, tv("3"))))...)
	recs = append(recs, txn(12, del("public.items", 'K', row(tv("2"), null, null, null)))...)
	ch, m := writeIncremental(t, recs, 3)
	if len(m.Chunks) < 3 {
		t.Fatalf("want transactions spanning chunks, got %d chunks", len(m.Chunks))
	}

	var seen []int64
	if err := restoreIncremental(context.Background(), conn, ch, m, itemsSchema(), func(n int64) { seen = append(seen, n) }); err != nil {
		t.Fatal(err)
	}
	wantRows(t, conn, `SELECT id, name, note, n FROM public.items ORDER BY id`, "1|A|note|3")
	wantRows(t, conn, `SELECT id, tag FROM public.tags`, "1|t")
	if len(seen) == 0 || seen[len(seen)-1] != 6 {
		t.Fatalf("progress calls %v, want them to end at 6", seen)
	}
}

// A transaction failing mid-way rolls back the whole incremental, the
// transactions before it included.
func TestApplyIncrementalRollsBack(t *testing.T) {
	conn := targetDB(t, itemsDDL+`; ALTER TABLE public.items ADD CHECK (n > 0)`)
	var recs []chain.Change
	recs = append(recs, txn(10, ins("public.items", tv("1"), tv("a"), null, tv("1")))...)
	recs = append(recs, txn(11,
		ins("public.items", tv("2"), tv("b"), null, tv("2")),
		ins("public.items", tv("3"), tv("c"), null, tv("-3")),
		ins("public.items", tv("4"), tv("d"), null, tv("4")))...)
	ch, m := writeIncremental(t, recs, 100)
	err := restoreIncremental(context.Background(), conn, ch, m, itemsSchema(), nil)
	if err == nil || !strings.Contains(err.Error(), "xid 11, change 1") {
		t.Fatalf("err = %v", err)
	}
	wantRows(t, conn, `SELECT count(*) FROM public.items`, "0")
}

func TestApplyIncrementalRefusals(t *testing.T) {
	conn := targetDB(t, itemsDDL)
	good := append(txn(10, ins("public.items", tv("1"), tv("a"), null, tv("1"))), txn(11, ins("public.items", tv("2"), tv("b"), null, tv("2")))...)
	cases := []struct {
		name string
		recs []chain.Change
		edit func(ctx context.Context, ch *chain.Chain, m *chain.Manifest)
		code errcode.Code
		msg  string
	}{
		{name: "transaction count", recs: good, code: errcode.ManifestInvalid, msg: "2 transactions",
			edit: func(_ context.Context, _ *chain.Chain, m *chain.Manifest) { m.Transactions = 3 }},
		{name: "change count", recs: good, code: errcode.ManifestInvalid, msg: "2 changes",
			edit: func(_ context.Context, _ *chain.Chain, m *chain.Manifest) { m.Changes = 3 }},
		{name: "damaged chunk", recs: good, code: errcode.ChunkCorrupt, msg: "SHA-256",
			edit: func(ctx context.Context, ch *chain.Chain, m *chain.Manifest) {
				ref := m.Chunks[len(m.Chunks)-1]
				data, err := blobstore.ReadAll(ctx, ch.Store(), ref.Key)
				if err != nil {
					t.Fatal(err)
				}
				data[len(data)-1] ^= 0xff
				if err := ch.Store().Put(ctx, ref.Key, data); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "change outside a transaction", code: errcode.ChunkCorrupt, msg: "outside a transaction",
			recs: append(txn(10, ins("public.items", tv("1"), tv("a"), null, tv("1"))), ins("public.items", tv("2"), tv("b"), null, tv("2")))},
		{name: "unterminated transaction", code: errcode.ChunkCorrupt, msg: "ends inside source transaction 11",
			recs: append(txn(10, ins("public.items", tv("1"), tv("a"), null, tv("1"))), txn(11, ins("public.items", tv("2"), tv("b"), null, tv("2")))[:2]...)},
		{name: "nested begin", code: errcode.ChunkCorrupt, msg: "inside transaction 10",
			recs: append(txn(10, ins("public.items", tv("1"), tv("a"), null, tv("1")))[:2], txn(11)...)},
		{name: "ordinals", code: errcode.ChunkCorrupt, msg: "follows change",
			recs: func() []chain.Change {
				r := txn(10, ins("public.items", tv("1"), tv("a"), null, tv("1")), ins("public.items", tv("2"), tv("b"), null, tv("2")))
				r[2].Ordinal = 0
				return r
			}()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ch, m := writeIncremental(t, tc.recs, 4)
			if tc.edit != nil {
				tc.edit(ctx, ch, m)
			}
			err := restoreIncremental(ctx, conn, ch, m, itemsSchema(), nil)
			if !errcode.Is(err, tc.code) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %s mentioning %q", err, tc.code, tc.msg)
			}
			wantRows(t, conn, `SELECT count(*) FROM public.items`, "0")
		})
	}
}

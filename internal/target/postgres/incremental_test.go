package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
)

// txn frames row changes as one identified source transaction.
func txn(xid uint32, changes ...chain.Change) []chain.Change {
	out := []chain.Change{{Op: chain.OpBegin, XID: xid, CommitLSN: uint64(xid) * 100, Identified: true, CommitTime: 1}}
	for i, c := range changes {
		c.XID, c.CommitLSN, c.Ordinal, c.Identified = xid, uint64(xid)*100, uint32(i), true
		out = append(out, c)
	}
	return append(out, chain.Change{Op: chain.OpCommit, XID: xid, CommitLSN: uint64(xid) * 100, EndLSN: uint64(xid)*100 + 8, Identified: true, CommitTime: 1})
}

// writeIncremental stores records in a new file store as chunks of at most
// perChunk records and returns the chain and the stored manifest (counts
// taken from the records).
func writeIncremental(t testing.TB, records []chain.Change, perChunk int) (*chain.Chain, *chain.Manifest) {
	t.Helper()
	ctx := context.Background()
	store, err := blobstore.Open(ctx, "file://"+t.TempDir(), blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ch := chain.Open(store)
	b := chain.NewChangeBuilder()
	var refs []chain.ChunkRef
	flush := func() {
		if b.Records() == 0 {
			return
		}
		data, err := b.Encode()
		if err != nil {
			t.Fatal(err)
		}
		ref, err := ch.WriteChunk(ctx, chain.DataKey("attempt1", fmt.Sprintf("changes-%06d.chunk", len(refs))), data, b.Records(), int64(b.RawLen()))
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
		b.Reset()
	}
	var txns int64
	for i := range records {
		if err := b.Append(&records[i]); err != nil {
			t.Fatal(err)
		}
		if records[i].Op == chain.OpCommit {
			txns++
		}
		if int(b.Records()) >= perChunk {
			flush()
		}
	}
	flush()
	m := &chain.Manifest{
		Kind:          chain.KindIncremental,
		Parent:        strings.Repeat("ab", 20),
		Source:        chain.SourceInfo{Engine: "postgres", SystemID: "1", Database: "src"},
		StartPosition: "0/100",
		EndPosition:   "0/200",
		CreatedAt:     time.Unix(1700000000, 0),
		Chunks:        refs,
		// What ValidateManifest accepts, even for a stream whose framing is
		// broken on purpose (for well-framed ones it is the change count).
		Changes:       int64(len(records)) - 2*txns,
		Transactions:  txns,
		ApplyIdentity: true,
	}
	if err := ch.PutManifest(ctx, m); err != nil {
		t.Fatal(err)
	}
	got, err := ch.GetManifest(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	return ch, got
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
	s, err := ApplyIncremental(context.Background(), conn, ch, m, itemsSchema(), func(n int64) { seen = append(seen, n) })
	if err != nil {
		t.Fatal(err)
	}
	wantRows(t, conn, `SELECT id, name, note, n FROM public.items ORDER BY id`, "1|A|note|3")
	wantRows(t, conn, `SELECT id, tag FROM public.tags`, "1|t")
	if len(s.Tables) != 2 || s.Tables[1].QualifiedName() != "public.tags" {
		t.Fatalf("schema after the incremental: %+v", s.Tables)
	}
	if len(seen) != len(m.Chunks) || seen[len(seen)-1] != 6 {
		t.Fatalf("progress calls %v, want %d ending at 6", seen, len(m.Chunks))
	}
	wantRows(t, conn, `SELECT count(*) FROM pg_prepared_statements`, "0")
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
	_, err := ApplyIncremental(context.Background(), conn, ch, m, itemsSchema(), nil)
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
			_, err := ApplyIncremental(ctx, conn, ch, m, itemsSchema(), nil)
			if !errcode.Is(err, tc.code) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %s mentioning %q", err, tc.code, tc.msg)
			}
			wantRows(t, conn, `SELECT count(*) FROM public.items`, "0")
		})
	}
}

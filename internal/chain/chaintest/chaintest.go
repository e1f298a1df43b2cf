// Package chaintest builds small chains for tests of the packages that read
// them (the broker, restore, every target engine): identified source
// transactions and incrementals stored in a folder.
package chaintest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
)

// Txn frames row changes as one identified source transaction with the
// given XID (its commit LSN is xid*100), numbering their ordinals from 0.
func Txn(xid uint32, changes ...chain.Change) []chain.Change {
	out := []chain.Change{{Op: chain.OpBegin, XID: xid, CommitLSN: uint64(xid) * 100, Identified: true, CommitTime: 1}}
	for i, c := range changes {
		c.XID, c.CommitLSN, c.Ordinal, c.Identified = xid, uint64(xid)*100, uint32(i), true
		out = append(out, c)
	}
	return append(out, chain.Change{Op: chain.OpCommit, XID: xid, CommitLSN: uint64(xid) * 100, EndLSN: uint64(xid)*100 + 8, Identified: true, CommitTime: 1})
}

// Text returns a row image of text values; "\x00" stands for NULL.
func Text(values ...string) []chain.Value {
	out := make([]chain.Value, len(values))
	for i, v := range values {
		if v == "\x00" {
			out[i] = chain.Value{Kind: chain.ValueNull}
			continue
		}
		out[i] = chain.Value{Kind: chain.ValueText, Data: []byte(v)}
	}
	return out
}

// Store opens a new file store in a temporary folder of t.
func Store(t testing.TB) *chain.Chain {
	t.Helper()
	store, err := blobstore.Open(context.Background(), "file://"+t.TempDir(), blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return chain.Open(store)
}

// WriteIncremental stores records in a new file store as chunks of at most
// perChunk records and returns the chain and the stored manifest (counts
// taken from the records).
func WriteIncremental(t testing.TB, records []chain.Change, perChunk int) (*chain.Chain, *chain.Manifest) {
	t.Helper()
	ch := Store(t)
	return ch, AddIncremental(t, ch, records, perChunk)
}

// AddIncremental stores records as an incremental of ch (see WriteIncremental).
func AddIncremental(t testing.TB, ch *chain.Chain, records []chain.Change, perChunk int) *chain.Manifest {
	t.Helper()
	ctx := context.Background()
	b := chain.NewChangeBuilder()
	var refs []chain.ChunkRef
	attempt := fmt.Sprintf("attempt-%d", time.Now().UnixNano())
	flush := func() {
		if b.Records() == 0 {
			return
		}
		data, err := b.Encode()
		if err != nil {
			t.Fatal(err)
		}
		ref, err := ch.WriteChunk(ctx, chain.ChunkPlace{Key: chain.DataKey(attempt, fmt.Sprintf("changes-%06d.chunk", len(refs))), Ordinal: len(refs)}, data, b.Records(), int64(b.RawLen()))
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
	return got
}

// WriteFull stores rows of one table as row chunks of at most perChunk
// rows and returns the table's data, as a full backup records it.
func WriteFull(t testing.TB, ch *chain.Chain, tb *chain.Table, perChunk int, data [][][]byte) chain.TableData {
	t.Helper()
	ctx := context.Background()
	td := chain.TableData{Table: tb.QualifiedName()}
	b := chain.NewRowBuilder(td.Table, len(tb.SuppliedColumns()))
	flush := func() {
		if b.Rows() == 0 {
			return
		}
		enc, err := b.Encode()
		if err != nil {
			t.Fatal(err)
		}
		ref, err := ch.WriteChunk(ctx, chain.ChunkPlace{Key: chain.DataKey("full", fmt.Sprintf("%s-%04d.slck", td.Table, len(td.Chunks))), Table: td.Table, Ordinal: len(td.Chunks)}, enc, b.Rows(), int64(b.RawLen()))
		if err != nil {
			t.Fatal(err)
		}
		td.Chunks = append(td.Chunks, ref)
		td.Rows += ref.Rows
		b.Reset()
	}
	for _, r := range data {
		b.AppendRow(r)
		if int(b.Rows()) >= perChunk {
			flush()
		}
	}
	flush()
	return td
}

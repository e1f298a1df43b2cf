package chaintest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
)

// Builder commits a chain of several segments, link by link, with the real
// chain writer: fulls of one keyed table public.t (id int, v text) and
// incrementals of identified transactions, at positions and times that
// follow each other.
type Builder struct {
	t  testing.TB
	Ch *chain.Chain
	// Cat is the catalog after the last commit.
	Cat *chain.Catalog
	// Now is the time the next link records; each link advances it by Step.
	Now  time.Time
	Step time.Duration
	// PerChunk is how many records go into one change chunk (default 1000).
	PerChunk int
	lsn      uint64
	xid      uint32
	seq      int
}

// KeyedTable is the table Builder's fulls record.
func KeyedTable() chain.Table {
	return chain.Table{Schema: "public", Name: "t", PrimaryKey: []string{"id"}, Columns: []chain.Column{
		{Name: "id", Type: "integer", TypeOID: 23, NotNull: true, Encoding: chain.EncodingBinary},
		{Name: "v", Type: "text", TypeOID: 25, Encoding: chain.EncodingBinary},
	}}
}

// NewBuilder commits the first full of a new chain in ch.
func NewBuilder(t testing.TB, ch *chain.Chain, now time.Time) *Builder {
	t.Helper()
	b := &Builder{t: t, Ch: ch, Now: now, Step: time.Minute, lsn: 0x1000, xid: 1000}
	m := b.full("")
	b.Cat = chain.NewCatalog(m)
	if err := ch.CommitCatalog(context.Background(), b.Cat); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *Builder) attempt() string {
	b.seq++
	return fmt.Sprintf("builder-%04d", b.seq)
}

func (b *Builder) full(parent string) *chain.Manifest {
	b.t.Helper()
	ctx := context.Background()
	tb := KeyedTable()
	rb := chain.NewRowBuilder(tb.QualifiedName(), len(tb.Columns))
	rb.AppendRow([][]byte{be32(1), []byte("one")})
	data, err := rb.Encode()
	if err != nil {
		b.t.Fatal(err)
	}
	ref, err := b.Ch.WriteChunk(ctx, chain.ChunkPlace{Key: chain.DataKey(b.attempt(), "rows-0000.chunk"), Table: tb.QualifiedName()}, data, rb.Rows(), int64(rb.RawLen()))
	if err != nil {
		b.t.Fatal(err)
	}
	td := chain.TableData{Table: tb.QualifiedName(), Rows: ref.Rows, Chunks: []chain.ChunkRef{ref}}
	pos := chain.FormatLSN(b.lsn)
	m := &chain.Manifest{Kind: chain.KindFull, Parent: parent,
		Source:        chain.SourceInfo{Engine: "postgres", SystemID: "1", Database: "src"},
		StartPosition: pos, EndPosition: pos, CreatedAt: b.tick(),
		Schema: &chain.Schema{Tables: []chain.Table{tb}}, Tables: []chain.TableData{td}, Rows: td.Rows}
	if err := b.Ch.PutManifest(ctx, m); err != nil {
		b.t.Fatal(err)
	}
	return m
}

func (b *Builder) tick() time.Time {
	t := b.Now
	b.Now = b.Now.Add(b.Step)
	return t
}

// Txn returns one identified transaction of the given row changes on
// public.t at the builder's next positions (its ordinals numbered from 0).
func (b *Builder) Txn(changes ...chain.Change) []chain.Change {
	b.xid++
	begin := b.lsn + 1
	commit := b.lsn + uint64(len(changes)) + 2
	out := []chain.Change{{Op: chain.OpBegin, XID: b.xid, CommitLSN: commit, LSN: begin, Identified: true, CommitTime: 1}}
	for i, c := range changes {
		if c.Table == "" {
			c.Table = "public.t"
		}
		c.XID, c.CommitLSN, c.Ordinal, c.Identified, c.LSN = b.xid, commit, uint32(i), true, begin+1+uint64(i)
		out = append(out, c)
	}
	b.lsn = commit + 8
	return append(out, chain.Change{Op: chain.OpCommit, XID: b.xid, CommitLSN: commit, EndLSN: b.lsn, LSN: commit, Identified: true, CommitTime: 1})
}

// Incremental commits records (whole transactions, as Txn makes them) as
// the chain's next incremental and returns its manifest.
func (b *Builder) Incremental(records []chain.Change) *chain.Manifest {
	b.t.Helper()
	ctx := context.Background()
	tip := b.Cat.Tip()
	cb := chain.NewChangeBuilder()
	per := b.PerChunk
	if per <= 0 {
		per = 1000
	}
	a := b.attempt()
	var refs []chain.ChunkRef
	flush := func() {
		if cb.Records() == 0 {
			return
		}
		data, err := cb.Encode()
		if err != nil {
			b.t.Fatal(err)
		}
		ref, err := b.Ch.WriteChunk(ctx, chain.ChunkPlace{Key: chain.DataKey(a, fmt.Sprintf("changes-%06d.chunk", len(refs))), Ordinal: len(refs)}, data, cb.Records(), int64(cb.RawLen()))
		if err != nil {
			b.t.Fatal(err)
		}
		refs = append(refs, ref)
		cb.Reset()
	}
	var changes, txns int64
	for i := range records {
		if err := cb.Append(&records[i]); err != nil {
			b.t.Fatal(err)
		}
		switch records[i].Op {
		case chain.OpCommit:
			txns++
		case chain.OpBegin:
		default:
			changes++
		}
		if int(cb.Records()) >= per {
			flush()
		}
	}
	flush()
	end := chain.FormatLSN(b.lsn)
	m := &chain.Manifest{Kind: chain.KindIncremental, Parent: tip.ID, Source: b.Cat.Source,
		StartPosition: tip.EndPosition, EndPosition: end, CreatedAt: b.tick(),
		Chunks: refs, Changes: changes, Transactions: txns, ApplyIdentity: true}
	if err := b.Ch.PutManifest(ctx, m); err != nil {
		b.t.Fatal(err)
	}
	next := b.Cat.Next()
	if err := next.AppendIncremental(m); err != nil {
		b.t.Fatal(err)
	}
	b.commit(next)
	return m
}

// Rotate caps the last segment and commits a new one whose full follows
// the chain's tip.
func (b *Builder) Rotate() *chain.Manifest {
	b.t.Helper()
	m := b.full(b.Cat.Tip().ID)
	next := b.Cat.Next()
	if err := next.Rotate(m); err != nil {
		b.t.Fatal(err)
	}
	b.commit(next)
	return m
}

// Reload reads the latest catalog into Cat (after another writer committed).
func (b *Builder) Reload() {
	b.t.Helper()
	cat, err := b.Ch.LoadCatalog(context.Background())
	if err != nil {
		b.t.Fatal(err)
	}
	b.Cat = cat
}

func (b *Builder) commit(next *chain.Catalog) {
	b.t.Helper()
	if err := b.Ch.CommitCatalog(context.Background(), next); err != nil {
		b.t.Fatal(err)
	}
	b.Cat = next
}

// Insert is an insert of (id, v) into public.t.
func Insert(id int, v string) chain.Change {
	return chain.Change{Op: chain.OpInsert, Table: "public.t", New: Text(fmt.Sprint(id), v)}
}

// Update is an update of row id of public.t to v (no old image: the key
// did not change).
func Update(id int, v string) chain.Change {
	return chain.Change{Op: chain.OpUpdate, Table: "public.t", New: Text(fmt.Sprint(id), v)}
}

// Delete is a delete of row id of public.t, by a key-only old image.
func Delete(id int) chain.Change {
	return chain.Change{Op: chain.OpDelete, Table: "public.t", OldKind: 'K', Old: Text(fmt.Sprint(id), "\x00")}
}

func be32(n uint32) []byte { return []byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)} }

package chain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/errcode"
)

// countingStore counts the objects read through it.
type countingStore struct {
	blobstore.Store
	gets atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, key)
}

// sevChain builds a chain with the real writer: a first full at 0/1000,
// then whatever incrementals and rotations a test appends, each committed in
// its own catalog generation.
type sevChain struct {
	t   *testing.T
	ch  *Chain
	cat *Catalog
	n   int
}

func newSevChain(t *testing.T, st blobstore.Store) *sevChain {
	t.Helper()
	s := &sevChain{t: t, ch: Open(st)}
	s.cat = NewCatalog(putFull(t, s.ch, "", "0/1000", 0))
	if err := s.ch.CommitCatalog(context.Background(), s.cat); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *sevChain) commit(apply func(next *Catalog) error) {
	s.t.Helper()
	next := s.cat.Next()
	if err := apply(next); err != nil {
		s.t.Fatal(err)
	}
	if err := s.ch.CommitCatalog(context.Background(), next); err != nil {
		s.t.Fatal(err)
	}
	s.cat = next
}

// inc appends an incremental ending at end whose chunks hold the given
// records, one chunk per slice, and returns its ID.
func (s *sevChain) inc(end string, chunks ...[]Change) string {
	s.t.Helper()
	ctx := context.Background()
	s.n++
	var refs []ChunkRef
	var records, begins, commits int64
	for i, recs := range chunks {
		b := NewChangeBuilder()
		for j := range recs {
			if err := b.Append(&recs[j]); err != nil {
				s.t.Fatal(err)
			}
			switch recs[j].Op {
			case OpBegin:
				begins++
			case OpCommit:
				commits++
			}
		}
		records += b.Records()
		data, err := b.Encode()
		if err != nil {
			s.t.Fatal(err)
		}
		ref, err := s.ch.WriteChunk(ctx, ChunkPlace{Key: DataKey(fmt.Sprintf("sev-%d", s.n), fmt.Sprintf("changes-%06d.chunk", i))}, data, b.Records(), int64(b.RawLen()))
		if err != nil {
			s.t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	txs := min(begins, commits)
	tip := s.cat.Tip()
	m := &Manifest{
		Kind: KindIncremental, Parent: tip.ID, Source: testSource,
		StartPosition: tip.EndPosition, EndPosition: end,
		CreatedAt: testTime.Add(time.Duration(s.n) * time.Minute),
		Chunks:    refs, Changes: records - 2*txs, Transactions: txs, ApplyIdentity: true,
	}
	if err := s.ch.PutManifest(ctx, m); err != nil {
		s.t.Fatal(err)
	}
	s.commit(func(next *Catalog) error { return next.AppendIncremental(m) })
	return m.ID
}

// rotate caps the segment with a new full anchored at pos.
func (s *sevChain) rotate(pos string) string {
	s.t.Helper()
	s.n++
	full := putFull(s.t, s.ch, s.cat.Tip().ID, pos, 1000+s.n)
	s.commit(func(next *Catalog) error { return next.Rotate(full) })
	return full.ID
}

func (s *sevChain) check(cache *SeverCache) []Finding {
	s.t.Helper()
	if err := s.ch.Verify(context.Background(), s.cat, ""); err != nil {
		s.t.Fatal(err)
	}
	f, err := s.ch.SeveredTransactions(context.Background(), s.cat, cache)
	if err != nil {
		s.t.Fatal(err)
	}
	return f
}

// Records of transaction xid committing at commit; it ends at commit+0x30.
func beginRec(xid uint32, commit uint64) Change {
	return Change{Op: OpBegin, XID: xid, CommitLSN: commit, LSN: commit - 0x40, CommitTime: 1_700_000_000_000_000, Identified: true}
}

func rowRec(xid uint32, commit uint64, ord uint32) Change {
	return Change{Op: OpInsert, XID: xid, CommitLSN: commit, Ordinal: ord, LSN: commit - 0x20 + uint64(ord),
		Table: "public.sample", New: []Value{{Kind: ValueText, Data: []byte(fmt.Sprint(xid, ord))}}, Identified: true}
}

func commitRec(xid uint32, commit uint64) Change {
	return Change{Op: OpCommit, XID: xid, CommitLSN: commit, LSN: commit, CommitTime: 1_700_000_000_000_000, EndLSN: commit + 0x30, Identified: true}
}

func txn(xid uint32, commit uint64) []Change {
	return []Change{beginRec(xid, commit), rowRec(xid, commit, 0), rowRec(xid, commit, 1), commitRec(xid, commit)}
}

func endOf(commit uint64) string { return FormatLSN(commit + 0x30) }

func joinRecs(parts ...[]Change) []Change {
	var out []Change
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func wantFindings(t *testing.T, got []Finding, want ...Finding) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d findings, want %d:\n%s", len(got), len(want), findingLines(got))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Shape != w.Shape || !reflect.DeepEqual(g.Links, w.Links) || g.XID != w.XID || g.CommitLSN != w.CommitLSN {
			t.Errorf("finding %d:\n got %s\nwant shape %s links %v xid %d commit %s", i, g, w.Shape, w.Links, w.XID, FormatLSN(w.CommitLSN))
		}
		if g.Detail == "" {
			t.Errorf("finding %d has no detail", i)
		}
	}
}

func findingLines(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("  " + f.String() + "\n")
	}
	return b.String()
}

func TestSeveredCleanChainWithRotation(t *testing.T) {
	s := newSevChain(t, newMemStore())
	s.inc(endOf(0x1100), txn(100, 0x1100))
	// A transaction spread over two chunks of one incremental is fine.
	tx := txn(101, 0x1200)
	s.inc(endOf(0x1300), tx[:2], joinRecs(tx[2:], txn(102, 0x1300)))
	// An incremental without records ends where it starts.
	s.inc(endOf(0x1300))
	s.rotate("0/2000")
	s.inc(endOf(0x2180), txn(103, 0x2100), txn(104, 0x2180))
	s.inc(endOf(0x2200), txn(105, 0x2200))
	// Transactions without a commit LSN cannot be ordered: two equal
	// identities carrying none are not judged.
	s.inc("0/2400", []Change{
		{Op: OpBegin, XID: 7}, rowRec(7, 0, 0), {Op: OpCommit, XID: 7, EndLSN: 0x2400},
	})
	s.inc("0/2500", []Change{
		{Op: OpBegin, XID: 7}, rowRec(7, 0, 0), {Op: OpCommit, XID: 7, EndLSN: 0x2500},
	})
	if got := s.check(nil); len(got) != 0 {
		t.Fatalf("clean chain has findings:\n%s", findingLines(got))
	}
}

func TestSeveredShapeASplitAcrossTwo(t *testing.T) {
	s := newSevChain(t, newMemStore())
	first := s.inc(endOf(0x1100), joinRecs(txn(100, 0x1100), []Change{beginRec(101, 0x1200), rowRec(101, 0x1200, 0)}))
	second := s.inc(endOf(0x1300), joinRecs([]Change{rowRec(101, 0x1200, 1), commitRec(101, 0x1200)}, txn(102, 0x1300)))
	s.inc(endOf(0x1400), txn(103, 0x1400))
	got := s.check(nil)
	wantFindings(t, got, Finding{Shape: ShapeSplit, Links: []string{first, second}, XID: 101, CommitLSN: 0x1200})
	if got[0].Code() != errcode.ChainSeveredTransaction {
		t.Errorf("code %s", got[0].Code())
	}
	line := got[0].String()
	for _, want := range []string{"shape A", first, second, "xid 101", "0/1200"} {
		if !strings.Contains(line, want) {
			t.Errorf("%q lacks %q", line, want)
		}
	}
}

func TestSeveredShapeAEndsInside(t *testing.T) {
	// The open transaction's records fill the last chunk: its last Commit
	// is found in an earlier chunk, so shape C is judged correctly.
	s := newSevChain(t, newMemStore())
	tip := s.inc(endOf(0x1100), txn(100, 0x1100), []Change{beginRec(101, 0x1200)}, []Change{rowRec(101, 0x1200, 0)})
	wantFindings(t, s.check(nil), Finding{Shape: ShapeSplit, Links: []string{tip}, XID: 101, CommitLSN: 0x1200})
}

func TestSeveredShapeABeginsInside(t *testing.T) {
	s := newSevChain(t, newMemStore())
	s.inc(endOf(0x1100), txn(100, 0x1100))
	second := s.inc(endOf(0x1300), joinRecs([]Change{rowRec(101, 0x1200, 3), commitRec(101, 0x1200)}, txn(102, 0x1300)))
	// The chain's first incremental may not begin inside one either.
	s2 := newSevChain(t, newMemStore())
	only := s2.inc(endOf(0x1200), []Change{commitRec(101, 0x1200)})
	wantFindings(t, s.check(nil), Finding{Shape: ShapeSplit, Links: []string{second}, XID: 101, CommitLSN: 0x1200})
	wantFindings(t, s2.check(nil), Finding{Shape: ShapeSplit, Links: []string{only}, XID: 101, CommitLSN: 0x1200})
}

func TestSeveredShapeAOpenTransactionDeliveredAgain(t *testing.T) {
	s := newSevChain(t, newMemStore())
	first := s.inc(endOf(0x1100), joinRecs(txn(100, 0x1100), []Change{beginRec(101, 0x1200), rowRec(101, 0x1200, 0)}))
	second := s.inc(endOf(0x1200), txn(101, 0x1200))
	wantFindings(t, s.check(nil), Finding{Shape: ShapeSplit, Links: []string{first, second}, XID: 101, CommitLSN: 0x1200})
}

func TestSeveredShapeB(t *testing.T) {
	s := newSevChain(t, newMemStore())
	first := s.inc(endOf(0x1200), txn(100, 0x1100), txn(101, 0x1200))
	second := s.inc(endOf(0x1300), joinRecs(txn(101, 0x1200), txn(102, 0x1300)))
	got := s.check(nil)
	wantFindings(t, got, Finding{Shape: ShapeRedelivered, Links: []string{first, second}, XID: 101, CommitLSN: 0x1200})
	if got[0].Code() != errcode.ChainSeveredTransaction {
		t.Errorf("code %s", got[0].Code())
	}
}

func TestSeveredShapeBAcrossRotation(t *testing.T) {
	// A rotation's closing incremental is followed by the next segment's
	// first incremental: the full between them is skipped.
	s := newSevChain(t, newMemStore())
	closing := s.inc(endOf(0x1100), txn(100, 0x1100))
	s.rotate("0/2000")
	next := s.inc(endOf(0x2100), joinRecs(txn(100, 0x1100), txn(101, 0x2100)))
	got := s.check(nil)
	wantFindings(t, got, Finding{Shape: ShapeRedelivered, Links: []string{closing, next}, XID: 100, CommitLSN: 0x1100})
	if !got[0].Involves(next) || got[0].Involves(s.cat.Tip().ID+"x") {
		t.Errorf("Involves is wrong for %s", got[0])
	}
}

func TestSeveredShapeC(t *testing.T) {
	s := newSevChain(t, newMemStore())
	past := s.inc("0/1400", txn(100, 0x1100))                     // last Commit ends at 0/1130
	before := s.inc("0/1480", txn(101, 0x1480), txn(102, 0x1500)) // ends at 0/1530
	empty := s.inc("0/1600")                                      // no records, yet moves on
	s.inc("0/1600")                                               // no records, stays: clean
	got := s.check(nil)
	wantFindings(t, got,
		Finding{Shape: ShapeIncomplete, Links: []string{past}, XID: 100, CommitLSN: 0x1100},
		Finding{Shape: ShapeIncomplete, Links: []string{before}, XID: 102, CommitLSN: 0x1500},
		Finding{Shape: ShapeIncomplete, Links: []string{empty}},
	)
	for _, f := range got {
		if f.Code() != errcode.BackupIncomplete {
			t.Errorf("%s: code %s", f, f.Code())
		}
	}
	if !strings.Contains(got[0].Detail, "past") || !strings.Contains(got[2].Detail, "no complete transaction") {
		t.Errorf("details do not say what is wrong:\n%s", findingLines(got))
	}
	var e *errcode.Error
	if err := got[2].Err(); !errors.As(err, &e) || e.Code != errcode.BackupIncomplete || !strings.Contains(e.Message, empty) {
		t.Errorf("Err() = %v", err)
	}
}

func TestSeveredCacheReadsEachIncrementalOnce(t *testing.T) {
	st := &countingStore{Store: newMemStore()}
	s := newSevChain(t, st)
	s.inc(endOf(0x1100), txn(100, 0x1100))
	tx := txn(101, 0x1200)
	s.inc(endOf(0x1300), tx[:2], []Change{tx[2]}, joinRecs(tx[3:], txn(102, 0x1300)))
	s.rotate("0/2000")
	s.inc(endOf(0x2100), txn(103, 0x2100))
	ctx := context.Background()
	cache := NewSeverCache()

	st.gets.Store(0)
	if f, err := s.ch.SeveredTransactions(ctx, s.cat, cache); err != nil || len(f) != 0 {
		t.Fatalf("first check: %v %v", f, err)
	}
	// Three manifests; the first and last chunk of each incremental (the
	// middle chunk of the second is never read).
	if n := st.gets.Load(); n != 3+1+2+1 {
		t.Errorf("first check read %d objects, want 7", n)
	}

	st.gets.Store(0)
	if f, err := s.ch.SeveredTransactions(ctx, s.cat, cache); err != nil || len(f) != 0 {
		t.Fatalf("second check: %v %v", f, err)
	}
	if n := st.gets.Load(); n != 0 {
		t.Errorf("second check read %d objects, want none", n)
	}

	// A new link is the only one read; its damage is still found.
	last := s.cat.Tip().ID
	bad := s.inc(endOf(0x2200), txn(103, 0x2100))
	st.gets.Store(0)
	f, err := s.ch.SeveredTransactions(ctx, s.cat, cache)
	if err != nil {
		t.Fatal(err)
	}
	wantFindings(t, f, Finding{Shape: ShapeRedelivered, Links: []string{last, bad}, XID: 103, CommitLSN: 0x2100},
		Finding{Shape: ShapeIncomplete, Links: []string{bad}, XID: 103, CommitLSN: 0x2100})
	if n := st.gets.Load(); n != 2 {
		t.Errorf("third check read %d objects, want 2 (one manifest, one chunk)", n)
	}

	// Concurrent checks share the cache safely.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := s.ch.SeveredTransactions(ctx, s.cat, cache); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

func TestSeveredDamagedChunkIsCoded(t *testing.T) {
	st := newMemStore()
	s := newSevChain(t, st)
	s.inc(endOf(0x1100), txn(100, 0x1100))
	m, err := s.ch.GetManifest(context.Background(), s.cat.Tip().ID)
	if err != nil {
		t.Fatal(err)
	}
	key := m.Chunks[0].Key
	data := append([]byte(nil), st.raw(key)...)
	data[len(data)-1] ^= 0x01
	st.set(key, data)
	cache := NewSeverCache()
	_, err = s.ch.SeveredTransactions(context.Background(), s.cat, cache)
	if e, ok := errcode.As(err); !ok || e.Code != errcode.ChunkCorrupt || !strings.Contains(err.Error(), key) {
		t.Fatalf("want SLUICE-E-CHUNK-CORRUPT naming %s, got %v", key, err)
	}
	// A failed read is not remembered.
	if _, ok := cache.get(m.ID); ok {
		t.Fatal("the cache kept facts of an unreadable incremental")
	}
	st.Delete(context.Background(), ManifestKey(m.ID))
	_, err = s.ch.SeveredTransactions(context.Background(), s.cat, cache)
	if e, ok := errcode.As(err); !ok || e.Code != errcode.ManifestInvalid {
		t.Fatalf("want SLUICE-E-MANIFEST-INVALID for a missing manifest, got %v", err)
	}
}

package apply

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/compact"
	"github.com/sluicehq/sluice/internal/errcode"
)

// compactedChain is a capped segment whose second incremental holds ten
// transactions of three changes, in chunks of five records, then an open
// segment.
func compactedChain(t *testing.T) (*chain.Chain, *chaintest.Builder, string) {
	t.Helper()
	ch := chaintest.Store(t)
	b := chaintest.NewBuilder(t, ch, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	b.PerChunk = 5
	b.Incremental(b.Txn(chaintest.Insert(1000, "first")))
	var recs []chain.Change
	for x := 0; x < 10; x++ {
		recs = append(recs, b.Txn(chaintest.Insert(x*3, "a"), chaintest.Insert(x*3+1, "b"), chaintest.Insert(x*3+2, "c"))...)
	}
	big := b.Incremental(recs).ID
	b.Rotate()
	return ch, b, big
}

// requireEachOnce checks that the changes of the incremental's ten
// transactions were committed exactly once each.
func requireEachOnce(t *testing.T, f *fakeTarget) {
	t.Helper()
	seen := map[[2]uint32]int{}
	for _, a := range f.committed {
		seen[[2]uint32{a.xid, a.ordinal}]++
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("change %d of transaction %d committed %d times", k[1], k[0], n)
		}
	}
	if len(f.committed) != 30 || len(seen) != 30 {
		t.Errorf("%d changes committed (%d distinct), want 30", len(f.committed), len(seen))
	}
}

// A broker stopped inside an incremental that a plain compaction then
// moved into merged chunks resumes where it was, exactly once: the
// position's digest is that of the records, which the compaction kept.
func TestResumeInsideAPlainCompactedIncremental(t *testing.T) {
	ctx := context.Background()
	ch, b, big := compactedChain(t)
	first := b.Cat.Segments[0].Incrementals[0].ID
	m, err := ch.LinkManifest(ctx, b.Cat, big)
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeTarget()
	startAt(t, f, first, "run-1")
	f.failAt = 17
	o := Options{Stream: "s", Owner: "run-1", Lanes: 1, ExpectedLast: first, CheckpointChanges: 4}
	if _, err := ApplyIncremental(ctx, ch, m, testSchema(), f, o); !errors.Is(err, errCrash) {
		t.Fatalf("first run: %v", err)
	}
	if tok := f.token("s"); tok.InProgress == nil || tok.InProgress.AppliedThrough == 0 {
		t.Fatalf("no position inside the incremental: %+v", tok)
	}

	if _, err := compact.Compact(ctx, ch, compact.Options{ChunkBytes: 300, Now: func() time.Time { return b.Now }}); err != nil {
		t.Fatal(err)
	}
	cat, _ := ch.LoadCatalog(ctx)
	m, err = ch.LinkManifest(ctx, cat, big)
	if err != nil {
		t.Fatal(err)
	}
	if m.Chunks[0].Span == nil {
		t.Fatal("the incremental is not read through the layout")
	}
	f.failAt = 0
	if err := Claim(ctx, f.State(), "s", "run-2"); err != nil {
		t.Fatal(err)
	}
	o.Owner = "run-2"
	res, err := ApplyIncremental(ctx, ch, m, testSchema(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Resumed || res.Skipped == 0 {
		t.Errorf("result %+v, want a resume inside the incremental", res)
	}
	requireEachOnce(t, f)
	if tok := f.token("s"); tok.LastApplied != big || tok.InProgress != nil {
		t.Errorf("position %+v, want past %s", tok, big)
	}
}

// A smart compaction rewrote the incremental the broker is inside: the skip
// would count over other records, so the resume is refused before anything
// is applied.
func TestResumeInsideASmartCompactedIncrementalRefuses(t *testing.T) {
	ctx := context.Background()
	ch, b, big := compactedChain(t)
	first := b.Cat.Segments[0].Incrementals[0].ID
	m, _ := ch.LinkManifest(ctx, b.Cat, big)
	f := newFakeTarget()
	startAt(t, f, first, "run-1")
	f.failAt = 17
	o := Options{Stream: "s", Owner: "run-1", Lanes: 1, ExpectedLast: first, CheckpointChanges: 4}
	if _, err := ApplyIncremental(ctx, ch, m, testSchema(), f, o); !errors.Is(err, errCrash) {
		t.Fatalf("first run: %v", err)
	}
	committed := len(f.committed)
	if _, err := compact.Compact(ctx, ch, compact.Options{Smart: true, Now: func() time.Time { return b.Now }}); err != nil {
		t.Fatal(err)
	}
	cat, _ := ch.LoadCatalog(ctx)
	m, _ = ch.LinkManifest(ctx, cat, big)
	f.failAt = 0
	if err := Claim(ctx, f.State(), "s", "run-2"); err != nil {
		t.Fatal(err)
	}
	o.Owner = "run-2"
	_, err := ApplyIncremental(ctx, ch, m, testSchema(), f, o)
	if !errcode.Is(err, errcode.BrokerIncrementalRewritten) {
		t.Fatalf("want SLUICE-E-BROKER-INCREMENTAL-REWRITTEN, got %v", err)
	}
	if len(f.committed) != committed {
		t.Fatalf("the refused resume applied %d changes", len(f.committed)-committed)
	}
}

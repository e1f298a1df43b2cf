package producer

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/source"
)

// options are a producer step's options on src; each attempt names its own
// data folder. A chunk size of one byte cuts a chunk after every record, so
// a window of a few records spans several chunks.
func options(src source.Source, attempt string) Options {
	return Options{Source: src, AttemptID: attempt, ChunkBytes: 1, Owner: "producer/test"}
}

func insert(table string, values ...string) chain.Change {
	return chain.Change{Op: chain.OpInsert, Table: table, New: chaintest.Text(values...)}
}

// records joins transactions' records into one stream.
func records(txns ...[]chain.Change) []chain.Change {
	var out []chain.Change
	for _, t := range txns {
		out = append(out, t...)
	}
	return out
}

// describe renders a record by what a target needs of it.
func describe(c *chain.Change) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%c xid=%d ord=%d commit=%d end=%d %s", c.Op, c.XID, c.Ordinal, c.CommitLSN, c.EndLSN, c.Table)
	for _, v := range c.New {
		fmt.Fprintf(&b, " %c:%s", v.Kind, v.Data)
	}
	if len(c.Old) > 0 {
		fmt.Fprintf(&b, " old(%c)", c.OldKind)
		for _, v := range c.Old {
			fmt.Fprintf(&b, " %c:%s", v.Kind, v.Data)
		}
	}
	return b.String()
}

func describeAll(recs []chain.Change) []string {
	out := make([]string, len(recs))
	for i := range recs {
		out[i] = describe(&recs[i])
	}
	return out
}

// storedRecords reads back every record of incremental id, in order.
func storedRecords(t *testing.T, ch *chain.Chain, id string) (*chain.Manifest, []string) {
	t.Helper()
	ctx := context.Background()
	m, err := ch.GetManifest(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ref := range m.Chunks {
		it, err := ch.ReadChangeChunk(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		for it.Next() {
			out = append(out, describe(it.Change()))
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return m, out
}

func loadCatalog(t *testing.T, ch *chain.Chain) *chain.Catalog {
	t.Helper()
	cat, err := ch.LoadCatalog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// dataKeys lists the objects under an attempt's data folder.
func dataKeys(t *testing.T, ch *chain.Chain, attempt string) []string {
	t.Helper()
	infos, err := ch.Store().List(context.Background(), chain.DataKey(attempt, ""))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range infos {
		keys = append(keys, o.Key)
	}
	return keys
}

func TestWindowCommitsTheCapturedTransactionsOnTheTip(t *testing.T) {
	ctx := context.Background()
	ch, full := newChain(t)
	first := records(
		chaintest.Txn(7, insert("public.t", "1", "a"), insert("public.t", "2", "\x00")),
		chaintest.Txn(8, chain.Change{Op: chain.OpDelete, Table: "public.t", OldKind: 'K', Old: chaintest.Text("1")}),
	)
	second := records(chaintest.Txn(9, insert("public.u", "3")))
	src := newFakeSource(t, ch, fakeWindow{records: first, end: "0/300"}, fakeWindow{records: second, end: "0/400"})

	res, err := Window(ctx, ch, options(src, "attempt-1"), source.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Committed || res.Start != full.EndPosition || res.End != "0/300" || res.Transactions != 2 || res.Changes != 3 {
		t.Fatalf("first window: %+v", res)
	}
	if res.SegmentLength != 1 || res.Links != 2 || res.Slot != src.health || res.StoredBytes <= 0 {
		t.Errorf("first window's counts and log health: %+v", res)
	}
	if len(src.opened) != 1 || src.opened[0].Start != full.EndPosition || src.opened[0].Source != fakeInfo ||
		src.opened[0].Schema == nil || src.opened[0].Owner != "producer/test" {
		t.Errorf("capture opened with %+v, want the tip's end %s and the chain's source", src.opened, full.EndPosition)
	}
	cat := loadCatalog(t, ch)
	if cat.Tip().ID != res.LinkID || cat.Generation != 2 {
		t.Fatalf("catalog generation %d tip %s, want generation 2 naming %s", cat.Generation, cat.Tip().ID, res.LinkID)
	}
	m, got := storedRecords(t, ch, res.LinkID)
	if m.Kind != chain.KindIncremental || m.Parent != full.ID || m.StartPosition != full.EndPosition || m.EndPosition != "0/300" ||
		m.Transactions != 2 || m.Changes != 3 || !m.ApplyIdentity || m.Source != fakeInfo {
		t.Errorf("manifest %+v: want the full as parent and its end as start", m)
	}
	if len(m.Chunks) < 2 {
		t.Errorf("%d chunks; a one-byte chunk size cuts one per record", len(m.Chunks))
	}
	if want := describeAll(first); !reflect.DeepEqual(got, want) {
		t.Errorf("stored records:\n%s\nwant what the capture gave:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The next window starts where the first ended, from whatever the
	// catalog names.
	res2, err := Window(ctx, ch, options(src, "attempt-2"), source.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(src.opened) != 2 || src.opened[1].Start != "0/300" {
		t.Fatalf("second capture opened at %+v, want the first window's end 0/300", src.opened)
	}
	m2, got2 := storedRecords(t, ch, res2.LinkID)
	if m2.Parent != res.LinkID || m2.StartPosition != m.EndPosition || m2.EndPosition != "0/400" || res2.SegmentLength != 2 || res2.Links != 3 {
		t.Errorf("second incremental parent %s start %s end %s (segment %d, links %d), want parent %s start %s",
			m2.Parent, m2.StartPosition, m2.EndPosition, res2.SegmentLength, res2.Links, res.LinkID, m.EndPosition)
	}
	if want := describeAll(second); !reflect.DeepEqual(got2, want) {
		t.Errorf("second window's records %q, want %q", got2, want)
	}
	if n := src.closed.Load(); n != 2 {
		t.Errorf("%d captures closed, want 2", n)
	}
}

func TestWindowConfirmsTheCaptureOnlyOnceTheCatalogNamesIt(t *testing.T) {
	ctx := context.Background()
	ch, _ := newChain(t)
	src := newFakeSource(t, ch,
		fakeWindow{records: chaintest.Txn(7, insert("public.t", "1")), end: "0/300"},
		fakeWindow{records: chaintest.Txn(8, insert("public.t", "2")), end: "0/380"})
	for _, attempt := range []string{"attempt-1", "attempt-2"} {
		if _, err := Window(ctx, ch, options(src, attempt), source.Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	want := []confirmation{{pos: "0/300", tipEnd: "0/300", generation: 2}, {pos: "0/380", tipEnd: "0/380", generation: 3}}
	if !reflect.DeepEqual(src.confirms, want) {
		t.Errorf("confirmations %+v, want each window's end confirmed once the committed catalog's tip ends there: %+v", src.confirms, want)
	}
}

func TestEmptyWindowCommitsAndConfirmsNothing(t *testing.T) {
	ctx := context.Background()
	ch, full := newChain(t)
	// A quiet window: nothing delivered; the capture itself confirms what
	// the source's keepalives showed, so the producer has nothing to confirm.
	src := newFakeSource(t, ch, fakeWindow{})
	src.health.RetainedBytes = 123
	res, err := Window(ctx, ch, options(src, "attempt-1"), source.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Committed || res.LinkID != "" || res.Transactions != 0 || res.SegmentLength != 0 || res.Links != 1 || res.Slot != src.health {
		t.Errorf("empty window: %+v", res)
	}
	if cat := loadCatalog(t, ch); cat.Generation != 1 || cat.Tip().ID != full.ID {
		t.Errorf("catalog generation %d tip %s after an empty window, want generation 1 at the full", cat.Generation, cat.Tip().ID)
	}
	if keys := dataKeys(t, ch, "attempt-1"); len(keys) != 0 {
		t.Errorf("an empty window stored %v", keys)
	}
	if len(src.confirms) != 0 {
		t.Errorf("an empty window confirmed %+v", src.confirms)
	}
}

func TestUpToNowEndsTheWindowAtTheSourcePositionWhenItStarts(t *testing.T) {
	ch, _ := newChain(t)
	src := newFakeSource(t, ch, fakeWindow{})
	if _, err := Window(context.Background(), ch, options(src, "attempt-1"), source.Limits{Until: "now"}); err != nil {
		t.Fatal(err)
	}
	if len(src.limits) != 1 || src.limits[0].Until != "0/ffff" {
		t.Errorf("window limits %+v, want Until the capture's current position 0/ffff", src.limits)
	}
}

func TestRotateAfterTheSegmentLengthCapsItWithAClosingIncremental(t *testing.T) {
	ctx := context.Background()
	ch, full := newChain(t)
	const segmentLength = 3
	var windows []fakeWindow
	for i := range segmentLength {
		windows = append(windows, fakeWindow{records: chaintest.Txn(uint32(10+i), insert("public.t", fmt.Sprint(i))), end: fmt.Sprintf("0/%d00", 3+i)})
	}
	closing := chaintest.Txn(20, insert("public.t", "last"))
	windows = append(windows,
		fakeWindow{records: closing, end: "0/880", before: "0/900"},
		fakeWindow{records: chaintest.Txn(21, insert("public.t", "next")), end: "0/950"})
	src := newFakeSource(t, ch, windows...)
	src.rotation = fullAt("0/900")

	for i := range segmentLength {
		res, err := Window(ctx, ch, options(src, fmt.Sprintf("window-%d", i)), source.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if res.SegmentLength != i+1 {
			t.Fatalf("window %d: segment length %d, want %d", i, res.SegmentLength, i+1)
		}
	}
	before := loadCatalog(t, ch)
	oldTip := before.Tip()

	res, err := Rotate(ctx, ch, options(src, "rotate"))
	if err != nil {
		t.Fatal(err)
	}
	cat := loadCatalog(t, ch)
	if cat.Generation != before.Generation+1 || len(cat.Segments) != 2 {
		t.Fatalf("rotation: generation %d with %d segments, want %d with 2", cat.Generation, len(cat.Segments), before.Generation+1)
	}
	old, seg := cat.Segments[0], cat.Segments[1]
	if !old.Capped || old.Full.ID != full.ID || len(old.Incrementals) != segmentLength+1 {
		t.Fatalf("old segment capped=%t with %d incrementals, want capped with %d", old.Capped, len(old.Incrementals), segmentLength+1)
	}
	last := old.Incrementals[segmentLength]
	if last.Parent != oldTip.ID || last.StartPosition != oldTip.EndPosition || last.EndPosition != "0/880" {
		t.Errorf("closing incremental %+v, want it on the old tip %s ending at 0/880", last, oldTip.ID)
	}
	if _, got := storedRecords(t, ch, last.ID); !reflect.DeepEqual(got, describeAll(closing)) {
		t.Errorf("closing incremental's records %q, want %q", got, describeAll(closing))
	}
	if seg.Capped || seg.Full.ID != res.LinkID || seg.Full.Parent != last.ID || seg.Full.EndPosition != "0/900" || len(seg.Incrementals) != 0 {
		t.Errorf("new segment %+v, want the rotation full %s after the closing incremental", seg, res.LinkID)
	}
	if !res.Committed || res.SegmentLength != 0 || res.Links != segmentLength+3 || res.Start != "0/900" || res.End != "0/900" || res.Transactions != 1 {
		t.Errorf("rotation result %+v", res)
	}
	if n := len(src.confirms); n == 0 || src.confirms[n-1] != (confirmation{pos: "0/880", tipEnd: "0/900", generation: cat.Generation}) {
		t.Errorf("confirmations %+v: want the closing window's end confirmed after the rotation's catalog write", src.confirms)
	}
	if src.rotationCleaned != 0 {
		t.Errorf("a committed rotation's full was cleaned up")
	}

	// The next window feeds the new segment from the new full's anchor.
	next, err := Window(ctx, ch, options(src, "after"), source.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if o := src.opened[len(src.opened)-1]; o.Start != "0/900" || next.SegmentLength != 1 || next.Start != "0/900" {
		t.Errorf("window after the rotation opened at %s: %+v", o.Start, next)
	}
}

func TestRotateWithAQuietClosingWindowChainsTheFullOnTheOldTip(t *testing.T) {
	ctx := context.Background()
	ch, full := newChain(t)
	src := newFakeSource(t, ch, fakeWindow{before: "0/900"})
	src.rotation = fullAt("0/900")
	res, err := Rotate(ctx, ch, options(src, "rotate"))
	if err != nil {
		t.Fatal(err)
	}
	cat := loadCatalog(t, ch)
	if len(cat.Segments) != 2 || len(cat.Segments[0].Incrementals) != 0 || cat.Segments[1].Full.Parent != full.ID || cat.Segments[1].Full.ID != res.LinkID {
		t.Fatalf("segments %+v, want the rotation full right after the first full", cat.Segments)
	}
	want := []confirmation{{pos: full.EndPosition, tipEnd: "0/900", generation: 2}}
	if !reflect.DeepEqual(src.confirms, want) {
		t.Errorf("confirmations %+v, want %+v", src.confirms, want)
	}
}

func TestLosingTheCatalogWriteConfirmsNothing(t *testing.T) {
	ctx := context.Background()
	ch, _ := newChain(t)
	// While this producer's window is open, another producer on the same
	// chain commits a window of its own first.
	rival := newFakeSource(t, ch, fakeWindow{records: chaintest.Txn(8, insert("public.t", "rival")), end: "0/250"})
	var rivalLink string
	src := newFakeSource(t, ch, fakeWindow{records: chaintest.Txn(7, insert("public.t", "mine")), end: "0/300", after: func() {
		res, err := Window(ctx, ch, options(rival, "rival"), source.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		rivalLink = res.LinkID
	}})
	res, err := Window(ctx, ch, options(src, "loser"), source.Limits{})
	if !errcode.Is(err, errcode.CatalogConflict) {
		t.Fatalf("the losing window returned %+v, %v; want SLUICE-E-CATALOG-CONFLICT", res, err)
	}
	if res.Committed {
		t.Errorf("the losing window reports a commit: %+v", res)
	}
	if len(src.confirms) != 0 {
		t.Errorf("the losing producer confirmed %+v", src.confirms)
	}
	if cat := loadCatalog(t, ch); cat.Generation != 2 || cat.Tip().ID != rivalLink {
		t.Errorf("catalog generation %d tip %s, want the rival's window %s", cat.Generation, cat.Tip().ID, rivalLink)
	}
	if keys := dataKeys(t, ch, "loser"); len(keys) != 0 {
		t.Errorf("the losing window left %v in the store", keys)
	}

	// A rotation that loses its catalog write confirms nothing either, and
	// deletes its full's chunks.
	src = newFakeSource(t, ch, fakeWindow{records: chaintest.Txn(9, insert("public.t", "closing")), end: "0/280", before: "0/900", after: func() {
		rival.windows = []fakeWindow{{records: chaintest.Txn(10, insert("public.t", "rival")), end: "0/270"}}
		if _, err := Window(ctx, ch, options(rival, "rival-2"), source.Limits{}); err != nil {
			t.Fatal(err)
		}
	}})
	src.rotation = fullAt("0/900")
	if _, err := Rotate(ctx, ch, options(src, "rotate")); !errcode.Is(err, errcode.CatalogConflict) {
		t.Fatalf("the losing rotation: %v, want SLUICE-E-CATALOG-CONFLICT", err)
	}
	if len(src.confirms) != 0 || src.rotationCleaned != 1 {
		t.Errorf("the losing rotation confirmed %+v and cleaned its full %d times; want no confirmation and one cleanup", src.confirms, src.rotationCleaned)
	}
	if keys := dataKeys(t, ch, "rotate"); len(keys) != 0 {
		t.Errorf("the losing rotation left %v in the store", keys)
	}
}

func TestAFailedConfirmationOfACommittedWindowIsNamed(t *testing.T) {
	ctx := context.Background()
	ch, _ := newChain(t)
	src := newFakeSource(t, ch, fakeWindow{records: chaintest.Txn(7, insert("public.t", "1")), end: "0/300"})
	src.confirmErr = errors.New("connection reset")
	res, err := Window(ctx, ch, options(src, "attempt-1"), source.Limits{})
	if !errcode.Is(err, errcode.SlotUnconfirmed) || !res.Committed || res.End != "0/300" {
		t.Errorf("a window whose confirmation failed: %+v, %v; want it committed, with SLUICE-E-SLOT-UNCONFIRMED", res, err)
	}

	// A refused log (invalidated, lost) stays the refusal it is.
	src.windows = []fakeWindow{{records: chaintest.Txn(8, insert("public.t", "2")), end: "0/400"}}
	src.confirmErr = errcode.New(errcode.SourceLogLost, "gone")
	if _, err := Window(ctx, ch, options(src, "attempt-2"), source.Limits{}); !errcode.Is(err, errcode.SourceLogLost) {
		t.Errorf("a refused confirmation became %v", err)
	}
}

func TestWindowRefusesAChainOfAnotherEngine(t *testing.T) {
	ctx := context.Background()
	ch := chaintest.Store(t)
	full := fullAt("0/100")
	full.Source.Engine = "mysql"
	if err := ch.PutManifest(ctx, full); err != nil {
		t.Fatal(err)
	}
	if err := ch.CommitCatalog(ctx, chain.NewCatalog(full)); err != nil {
		t.Fatal(err)
	}
	src := newFakeSource(t, ch)
	if _, err := Window(ctx, ch, options(src, "attempt-1"), source.Limits{}); !errcode.Is(err, errcode.ConfigInvalid) || !strings.Contains(err.Error(), `"mysql"`) {
		t.Errorf("a chain of another engine: %v, want SLUICE-E-CONFIG-INVALID naming it", err)
	}
	if len(src.opened) != 0 {
		t.Errorf("a capture was opened on a chain of another engine")
	}
}

func TestAMaintenanceCommitDuringAStepIsBuiltUpon(t *testing.T) {
	ctx := context.Background()
	ch, _ := newChain(t)
	// While the window is open, a prune or compaction commits a generation
	// that keeps the tip: the window lands on top of it, not in a conflict.
	maintain := func() {
		cat := loadCatalog(t, ch)
		if err := ch.CommitCatalog(ctx, cat.Next()); err != nil {
			t.Fatal(err)
		}
	}
	src := newFakeSource(t, ch, fakeWindow{records: chaintest.Txn(7, insert("public.t", "mine")), end: "0/300", after: maintain})
	res, err := Window(ctx, ch, options(src, "window"), source.Limits{})
	if err != nil || !res.Committed {
		t.Fatalf("window over a maintenance commit: %+v, %v", res, err)
	}
	if cat := loadCatalog(t, ch); cat.Generation != 3 || cat.Tip().ID != res.LinkID || len(src.confirms) != 1 {
		t.Fatalf("generation %d tip %s confirms %v; want generation 3 with the window %s, confirmed", cat.Generation, cat.Tip().ID, src.confirms, res.LinkID)
	}

	src = newFakeSource(t, ch, fakeWindow{records: chaintest.Txn(9, insert("public.t", "closing")), end: "0/380", before: "0/900", after: maintain})
	src.rotation = fullAt("0/900")
	res, err = Rotate(ctx, ch, options(src, "rotate"))
	if err != nil || !res.Committed {
		t.Fatalf("rotation over a maintenance commit: %+v, %v", res, err)
	}
	if cat := loadCatalog(t, ch); cat.Generation != 5 || len(cat.Segments) != 2 || cat.Tip().ID != res.LinkID {
		t.Fatalf("generation %d, %d segments, tip %s; want generation 5 with the rotation's full %s", cat.Generation, len(cat.Segments), cat.Tip().ID, res.LinkID)
	}
}

package compact

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/retention"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// twoSegments builds a capped segment of five small incrementals (three
// records per chunk, so each spans chunks) and an open segment of two.
func twoSegments(t *testing.T) (*chain.Chain, *chaintest.Builder) {
	t.Helper()
	ch := chaintest.Store(t)
	b := chaintest.NewBuilder(t, ch, t0)
	b.PerChunk = 3
	id := 10
	for i := 0; i < 5; i++ {
		b.Incremental(append(b.Txn(chaintest.Insert(id, "a"), chaintest.Update(id, "b")), b.Txn(chaintest.Insert(id+1, "c"))...))
		id += 2
	}
	b.Rotate()
	for i := 0; i < 2; i++ {
		b.Incremental(b.Txn(chaintest.Insert(id, "open")))
		id++
	}
	return ch, b
}

// describe renders a record by everything a target and the checks use.
func describe(c *chain.Change) string {
	var s strings.Builder
	fmt.Fprintf(&s, "%c xid=%d commit=%d ord=%d lsn=%d end=%d id=%v %s", c.Op, c.XID, c.CommitLSN, c.Ordinal, c.LSN, c.EndLSN, c.Identified, c.Table)
	for _, v := range c.New {
		fmt.Fprintf(&s, " %c:%s", v.Kind, v.Data)
	}
	for _, v := range c.Old {
		fmt.Fprintf(&s, " old %c:%s", v.Kind, v.Data)
	}
	return s.String()
}

// recordsOf reads every link's records as readers see them now.
func recordsOf(t *testing.T, ch *chain.Chain) map[string][]string {
	t.Helper()
	ctx := context.Background()
	cat, err := ch.LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, l := range cat.Links() {
		if l.Kind != chain.KindIncremental {
			continue
		}
		m, err := ch.LinkManifest(ctx, cat, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		err = ch.WalkIncremental(ctx, m, func(c *chain.Change) error {
			out[l.ID] = append(out[l.ID], describe(c))
			return nil
		}, nil)
		if err != nil {
			t.Fatalf("read %s: %v", l.ID, err)
		}
	}
	return out
}

func keys(t *testing.T, ch *chain.Chain, prefix string) map[string]bool {
	t.Helper()
	objs, err := ch.Store().List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, o := range objs {
		out[o.Key] = true
	}
	return out
}

func TestPlainCompactionKeepsEveryRecordInOrder(t *testing.T) {
	ctx := context.Background()
	ch, b := twoSegments(t)
	before := recordsOf(t, ch)
	cat := b.Cat
	var digests []string
	var oldChunks []string
	for _, l := range cat.Segments[0].Incrementals {
		m, _ := ch.GetManifest(ctx, l.ID)
		digests = append(digests, m.RecordsDigest())
		for _, r := range m.Chunks {
			oldChunks = append(oldChunks, r.Key)
		}
	}
	openChunks := keys(t, ch, "data/")

	res, err := Compact(ctx, ch, Options{ChunkBytes: 400, KeepReplaced: time.Hour, Now: func() time.Time { return b.Now }})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Segments) != 1 || res.Segments[0].Generation == 0 || res.Segments[0].ChunksAfter >= res.Segments[0].ChunksBefore {
		t.Fatalf("result %+v; want segment 0 merged into fewer chunks", res.Segments)
	}
	if got := recordsOf(t, ch); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("records changed:\nbefore %v\nafter  %v", before, got)
	}
	after, _ := ch.LoadCatalog(ctx)
	if after.FormatVersion < chain.CatalogFormatVersionLayouts || after.Segments[0].Layout == "" || after.Segments[1].Layout != "" {
		t.Fatalf("catalog after: version %d, layouts %q %q", after.FormatVersion, after.Segments[0].Layout, after.Segments[1].Layout)
	}
	l, err := ch.GetLayout(ctx, after.Segments[0].Layout)
	if err != nil {
		t.Fatal(err)
	}
	shared := false
	for _, ll := range l.Links {
		shared = shared || ll.Skip > 0
	}
	if !shared || len(l.Links) != 5 {
		t.Fatalf("layout %+v: want five links, some starting inside a merged chunk", l.Links)
	}
	// Links keep their IDs and the digest of their records.
	for i, l := range after.Segments[0].Incrementals {
		m, err := ch.LinkManifest(ctx, after, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		if l.ID != cat.Segments[0].Incrementals[i].ID || m.RecordsDigest() != digests[i] || !m.ApplyIdentity {
			t.Fatalf("link %d: ID %s digest %s identities %v; want %s %s true", i, l.ID, m.RecordsDigest(), m.ApplyIdentity, cat.Segments[0].Incrementals[i].ID, digests[i])
		}
	}
	if err := ch.Verify(ctx, after, ""); err != nil {
		t.Fatal(err)
	}
	if f, err := ch.SeveredTransactions(ctx, after, nil); err != nil || len(f) != 0 {
		t.Fatalf("severed check after compaction: %v %v", f, err)
	}
	// The replaced chunks are kept for readers of the older catalog; the
	// open segment's are untouched.
	have := keys(t, ch, "data/")
	for _, k := range oldChunks {
		if !have[k] {
			t.Fatalf("replaced chunk %s deleted before its time", k)
		}
	}
	if res.Pending != 1 {
		t.Fatalf("%d journals pending, want 1", res.Pending)
	}
	// A later run, once their time came, deletes them; then nothing is left
	// to compact.
	res, err = Compact(ctx, ch, Options{KeepReplaced: time.Hour, Now: func() time.Time { return b.Now.Add(2 * time.Hour) }})
	if err != nil || res.Deleted != len(oldChunks) || res.Segments[0].Skipped == "" {
		t.Fatalf("second run: %+v, %v; want %d replaced chunks deleted and the segment skipped", res, err, len(oldChunks))
	}
	have = keys(t, ch, "data/")
	for _, k := range oldChunks {
		if have[k] {
			t.Fatalf("replaced chunk %s still there", k)
		}
	}
	for k := range openChunks {
		if !strings.Contains(strings.Join(oldChunks, ","), k) && !have[k] {
			t.Fatalf("chunk %s of a link not compacted was deleted", k)
		}
	}
	if got := recordsOf(t, ch); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatal("records changed after the deletes")
	}

	// Retention drops the compacted segment with its layout and chunks.
	b.Reload()
	b.Rotate()
	if _, err := retention.Prune(ctx, ch, retention.Options{Policy: retention.Policy{KeepSegments: 2}, Now: func() time.Time { return b.Now }}); err != nil {
		t.Fatal(err)
	}
	if l := keys(t, ch, chain.LayoutPrefix); len(l) != 0 {
		t.Fatalf("layouts left after the prune: %v", l)
	}
}

func TestCompactionDryRunAndInterruptedCommit(t *testing.T) {
	ctx := context.Background()
	ch, b := twoSegments(t)
	before := keys(t, ch, "")
	res, err := Compact(ctx, ch, Options{DryRun: true, ChunkBytes: 400, Now: func() time.Time { return b.Now }})
	if err != nil || res.Segments[0].Skipped != "dry run" || res.Segments[0].ChunksBefore < 2 {
		t.Fatalf("dry run: %+v, %v", res, err)
	}
	if after := keys(t, ch, ""); len(after) != len(before) {
		t.Fatalf("the dry run wrote: %d objects, then %d", len(before), len(after))
	}

	crash := errors.New("killed")
	_, err = Compact(ctx, ch, Options{ChunkBytes: 400, Now: func() time.Time { return b.Now }, AfterCommit: func() error { return crash }})
	if !errors.Is(err, crash) {
		t.Fatalf("want the crash, got %v", err)
	}
	if j := keys(t, ch, "control/garbage-"); len(j) != 1 {
		t.Fatalf("journals %v, want the one of the compaction", j)
	}
	// A prune finishes the compaction's journal too.
	if _, err := retention.Prune(ctx, ch, retention.Options{Policy: retention.Policy{KeepSegments: 5}, Now: func() time.Time { return b.Now }}); err != nil {
		t.Fatal(err)
	}
	if j := keys(t, ch, "control/garbage-"); len(j) != 0 {
		t.Fatalf("journals left: %v", j)
	}
}

func TestNeverTheOpenSegment(t *testing.T) {
	ctx := context.Background()
	ch := chaintest.Store(t)
	b := chaintest.NewBuilder(t, ch, t0)
	b.PerChunk = 1
	for i := 0; i < 4; i++ {
		b.Incremental(b.Txn(chaintest.Insert(i, "x")))
	}
	res, err := Compact(ctx, ch, Options{Smart: true, Now: func() time.Time { return b.Now }})
	if err != nil || len(res.Segments) != 0 {
		t.Fatalf("a chain of one open segment: %+v, %v", res, err)
	}
	if cat, _ := ch.LoadCatalog(ctx); cat.Generation != b.Cat.Generation {
		t.Fatal("the open segment was compacted")
	}
}

// A layout is content-addressed: one altered in the store is refused, not
// trusted.
func TestAlteredLayoutRefused(t *testing.T) {
	ctx := context.Background()
	ch, b := twoSegments(t)
	if _, err := Compact(ctx, ch, Options{ChunkBytes: 400, Now: func() time.Time { return b.Now }}); err != nil {
		t.Fatal(err)
	}
	cat, _ := ch.LoadCatalog(ctx)
	key := chain.LayoutKey(cat.Segments[0].Layout)
	data, err := blobstoreRead(ch, key)
	if err != nil {
		t.Fatal(err)
	}
	altered := strings.Replace(string(data), `"skip":0`, `"skip":1`, 1)
	if err := ch.Store().Put(ctx, key, []byte(altered)); err != nil {
		t.Fatal(err)
	}
	_, err = ch.LinkManifest(ctx, cat, cat.Segments[0].Incrementals[0].ID)
	if e, ok := errcode.As(err); !ok || e.Code != errcode.ManifestInvalid {
		t.Fatalf("altered layout: %v, want SLUICE-E-MANIFEST-INVALID", err)
	}
	if err := ch.Verify(ctx, cat, ""); !errcode.Is(err, errcode.ManifestInvalid) {
		t.Fatalf("verify of an altered layout: %v", err)
	}
}

func blobstoreRead(ch *chain.Chain, key string) ([]byte, error) {
	return blobstore.ReadAll(context.Background(), ch.Store(), key)
}

// Package compact rewrites how a chain's capped segments store their
// incrementals: the many small change chunks of a segment are merged into
// few larger ones holding the same records in the same order, and a layout
// (docs/chain-format.md §10) says where each incremental's records lie.
// Links keep their IDs and manifests, so parents, positions and a broker
// stopped inside an incremental stay valid. A smart compaction also folds
// changes per key across each incremental's transactions, which drops
// their apply identities; the layout records that. The open segment is
// never compacted. Each segment commits on its own; the chunks it replaced
// are deleted once no reader that loaded an older catalog may still need
// them.
package compact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
)

// DefaultChunkBytes is the uncompressed size at which a merged chunk is cut.
const DefaultChunkBytes = 16 << 20

// DefaultKeepReplaced is how long replaced chunks stay readable after a
// compaction commits: a broker or restore that loaded the catalog before it
// may still be reading them.
const DefaultKeepReplaced = time.Hour

// Options configure a compaction.
type Options struct {
	// DryRun decides and counts but writes nothing.
	DryRun bool
	// Smart folds changes per key across transactions (dropping apply
	// identities).
	Smart bool
	// ChunkBytes is the raw size of a merged chunk (default DefaultChunkBytes).
	ChunkBytes int
	// KeepReplaced delays the deletion of replaced chunks (0: delete them
	// right after the commit; the CLI's default is DefaultKeepReplaced).
	KeepReplaced time.Duration
	// AttemptID names the data folder of this attempt's chunks; it must be
	// unique to the attempt (default: from the clock).
	AttemptID string
	// Now is the compaction's clock (default time.Now).
	Now func() time.Time
	// AfterCommit, when set, runs after each segment's commit, before its
	// deletes; an error ends the compaction there (tests stand a crash for it).
	AfterCommit func() error
	// Progress, when set, is told of each segment as it is done.
	Progress func(Segment)
}

// Segment reports one capped segment.
type Segment struct {
	Index int    `json:"index"`
	Full  string `json:"full"`
	// Skipped says why the segment was left as it is ("" when compacted).
	Skipped string `json:"skipped,omitempty"`
	// ChunksBefore and ChunksAfter count the change chunks its
	// incrementals read from, BytesBefore and BytesAfter their stored size.
	ChunksBefore int   `json:"chunks_before"`
	ChunksAfter  int   `json:"chunks_after"`
	BytesBefore  int64 `json:"bytes_before"`
	BytesAfter   int64 `json:"bytes_after"`
	// RecordsBefore and RecordsAfter count change records (equal unless smart).
	RecordsBefore int64 `json:"records_before"`
	RecordsAfter  int64 `json:"records_after"`
	// Rewritten counts incrementals whose records a smart compaction folded.
	Rewritten int `json:"rewritten,omitempty"`
	// Layout is the new layout's ID; Generation the commit that named it.
	Layout     string `json:"layout,omitempty"`
	Generation int64  `json:"generation,omitempty"`
}

// Result reports a compaction.
type Result struct {
	Segments []Segment `json:"segments"`
	// Deleted counts objects deleted (replaced chunks whose time came,
	// and leftovers of earlier maintenance runs); Pending the journals left
	// for a later run.
	Deleted int `json:"deleted"`
	Pending int `json:"pending_journals"`
}

// commitAttempts bounds the retries of one segment's commit that lost to
// another writer (the producer appending a window, typically).
const commitAttempts = 5

// Compact compacts every capped segment of the chain that gains from it.
func Compact(ctx context.Context, ch *chain.Chain, o Options) (Result, error) {
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = DefaultChunkBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.AttemptID == "" {
		o.AttemptID = fmt.Sprintf("compact-%d", o.Now().UnixNano())
	}
	var res Result
	cat, err := ch.LoadCatalog(ctx)
	if err != nil {
		return res, err
	}
	if err := chain.ValidateCatalog(cat); err != nil {
		return res, err
	}
	sw, err := ch.Sweep(ctx, cat.Generation, o.Now(), o.DryRun)
	res.Deleted, res.Pending = sw.Deleted, len(sw.Pending)
	if err != nil {
		return res, err
	}
	// Segments are found by their full: a prune may drop earlier ones
	// between two commits.
	var fulls []string
	for _, s := range cat.Segments[:len(cat.Segments)-1] {
		fulls = append(fulls, s.Full.ID)
	}
	for i, full := range fulls {
		seg, j, err := compactSegment(ctx, ch, full, i, o)
		res.Segments = append(res.Segments, seg)
		if err != nil {
			return res, err
		}
		if o.Progress != nil {
			o.Progress(seg)
		}
		if seg.Generation == 0 {
			continue
		}
		if o.KeepReplaced > 0 {
			res.Pending++ // a later compact or prune deletes them
			continue
		}
		n, err := ch.FinishJournal(ctx, j)
		res.Deleted += n
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// compactSegment compacts the capped segment whose full is full, found in
// the latest catalog, and commits it; it returns the commit's journal.
func compactSegment(ctx context.Context, ch *chain.Chain, full string, index int, o Options) (Segment, chain.GarbageJournal, error) {
	seg := Segment{Index: index, Full: full}
	var none chain.GarbageJournal
	cat, err := ch.LoadCatalog(ctx)
	if err != nil {
		return seg, none, err
	}
	si, ok := segmentOf(cat, full)
	switch {
	case !ok:
		seg.Skipped = "pruned meanwhile"
		return seg, none, nil
	case !cat.Segments[si].Capped:
		seg.Skipped = "the open segment is never compacted"
		return seg, none, nil
	}
	seg.Index = si
	s := cat.Segments[si]
	var prev *chain.Layout
	if s.Layout != "" {
		if prev, err = ch.GetLayout(ctx, s.Layout); err != nil {
			return seg, none, err
		}
		if !o.Smart || smart(prev) {
			seg.Skipped = "compacted already"
			return seg, none, nil
		}
	}
	// The incrementals as readers see them now.
	var incs []*chain.Manifest
	keys := map[string]int64{}
	for _, l := range s.Incrementals {
		m, err := ch.LinkManifest(ctx, cat, l.ID)
		if err != nil {
			return seg, none, err
		}
		incs = append(incs, m)
		for _, r := range m.Chunks {
			if _, dup := keys[r.Key]; !dup {
				keys[r.Key] = r.Size
				seg.ChunksBefore++
				seg.BytesBefore += r.Size
			}
			seg.RecordsBefore += r.Rows
		}
	}
	if len(incs) == 0 {
		seg.Skipped = "no incrementals"
		return seg, none, nil
	}
	if !o.Smart && seg.ChunksBefore <= 1 {
		seg.Skipped = "its incrementals are in one chunk already"
		return seg, none, nil
	}
	if o.DryRun {
		seg.Skipped = "dry run"
		return seg, none, nil
	}

	w := newWriter(ch, fmt.Sprintf("%s-%04d", o.AttemptID, si), o.ChunkBytes)
	layout := &chain.Layout{Segment: s.Full.ID, CreatedAt: o.Now()}
	for _, m := range incs {
		ll := chain.LayoutLink{ID: m.ID, First: w.chunks(), Skip: w.pending()}
		var written int64
		if o.Smart {
			recs, err := collapsed(ctx, ch, cat, m)
			if err != nil {
				w.cleanup(ctx)
				return seg, none, err
			}
			for i := range recs {
				if err := w.add(ctx, &recs[i]); err != nil {
					w.cleanup(ctx)
					return seg, none, err
				}
			}
			written = int64(len(recs))
			ll.Rewritten, ll.Changes, ll.Transactions = true, written-2, 1
			seg.Rewritten++
		} else {
			err := ch.WalkIncremental(ctx, m, func(c *chain.Change) error {
				written++
				return w.add(ctx, c)
			}, nil)
			if err != nil {
				w.cleanup(ctx)
				return seg, none, err
			}
			ll.Digest = m.RecordsDigest()
		}
		ll.Records = written
		seg.RecordsAfter += written
		layout.Links = append(layout.Links, ll)
	}
	if err := w.flush(ctx); err != nil {
		w.cleanup(ctx)
		return seg, none, err
	}
	layout.Chunks = w.refs
	for i := range layout.Links {
		if layout.Links[i].Rewritten {
			layout.Links[i].Digest = rewrittenDigest(layout, layout.Links[i])
		}
	}
	if err := ch.PutLayout(ctx, layout); err != nil {
		w.cleanup(ctx)
		return seg, none, err
	}
	seg.Layout, seg.ChunksAfter = layout.ID, len(layout.Chunks)
	for _, r := range layout.Chunks {
		seg.BytesAfter += r.Size
	}
	written := append(w.keys(), chain.LayoutKey(layout.ID))
	var replaced []string
	for k := range keys {
		replaced = append(replaced, k)
	}
	if prev != nil {
		replaced = append(replaced, chain.LayoutKey(prev.ID))
	}

	for attempt := 1; ; attempt++ {
		next := cat.Next()
		if next.FormatVersion < chain.CatalogFormatVersionLayouts {
			next.FormatVersion = chain.CatalogFormatVersionLayouts
		}
		next.Segments[si].Layout = layout.ID
		now := o.Now()
		j, err := ch.CommitWithJournal(ctx, next, chain.GarbageJournal{By: "compact", CreatedAt: now,
			DeleteAfter: now.Add(o.KeepReplaced), OnCommit: replaced, OnConflict: written})
		if err == nil {
			seg.Generation = next.Generation
			if o.AfterCommit != nil {
				if err := o.AfterCommit(); err != nil {
					return seg, j, err
				}
			}
			return seg, j, nil
		}
		if !errcode.Is(err, errcode.CatalogConflict) || attempt == commitAttempts {
			_, _ = ch.DeleteObjects(context.WithoutCancel(ctx), written)
			return seg, none, err
		}
		// Another writer committed first: the compaction still holds if
		// the segment is there and as it was.
		if cat, err = ch.LoadCatalog(ctx); err != nil {
			return seg, none, err
		}
		if si, ok = segmentOf(cat, full); !ok || cat.Segments[si].Layout != s.Layout {
			_, _ = ch.DeleteObjects(context.WithoutCancel(ctx), written)
			seg.Skipped, seg.Layout = "changed by another writer meanwhile", ""
			return seg, none, nil
		}
	}
}

// segmentOf finds the segment whose full is full.
func segmentOf(cat *chain.Catalog, full string) (int, bool) {
	for i, s := range cat.Segments {
		if s.Full.ID == full {
			return i, true
		}
	}
	return 0, false
}

// smart reports whether a layout holds records a smart compaction folded.
func smart(l *chain.Layout) bool {
	for _, ll := range l.Links {
		if ll.Rewritten {
			return true
		}
	}
	return false
}

// collapsed reads incremental m and folds its changes per key.
func collapsed(ctx context.Context, ch *chain.Chain, cat *chain.Catalog, m *chain.Manifest) ([]chain.Change, error) {
	schema, err := ch.SchemaAt(ctx, cat, m.Parent)
	if err != nil {
		return nil, err
	}
	c := newCollapser(schema)
	if err := ch.WalkIncremental(ctx, m, func(r *chain.Change) error { c.add(r); return nil }, nil); err != nil {
		return nil, err
	}
	return c.records(), nil
}

// rewrittenDigest identifies records a smart compaction wrote: the chunks
// they lie in and where, so it differs from any manifest's own digest.
func rewrittenDigest(l *chain.Layout, ll chain.LayoutLink) string {
	h := sha256.New()
	fmt.Fprintf(h, "rewritten %s %d %d %d\n", ll.ID, ll.First, ll.Skip, ll.Records)
	left := ll.Skip + ll.Records
	for j := ll.First; j < len(l.Chunks) && left > 0; j++ {
		h.Write([]byte(l.Chunks[j].SHA256 + "\n"))
		left -= l.Chunks[j].Rows
	}
	return hex.EncodeToString(h.Sum(nil))
}

// writer cuts records into merged chunks.
type writer struct {
	ch      *chain.Chain
	attempt string
	limit   int
	b       *chain.ChangeBuilder
	refs    []chain.ChunkRef
}

func newWriter(ch *chain.Chain, attempt string, limit int) *writer {
	return &writer{ch: ch, attempt: attempt, limit: limit, b: chain.NewChangeBuilder()}
}

// chunks is the index of the chunk the next record goes into; pending how
// many records it already holds.
func (w *writer) chunks() int    { return len(w.refs) }
func (w *writer) pending() int64 { return w.b.Records() }

func (w *writer) add(ctx context.Context, c *chain.Change) error {
	if err := w.b.Append(c); err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	if w.b.RawLen() >= w.limit {
		return w.flush(ctx)
	}
	return nil
}

func (w *writer) flush(ctx context.Context) error {
	if w.b.Records() == 0 {
		return nil
	}
	data, err := w.b.Encode()
	if err != nil {
		return fmt.Errorf("encode merged chunk: %w", err)
	}
	ref, err := w.ch.WriteChunk(ctx, chain.ChunkPlace{Key: chain.DataKey(w.attempt, fmt.Sprintf("merged-%06d.chunk", len(w.refs))), Ordinal: len(w.refs)}, data, w.b.Records(), int64(w.b.RawLen()))
	if err != nil {
		return err
	}
	w.refs = append(w.refs, ref)
	w.b.Reset()
	return nil
}

func (w *writer) keys() []string {
	out := make([]string, len(w.refs))
	for i, r := range w.refs {
		out[i] = r.Key
	}
	return out
}

// cleanup deletes the chunks of a segment that was not committed.
func (w *writer) cleanup(ctx context.Context) {
	_, _ = w.ch.DeleteObjects(context.WithoutCancel(ctx), w.keys())
}

// String summarises a segment's outcome.
func (s Segment) String() string {
	if s.Skipped != "" {
		return fmt.Sprintf("segment %d (full %s): left as it is: %s", s.Index, shortID(s.Full), s.Skipped)
	}
	what := "merged"
	if s.Rewritten > 0 {
		what = fmt.Sprintf("folded %d incrementals and merged", s.Rewritten)
	}
	return fmt.Sprintf("segment %d (full %s): %s %d chunks into %d (%d → %d bytes, %d → %d records), layout %s in generation %d",
		s.Index, shortID(s.Full), what, s.ChunksBefore, s.ChunksAfter, s.BytesBefore, s.BytesAfter, s.RecordsBefore, s.RecordsAfter, shortID(s.Layout), s.Generation)
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

package chain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/seal"
)

// LayoutPrefix holds the layouts of compacted segments.
const LayoutPrefix = "layouts/"

// LayoutFormatVersion is the version of layouts this package writes and reads.
const LayoutFormatVersion = 1

// Layout is how a compacted segment's incrementals are stored: a list of
// merged change chunks and, for each incremental it holds, where that
// incremental's records lie in them. A link keeps its ID, and its manifest
// stays as it was written: the catalog's segment names the layout, and a
// reader applies it to the manifest (Apply). Its ID is derived from its
// content as a manifest's is (docs/chain-format.md §3.2, §10).
type Layout struct {
	FormatVersion int `json:"format_version"`
	// ID is the content-derived identifier (40 lowercase hex characters).
	ID string `json:"id"`
	// Segment is the ID of the compacted segment's full.
	Segment string `json:"segment"`
	// CreatedAt is when the compaction wrote the layout.
	CreatedAt time.Time `json:"created_at"`
	// Chunks are the merged change chunks, in order.
	Chunks []ChunkRef `json:"chunks"`
	// Links place the segment's incrementals in Chunks, in chain order. An
	// incremental not listed keeps the chunks its manifest names.
	Links []LayoutLink `json:"links"`
	// KeyID names the data key Chunks are sealed with; empty when they are
	// not (§11).
	KeyID string `json:"key_id,omitempty"`
}

// LayoutLink places one incremental's records in a layout's chunks.
type LayoutLink struct {
	// ID is the incremental's.
	ID string `json:"id"`
	// First is the index of the chunk its first record is in, and Skip
	// how many records of that chunk come before it; its Records run on
	// through the chunks after.
	First   int   `json:"first"`
	Skip    int64 `json:"skip"`
	Records int64 `json:"records"`
	// Digest identifies the records (Manifest.RecordsDigest): the
	// manifest's own when they are the manifest's records moved, another
	// when they were rewritten.
	Digest string `json:"digest"`
	// Rewritten is set when the records are not the manifest's: a smart
	// compaction collapsed changes per key across transactions, which
	// drops every apply identity. Changes and Transactions then count the
	// new records.
	Rewritten    bool  `json:"rewritten,omitempty"`
	Changes      int64 `json:"changes,omitempty"`
	Transactions int64 `json:"transactions,omitempty"`
}

// LayoutKey returns the key of the layout with the given ID.
func LayoutKey(id string) string { return LayoutPrefix + id + ".json" }

// Seal sets the layout's format version and content-derived ID.
func (l *Layout) Seal() error {
	l.FormatVersion = LayoutFormatVersion
	l.CreatedAt = NormalizeTime(l.CreatedAt)
	b, err := canonicalLayout(l, "")
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	l.ID = hex.EncodeToString(sum[:])[:IDLength]
	return nil
}

func canonicalLayout(l *Layout, id string) ([]byte, error) {
	c := *l
	c.ID = id
	c.CreatedAt = NormalizeTime(l.CreatedAt)
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("encode layout: %w", err)
	}
	return b, nil
}

// PutLayout seals l and writes it create-only; identical bytes already
// there are a successful retry.
func (c *Chain) PutLayout(ctx context.Context, l *Layout) error {
	dk, err := c.writeKey(ctx)
	if err != nil {
		return err
	}
	if dk != nil {
		l.KeyID = dk.ID
	}
	if err := l.Seal(); err != nil {
		return err
	}
	if err := l.validate(); err != nil {
		return err
	}
	b, err := canonicalLayout(l, l.ID)
	if err != nil {
		return err
	}
	data := append(b, '\n')
	return c.putOnce(ctx, LayoutKey(l.ID), data, "layout "+l.ID, sameBytes(data))
}

// GetLayout reads the layout with the given ID and checks that its content
// hashes to it; damage is a coded errcode.ManifestInvalid error.
func (c *Chain) GetLayout(ctx context.Context, id string) (*Layout, error) {
	if !ValidID(id) {
		return nil, errcode.New(errcode.ManifestInvalid, "layout ID %q is not 40 lowercase hex characters", id)
	}
	key := LayoutKey(id)
	data, err := blobstore.ReadAll(ctx, c.store, key)
	if errors.Is(err, blobstore.ErrNotFound) {
		return nil, errcode.Wrap(errcode.ManifestInvalid, err, "layout %s is missing from %s", id, c.store)
	}
	if err != nil {
		return nil, c.unreachable(err, "read", key)
	}
	var l Layout
	if err := strictUnmarshal(data, &l); err != nil {
		return nil, errcode.Wrap(errcode.ManifestInvalid, err, "layout %s does not parse", id)
	}
	if l.FormatVersion != LayoutFormatVersion {
		return nil, errcode.New(errcode.FormatUnsupported, "layout %s has format version %d; this sluice reads version %d", id, l.FormatVersion, LayoutFormatVersion)
	}
	want := l
	if err := want.Seal(); err != nil {
		return nil, err
	}
	if l.ID != id || want.ID != id {
		return nil, errcode.New(errcode.ManifestInvalid, "layout stored as %s carries ID %s and hashes to %s", id, l.ID, want.ID)
	}
	if err := l.validate(); err != nil {
		return nil, err
	}
	if l.KeyID == "" {
		if c.trust != nil && c.trust.t.Wrapper != nil {
			return nil, errcode.New(errcode.ChainNotSealed, "layout %s is not sealed, and the chain is read with %s", id, c.trust.t.Wrapper)
		}
		return &l, nil
	}
	if !seal.ValidKeyID(l.KeyID) {
		return nil, errcode.New(errcode.ManifestInvalid, "layout %s names data key %q, which is not 32 lowercase hex characters", id, l.KeyID)
	}
	// Without a key (retention needs only the chunk keys) the chunks
	// refuse to open with errcode.KeyRequired when read.
	for i := range l.Chunks {
		l.Chunks[i].seal = &chunkSeal{keyID: l.KeyID, aad: ChunkPlace{Key: l.Chunks[i].Key, Ordinal: i}.aad()}
	}
	return &l, nil
}

// validate checks the layout on its own: well-formed chunk references and
// links whose records lie within the chunks.
func (l *Layout) validate() error {
	bad := func(format string, args ...any) error {
		return errcode.New(errcode.ManifestInvalid, "layout %s: "+format, append([]any{l.ID}, args...)...)
	}
	if !ValidID(l.Segment) {
		return bad("segment %q is not a link ID", l.Segment)
	}
	keys := map[string]bool{}
	// before[i] is the number of records in the chunks before chunk i;
	// before[len(l.Chunks)] is every chunk's. The sums are checked against
	// overflow: a layout is read from the store, and counts that wrapped
	// around would place records outside the chunks.
	before := make([]int64, len(l.Chunks)+1)
	for i, r := range l.Chunks {
		if err := blobstore.ValidateKey(r.Key); err != nil || keys[r.Key] {
			return bad("chunk %d: key %q is malformed or listed twice", i, r.Key)
		}
		keys[r.Key] = true
		if !validSHA256(r.SHA256) || r.Size <= 0 || r.Rows < 0 || r.RawSize < 0 || r.RawSize > MaxChunkRawSize ||
			r.Rows > math.MaxInt64-before[i] {
			return bad("chunk %s: digest, size, rows or raw size out of range", r.Key)
		}
		before[i+1] = before[i] + r.Rows
	}
	total := before[len(l.Chunks)]
	seen := map[string]bool{}
	for _, ll := range l.Links {
		if !ValidID(ll.ID) || seen[ll.ID] {
			return bad("link %q is malformed or listed twice", ll.ID)
		}
		seen[ll.ID] = true
		if ll.Records < 0 || ll.Skip < 0 || ll.First < 0 || (ll.Records > 0 && ll.First >= len(l.Chunks)) || !validSHA256(ll.Digest) {
			return bad("link %s: its place in the chunks or its digest is out of range", ll.ID)
		}
		if ll.Rewritten && (ll.Changes < 0 || ll.Transactions < 0 || ll.Transactions > ll.Records/2 || ll.Changes != ll.Records-2*ll.Transactions) {
			return bad("link %s: %d records, but %d changes in %d transactions", ll.ID, ll.Records, ll.Changes, ll.Transactions)
		}
		if ll.Records == 0 {
			continue
		}
		// The first record is in chunk First, after Skip of its records,
		// and the rest follow within the chunks.
		if first := l.Chunks[ll.First]; ll.Skip >= first.Rows {
			return bad("link %s: skips %d records of chunk %s, which holds %d", ll.ID, ll.Skip, first.Key, first.Rows)
		}
		if left := total - before[ll.First] - ll.Skip; ll.Records > left {
			return bad("link %s: its %d records run past the chunks' %d", ll.ID, ll.Records, total)
		}
	}
	return nil
}

// Apply returns incremental m as the layout stores it: the same manifest
// (ID and content) whose chunk references are spans of the layout's chunks,
// and, when its records were rewritten, the new records' counts and no
// apply identity. m is returned as it is when the layout does not hold it.
func (l *Layout) Apply(m *Manifest) *Manifest {
	for _, ll := range l.Links {
		if ll.ID != m.ID {
			continue
		}
		out := *m
		out.Chunks = nil
		left, skip := ll.Records, ll.Skip
		for j := ll.First; left > 0 && j < len(l.Chunks); j++ {
			ref := l.Chunks[j]
			take := min(ref.Rows-skip, left)
			ref.Span = &ChunkSpan{Skip: skip, Total: ref.Rows}
			ref.Rows = take
			out.Chunks = append(out.Chunks, ref)
			left -= take
			skip = 0
		}
		out.recordsDigest, out.layout = ll.Digest, l.ID
		if ll.Rewritten {
			out.Changes, out.Transactions, out.ApplyIdentity = ll.Changes, ll.Transactions, false
		}
		return &out
	}
	return m
}

// Link returns the layout's entry for incremental id.
func (l *Layout) Link(id string) (LayoutLink, bool) {
	for _, ll := range l.Links {
		if ll.ID == id {
			return ll, true
		}
	}
	return LayoutLink{}, false
}

// LinkManifest returns link id's manifest as readers use it: the stored
// manifest, with its segment's layout applied when cat names one.
func (c *Chain) LinkManifest(ctx context.Context, cat *Catalog, id string) (*Manifest, error) {
	m, err := c.GetManifest(ctx, id)
	if err != nil {
		return nil, err
	}
	return c.WithLayout(ctx, cat, m)
}

// WithLayout applies to m the layout cat names for m's segment, if any.
func (c *Chain) WithLayout(ctx context.Context, cat *Catalog, m *Manifest) (*Manifest, error) {
	_, si, ok := cat.Find(m.ID)
	if !ok || cat.Segments[si].Layout == "" || m.Kind != KindIncremental {
		return m, nil
	}
	l, err := c.GetLayout(ctx, cat.Segments[si].Layout)
	if err != nil {
		return nil, err
	}
	return l.Apply(m), nil
}

// RecordsDigest identifies an incremental's records: the SHA-256 of its
// stored chunks' digests in order, each followed by a newline. A manifest a
// layout was applied to keeps the digest of the records it moved, so a
// position that counted records of the incremental resumes into a plain
// compaction, and gets another for records a smart compaction rewrote.
func (m *Manifest) RecordsDigest() string {
	if m.recordsDigest != "" {
		return m.recordsDigest
	}
	h := sha256.New()
	for _, c := range m.Chunks {
		h.Write([]byte(c.SHA256))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// LayoutID names the layout applied to the manifest ("" for a manifest as
// stored), so that what is remembered of a link can be keyed by both.
func (m *Manifest) LayoutID() string { return m.layout }

package chain

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/errcode"
)

// ValidateManifest checks a sealed manifest on its own: its format version,
// the form of its ID and parent, the fields its kind requires or forbids,
// well-formed and distinct chunk references, and that chunk row counts add
// up to the table and manifest totals. Failures are coded
// errcode.ManifestInvalid errors (errcode.FormatUnsupported for an unknown
// version) naming the manifest.
func ValidateManifest(m *Manifest) error {
	if m == nil {
		return errcode.New(errcode.ManifestInvalid, "nil manifest")
	}
	bad := func(format string, args ...any) error {
		return errcode.New(errcode.ManifestInvalid, "manifest %s: "+format, append([]any{m.ID}, args...)...)
	}
	if m.FormatVersion < OldestFormatVersion || m.FormatVersion > ManifestFormatVersion {
		return errcode.New(errcode.FormatUnsupported, "manifest %s has format version %d; this sluice reads versions %d to %d",
			m.ID, m.FormatVersion, OldestFormatVersion, ManifestFormatVersion)
	}
	if !ValidID(m.ID) {
		return bad("ID is not 40 lowercase hex characters")
	}
	if m.Parent != "" && !ValidID(m.Parent) {
		return bad("parent %q is not a manifest ID", m.Parent)
	}
	if m.EndPosition == "" {
		return bad("no end position")
	}
	keys := map[string]bool{}
	checkRefs := func(refs []ChunkRef) (int64, error) {
		var rows int64
		for i, r := range refs {
			if err := blobstore.ValidateKey(r.Key); err != nil {
				return 0, bad("chunk %d: %v", i, err)
			}
			if keys[r.Key] {
				return 0, bad("chunk %s is listed twice", r.Key)
			}
			keys[r.Key] = true
			if !validSHA256(r.SHA256) {
				return 0, bad("chunk %s: SHA-256 %q is not 64 lowercase hex characters", r.Key, r.SHA256)
			}
			if r.Size <= 0 || r.Rows < 0 || r.RawSize < 0 || r.RawSize > MaxChunkRawSize {
				return 0, bad("chunk %s: size %d, rows %d or raw size %d out of range", r.Key, r.Size, r.Rows, r.RawSize)
			}
			rows += r.Rows
		}
		return rows, nil
	}
	switch m.Kind {
	case KindFull:
		if m.StartPosition != m.EndPosition {
			return bad("full's start position %s differs from its end position %s", m.StartPosition, m.EndPosition)
		}
		if m.Schema == nil {
			return bad("full carries no schema")
		}
		if len(m.Chunks) > 0 || m.Changes != 0 || m.Transactions != 0 || m.ApplyIdentity {
			return bad("full carries change chunks or counts")
		}
		if m.Sequences != nil {
			return bad("full carries sequence values outside its schema")
		}
		tables := map[string]bool{}
		var total int64
		for _, t := range m.Tables {
			if t.Table == "" || tables[t.Table] {
				return bad("table %q is unnamed or listed twice", t.Table)
			}
			tables[t.Table] = true
			rows, err := checkRefs(t.Chunks)
			if err != nil {
				return err
			}
			if rows != t.Rows {
				return bad("table %s: chunks hold %d rows, the table records %d", t.Table, rows, t.Rows)
			}
			total += t.Rows
		}
		if total != m.Rows {
			return bad("tables hold %d rows, the manifest records %d", total, m.Rows)
		}
	case KindIncremental:
		if m.Parent == "" {
			return bad("incremental has no parent")
		}
		if m.StartPosition == "" {
			return bad("no start position")
		}
		if len(m.Tables) > 0 || m.Rows != 0 {
			return bad("incremental carries table chunks or a row count")
		}
		if m.Changes < 0 || m.Transactions < 0 {
			return bad("negative change or transaction count")
		}
		for name := range m.Sequences {
			if name == "" {
				return bad("a sequence value has no name")
			}
		}
		changes, err := checkRefs(m.Chunks)
		if err != nil {
			return err
		}
		// Every transaction adds a begin and a commit record to its changes.
		if changes != m.Changes+2*m.Transactions {
			return bad("chunks hold %d records, the manifest records %d changes in %d transactions (%d records)",
				changes, m.Changes, m.Transactions, m.Changes+2*m.Transactions)
		}
	default:
		return bad("unknown kind %q", m.Kind)
	}
	return nil
}

// ValidateCatalog checks a catalog's structure without reading the store:
// the chain ID is the first full's (unless retention pruned the segments
// before the first one), every link has a well-formed distinct ID and the
// right kind, each link's parent is the link before it (the first full has
// none; a rotated full's parent is the previous segment's tip), each
// incremental starts where its parent ends, a full starts where it ends, and
// only the last segment is uncapped. Failures are coded errcode.ChainInvalid
// errors naming the link (errcode.FormatUnsupported for an unknown version).
func ValidateCatalog(cat *Catalog) error {
	if cat == nil {
		return errcode.New(errcode.ChainInvalid, "nil catalog")
	}
	bad := func(format string, args ...any) error {
		return errcode.New(errcode.ChainInvalid, "catalog generation %d: "+format, append([]any{cat.Generation}, args...)...)
	}
	if cat.FormatVersion < CatalogFormatVersion || cat.FormatVersion > CatalogFormatVersionCommits {
		return errcode.New(errcode.FormatUnsupported, "catalog generation %d has format version %d; this sluice reads versions %d to %d",
			cat.Generation, cat.FormatVersion, CatalogFormatVersion, CatalogFormatVersionCommits)
	}
	if cat.Generation < 1 {
		return bad("generation must be at least 1")
	}
	if len(cat.Segments) == 0 {
		return bad("no segments")
	}
	if !ValidID(cat.ChainID) {
		return bad("chain ID %q is not a manifest ID", cat.ChainID)
	}
	seen := map[string]bool{}
	var prev *Link
	for si := range cat.Segments {
		seg := &cat.Segments[si]
		last := si == len(cat.Segments)-1
		if seg.Capped == last {
			if last {
				return bad("last segment %d is capped", si)
			}
			return bad("segment %d is followed by another but is not capped", si)
		}
		check := func(l *Link, name, kind string) error {
			if !ValidID(l.ID) {
				return bad("%s: ID %q is not a manifest ID", name, l.ID)
			}
			if seen[l.ID] {
				return bad("%s %s appears twice", name, l.ID)
			}
			seen[l.ID] = true
			if l.Kind != kind {
				return bad("%s %s has kind %q, want %q", name, l.ID, l.Kind, kind)
			}
			if l.EndPosition == "" {
				return bad("%s %s has no end position", name, l.ID)
			}
			return nil
		}
		if seg.Layout != "" {
			switch {
			case cat.FormatVersion < CatalogFormatVersionLayouts:
				return bad("segment %d names layout %s, which needs catalog format version %d", si, seg.Layout, CatalogFormatVersionLayouts)
			case !seg.Capped:
				return bad("segment %d names layout %s but is not capped: only a capped segment is compacted", si, seg.Layout)
			case !ValidID(seg.Layout):
				return bad("segment %d: layout %q is not an ID", si, seg.Layout)
			}
		}
		full := &seg.Full
		name := fmt.Sprintf("segment %d full", si)
		if err := check(full, name, KindFull); err != nil {
			return err
		}
		switch {
		case prev != nil && full.Parent != prev.ID:
			return bad("%s %s: parent %q is not the previous tip %s", name, full.ID, full.Parent, prev.ID)
		case prev == nil && full.ID == cat.ChainID && full.Parent != "":
			return bad("%s %s is the chain's first full but has parent %s", name, full.ID, full.Parent)
		case prev == nil && full.ID != cat.ChainID && !ValidID(full.Parent):
			// Segments before this one were pruned: its parent is the
			// pruned tip, which must still be named.
			return bad("%s %s is not the chain's first full %s and has no parent", name, full.ID, cat.ChainID)
		}
		if full.StartPosition != full.EndPosition {
			return bad("%s %s: start position %s differs from its end position %s", name, full.ID, full.StartPosition, full.EndPosition)
		}
		prev = full
		for ii := range seg.Incrementals {
			inc := &seg.Incrementals[ii]
			name := fmt.Sprintf("segment %d incremental %d", si, ii)
			if err := check(inc, name, KindIncremental); err != nil {
				return err
			}
			if inc.Parent != prev.ID {
				return bad("%s %s: parent %q is not the previous link %s", name, inc.ID, inc.Parent, prev.ID)
			}
			if inc.StartPosition != prev.EndPosition {
				return bad("%s %s: start position %s is not its parent's end position %s", name, inc.ID, inc.StartPosition, prev.EndPosition)
			}
			prev = inc
		}
	}
	return nil
}

// Verify validates the catalog's structure, then reads the manifest of every
// link from the first through the link whose ID is through (the tip when
// through is empty), recomputes its ID, validates it, and checks that it
// agrees with its catalog link (kind, parent, positions, time, counts) and
// with the catalog's source. It does not read chunks: ReadChunk checks each
// one against its reference when it is used. Disagreement with the catalog is
// a coded errcode.ChainInvalid error naming the link; a damaged manifest is
// errcode.ManifestInvalid.
func (c *Chain) Verify(ctx context.Context, cat *Catalog, through string) error {
	return c.VerifyRange(ctx, cat, "", through)
}

// VerifyRange is Verify restricted to the links after the link whose ID is
// after (from the first link when after is empty) through the link whose ID
// is through (the tip when empty): a reader that verified a prefix of the
// chain before verifies only what is new. The structure of the whole catalog
// is always validated.
func (c *Chain) VerifyRange(ctx context.Context, cat *Catalog, after, through string) error {
	if err := ValidateCatalog(cat); err != nil {
		return err
	}
	links := cat.Links()
	from, to := 0, len(links)-1
	if after != "" {
		i := indexOfLink(links, after)
		if i < 0 {
			return errcode.New(errcode.ChainInvalid, "link %s is not in catalog generation %d", after, cat.Generation)
		}
		from = i + 1
	}
	if through != "" {
		to = indexOfLink(links, through)
		if to < 0 {
			return errcode.New(errcode.ChainInvalid, "link %s is not in catalog generation %d", through, cat.Generation)
		}
	}
	if to < from-1 {
		return errcode.New(errcode.ChainInvalid, "link %s comes before link %s in the chain", through, after)
	}
	checked := map[string]bool{}
	for _, l := range links[from : to+1] {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := c.verifyLink(ctx, cat, l); err != nil {
			return err
		}
		if _, si, _ := cat.Find(l.ID); cat.Segments[si].Layout != "" && !checked[cat.Segments[si].Layout] {
			checked[cat.Segments[si].Layout] = true
			if err := c.verifyLayout(ctx, cat.Segments[si]); err != nil {
				return err
			}
		}
	}
	return nil
}

// verifyLayout reads a compacted segment's layout and checks it against
// the segment: it names the segment's full, places only the segment's
// incrementals, and those whose records it moved unchanged hold as many
// records as their manifests say, under the manifests' own digests.
func (c *Chain) verifyLayout(ctx context.Context, seg Segment) error {
	l, err := c.GetLayout(ctx, seg.Layout)
	if err != nil {
		return err
	}
	if l.Segment != seg.Full.ID {
		return errcode.New(errcode.ChainInvalid, "layout %s is of segment %s, the catalog names it for segment %s", l.ID, l.Segment, seg.Full.ID)
	}
	incs := map[string]bool{}
	for _, inc := range seg.Incrementals {
		incs[inc.ID] = true
	}
	for _, ll := range l.Links {
		if !incs[ll.ID] {
			return errcode.New(errcode.ChainInvalid, "layout %s places %s, which is no incremental of segment %s", l.ID, ll.ID, seg.Full.ID)
		}
		if ll.Rewritten {
			continue
		}
		m, err := c.GetManifest(ctx, ll.ID)
		if err != nil {
			return err
		}
		var records int64
		for _, r := range m.Chunks {
			records += r.Rows
		}
		if records != ll.Records || m.RecordsDigest() != ll.Digest {
			return errcode.New(errcode.ChainInvalid, "layout %s moves %d records of %s under digest %s; its manifest holds %d under %s",
				l.ID, ll.Records, ll.ID, ll.Digest, records, m.RecordsDigest())
		}
	}
	return nil
}

func indexOfLink(links []Link, id string) int {
	for i, l := range links {
		if l.ID == id {
			return i
		}
	}
	return -1
}

// verifyLink reads the manifest of one link and checks it against the link.
func (c *Chain) verifyLink(ctx context.Context, cat *Catalog, l Link) error {
	m, err := c.GetManifest(ctx, l.ID)
	if err != nil {
		return err
	}
	if err := ValidateManifest(m); err != nil {
		return err
	}
	want := LinkFromManifest(m)
	mismatch := ""
	switch {
	case want.Kind != l.Kind:
		mismatch = fmt.Sprintf("kind %q, the catalog says %q", want.Kind, l.Kind)
	case want.Parent != l.Parent:
		mismatch = fmt.Sprintf("parent %q, the catalog says %q", want.Parent, l.Parent)
	case want.StartPosition != l.StartPosition:
		mismatch = fmt.Sprintf("start position %s, the catalog says %s", want.StartPosition, l.StartPosition)
	case want.EndPosition != l.EndPosition:
		mismatch = fmt.Sprintf("end position %s, the catalog says %s", want.EndPosition, l.EndPosition)
	case !want.CreatedAt.Equal(l.CreatedAt):
		mismatch = fmt.Sprintf("creation time %s, the catalog says %s", want.CreatedAt, l.CreatedAt)
	case want.Rows != l.Rows || want.Changes != l.Changes || want.Transactions != l.Transactions:
		mismatch = fmt.Sprintf("%d rows, %d changes, %d transactions, the catalog says %d, %d, %d",
			want.Rows, want.Changes, want.Transactions, l.Rows, l.Changes, l.Transactions)
	case m.Source.Engine != cat.Source.Engine || m.Source.SystemID != cat.Source.SystemID || m.Source.Database != cat.Source.Database:
		mismatch = fmt.Sprintf("source %s/%s/%s, the catalog's is %s/%s/%s",
			m.Source.Engine, m.Source.SystemID, m.Source.Database, cat.Source.Engine, cat.Source.SystemID, cat.Source.Database)
	}
	if mismatch != "" {
		return errcode.New(errcode.ChainInvalid, "link %s: its manifest records %s", l.ID, mismatch)
	}
	return nil
}

package chain

import (
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/sluicehq/sluice/internal/errcode"
)

// NewCatalog returns generation 1 of a new chain whose first link is the
// sealed full backup full.
func NewCatalog(full *Manifest) *Catalog {
	return &Catalog{
		FormatVersion: CatalogFormatVersionCommits,
		ChainID:       full.ID,
		Generation:    1,
		Source:        full.Source,
		Segments:      []Segment{{Full: LinkFromManifest(full)}},
	}
}

// Next returns a copy of cat with the generation increased by one: the
// starting point of the next commit, which CommitCatalog records as the
// change from cat. The copy costs the number of segments, not of links:
// link slices are shared, and appending to the copy's last segment uses
// the spare capacity only when no other copy of cat took it first
// (otherwise the copy's first append reallocates). cat itself is not
// changed, so Next may be called on one catalog from several goroutines.
// Because links are shared, a caller that changes a link in place must
// first copy the segment's Incrementals (CommitCatalog would not see the
// change, and cat would show it).
func (cat *Catalog) Next() *Catalog {
	next := *cat
	next.Generation++
	next.parent, next.stored = cat, nil
	next.Segments = make([]Segment, len(cat.Segments))
	copy(next.Segments, cat.Segments)
	for i := range next.Segments {
		s := &next.Segments[i]
		n := len(s.Incrementals)
		if i == len(next.Segments)-1 && cat.tail != nil && cat.tail.CompareAndSwap(false, true) {
			continue // the spare capacity is next's alone
		}
		s.Incrementals = s.Incrementals[:n:n]
	}
	next.tail = new(atomic.Bool)
	return &next
}

// appendTail appends links to the last segment, reallocating when cat has
// no claim on the spare capacity of its backing array.
func (cat *Catalog) appendTail(links ...Link) {
	last := &cat.Segments[len(cat.Segments)-1]
	if cat.tail == nil || !cat.tail.CompareAndSwap(false, true) {
		n := len(last.Incrementals)
		last.Incrementals = last.Incrementals[:n:n]
	}
	last.Incrementals = append(last.Incrementals, links...)
	// The slice now ends at a length nobody else has seen: its spare
	// capacity is free for the next claim.
	cat.tail = new(atomic.Bool)
}

// Tip returns the chain's last link: the last incremental of the last
// segment, or that segment's full. It returns the zero Link when the catalog
// has no segment.
func (cat *Catalog) Tip() Link {
	if len(cat.Segments) == 0 {
		return Link{}
	}
	last := &cat.Segments[len(cat.Segments)-1]
	if n := len(last.Incrementals); n > 0 {
		return last.Incrementals[n-1]
	}
	return last.Full
}

// Links returns every link in chain order: each segment's full followed by
// its incrementals.
func (cat *Catalog) Links() []Link {
	n := 0
	for _, s := range cat.Segments {
		n += 1 + len(s.Incrementals)
	}
	out := make([]Link, 0, n)
	for _, s := range cat.Segments {
		out = append(out, s.Full)
		out = append(out, s.Incrementals...)
	}
	return out
}

// LinkCount returns the number of links, without listing them.
func (cat *Catalog) LinkCount() int {
	n := 0
	for _, s := range cat.Segments {
		n += 1 + len(s.Incrementals)
	}
	return n
}

// Find returns the link with the given ID and the index of its segment.
func (cat *Catalog) Find(id string) (Link, int, bool) {
	for i, s := range cat.Segments {
		if s.Full.ID == id {
			return s.Full, i, true
		}
		for _, l := range s.Incrementals {
			if l.ID == id {
				return l, i, true
			}
		}
	}
	return Link{}, -1, false
}

// Path returns the links a restore replays to reach the state at link id:
// the full of id's segment followed by that segment's incrementals through
// id. It fails with errcode.ChainInvalid when id is not in the catalog.
func (cat *Catalog) Path(id string) ([]Link, error) {
	_, si, ok := cat.Find(id)
	if !ok {
		return nil, errcode.New(errcode.ChainInvalid, "link %s is not in catalog generation %d", id, cat.Generation)
	}
	s := cat.Segments[si]
	out := []Link{s.Full}
	if s.Full.ID == id {
		return out, nil
	}
	for _, l := range s.Incrementals {
		out = append(out, l)
		if l.ID == id {
			break
		}
	}
	return out, nil
}

// AppendIncremental adds the sealed incremental m to the last segment. m must
// chain onto the tip: its parent is the tip's ID and its start position the
// tip's end position. Otherwise it returns a coded errcode.ChainInvalid
// error and leaves cat unchanged.
func (cat *Catalog) AppendIncremental(m *Manifest) error {
	if len(cat.Segments) == 0 {
		return errcode.New(errcode.ChainInvalid, "append incremental %s: catalog has no segment", m.ID)
	}
	if m.Kind != KindIncremental {
		return errcode.New(errcode.ChainInvalid, "append incremental %s: manifest kind is %q", m.ID, m.Kind)
	}
	if !ValidID(m.ID) {
		return errcode.New(errcode.ChainInvalid, "append incremental: manifest ID %q is not sealed", m.ID)
	}
	last := &cat.Segments[len(cat.Segments)-1]
	if last.Capped {
		return errcode.New(errcode.ChainInvalid, "append incremental %s: last segment is capped", m.ID)
	}
	tip := cat.Tip()
	if m.Parent != tip.ID {
		return errcode.New(errcode.ChainInvalid, "append incremental %s: parent %s is not the tip %s", m.ID, m.Parent, tip.ID)
	}
	if m.StartPosition != tip.EndPosition {
		return errcode.New(errcode.ChainInvalid, "append incremental %s: start position %s is not the tip's end position %s",
			m.ID, m.StartPosition, tip.EndPosition)
	}
	// A link already in the catalog cannot chain onto the tip: its
	// content-derived ID covers its parent, which is not the tip (or it
	// would be the tip's own ID). So no search of the catalog is needed.
	if m.ID == tip.ID {
		return errcode.New(errcode.ChainInvalid, "append incremental %s: already in the catalog", m.ID)
	}
	cat.appendTail(LinkFromManifest(m))
	return nil
}

// Rotate caps the last segment and starts a new one with the sealed full
// backup full, whose parent must be the current tip. Otherwise it returns a
// coded errcode.ChainInvalid error and leaves cat unchanged.
func (cat *Catalog) Rotate(full *Manifest) error {
	if len(cat.Segments) == 0 {
		return errcode.New(errcode.ChainInvalid, "rotate to full %s: catalog has no segment", full.ID)
	}
	if full.Kind != KindFull {
		return errcode.New(errcode.ChainInvalid, "rotate to full %s: manifest kind is %q", full.ID, full.Kind)
	}
	if !ValidID(full.ID) {
		return errcode.New(errcode.ChainInvalid, "rotate: manifest ID %q is not sealed", full.ID)
	}
	last := &cat.Segments[len(cat.Segments)-1]
	if last.Capped {
		return errcode.New(errcode.ChainInvalid, "rotate to full %s: last segment is already capped", full.ID)
	}
	if tip := cat.Tip(); full.Parent != tip.ID {
		return errcode.New(errcode.ChainInvalid, "rotate to full %s: parent %s is not the tip %s", full.ID, full.Parent, tip.ID)
	}
	if _, _, dup := cat.Find(full.ID); dup {
		return errcode.New(errcode.ChainInvalid, "rotate to full %s: already in the catalog", full.ID)
	}
	last.Capped = true
	cat.Segments = append(cat.Segments[:len(cat.Segments):len(cat.Segments)], Segment{Full: LinkFromManifest(full)})
	cat.tail = new(atomic.Bool)
	return nil
}

// encodeCatalog returns the stored form of a catalog generation: indented
// JSON, for operators who read it, followed by a newline.
func encodeCatalog(cat *Catalog) ([]byte, error) {
	b, err := json.MarshalIndent(cat, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode catalog generation %d: %w", cat.Generation, err)
	}
	return append(b, '\n'), nil
}

// decodeCatalog parses the whole generation (format 1 or 2) or fence
// (format 3, no segments) stored at key and checks its format version.
func decodeCatalog(key string, data []byte) (*Catalog, error) {
	var cat Catalog
	if err := strictUnmarshal(data, &cat); err != nil {
		return nil, errcode.Wrap(errcode.ManifestInvalid, err, "catalog %s does not parse", key)
	}
	switch cat.FormatVersion {
	case CatalogFormatVersion, CatalogFormatVersionLayouts:
	case CatalogFormatVersionCommits:
		if len(cat.Segments) != 0 {
			return nil, errcode.New(errcode.ChainInvalid, "catalog %s: a generation of format %d stored whole names segments", key, cat.FormatVersion)
		}
	default:
		return nil, errcode.New(errcode.FormatUnsupported,
			"catalog %s has format version %d; this sluice reads versions %d to %d", key, cat.FormatVersion, CatalogFormatVersion, CatalogFormatVersionCommits)
	}
	return &cat, nil
}

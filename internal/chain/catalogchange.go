package chain

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/sluicehq/sluice/internal/errcode"
)

// CatalogCommit is the stored form of one generation of a chain of catalog
// format 3 (catalog/commit-<generation>.json): what the generation changed
// in the one before it, never the whole catalog.
type CatalogCommit struct {
	// FormatVersion is CatalogFormatVersionCommits.
	FormatVersion int `json:"format_version"`
	// ChainID is the chain's ID, as in the catalog.
	ChainID string `json:"chain_id"`
	// Generation is the generation this commit makes; it equals the
	// number in its key.
	Generation int64 `json:"generation"`
	// Prev is the SHA-256 (lowercase hex) of the stored bytes of
	// generation Generation-1: a commit, or a whole generation of format
	// 1 or 2 for the first commit after them. Empty for generation 1.
	Prev string `json:"prev,omitempty"`
	// Source is set by generation 1 only: the source the chain is taken from.
	Source *SourceInfo `json:"source,omitempty"`
	// Change is what the generation changes.
	Change CatalogChange `json:"change"`
	// Signature, when the producer signs, covers the commit's encoding
	// without it, and so (through Prev) every generation before it.
	Signature *CatalogSignature `json:"signature,omitempty"`
}

// CatalogChange is the change one commit makes to the segment list, applied
// in field order: Drop, then Edits, then Add.
type CatalogChange struct {
	// Drop is how many segments are removed from the front (a prune).
	Drop int `json:"drop,omitempty"`
	// Edits change segments that remain, by index after Drop.
	Edits []SegmentEdit `json:"edits,omitempty"`
	// Add are segments appended at the end (a rotation's new segment, or
	// generation 1's first).
	Add []Segment `json:"add,omitempty"`
}

// SegmentEdit changes one segment: either Replace (a compaction's rewrite)
// or Append and Cap.
type SegmentEdit struct {
	// Segment is the segment's index after the change's Drop.
	Segment int `json:"segment"`
	// Append are incrementals added at the segment's end.
	Append []Link `json:"append,omitempty"`
	// Cap marks the segment capped (a rotation).
	Cap bool `json:"cap,omitempty"`
	// Layout, when set, is the segment's new layout (a compaction that
	// keeps the segment's links).
	Layout string `json:"layout,omitempty"`
	// Replace, when set, is the segment's new content.
	Replace *Segment `json:"replace,omitempty"`
}

// storedState is what a reader or writer knows about how a catalog it holds
// is stored.
type storedState struct {
	// hash is the SHA-256 of the generation's stored bytes (a commit, or a
	// whole generation of format 1 or 2): the next commit's Prev.
	hash string
	// legacy is true when the generation is a whole generation of format 1
	// or 2 and no commit follows it yet.
	legacy bool
	// checkpoint is the newest checkpoint's generation known to the holder
	// (0 for none); since and sinceBytes count the commits after it.
	checkpoint int64
	since      int64
	sinceBytes int64
	// verified is when (UnixNano) a read found generation+1 missing: a
	// missing next commit is trusted for refreshHorizon after it.
	verified atomic.Int64
	// pages are the checkpoint pages known to be stored.
	pages *pageSet
	// signed is true when the generation's commit (or checkpoint) carries
	// a signature.
	signed bool
}

// newStored returns a stored state; pages nil starts an empty page set.
func newStored(hash string, legacy bool, checkpoint, since, sinceBytes int64, pages *pageSet) *storedState {
	if pages == nil {
		pages = &pageSet{}
	}
	return &storedState{hash: hash, legacy: legacy, checkpoint: checkpoint, since: since, sinceBytes: sinceBytes, pages: pages}
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// diffCatalog returns the change that turns base into next. base is nil for
// generation 1. It fails with errcode.ChainInvalid when next is not a
// change a commit can express (another chain, or segments removed from the
// end).
func diffCatalog(base, next *Catalog) (CatalogChange, error) {
	var ch CatalogChange
	if base == nil {
		ch.Add = next.Segments
		return ch, nil
	}
	bad := func(format string, args ...any) (CatalogChange, error) {
		return CatalogChange{}, errcode.New(errcode.ChainInvalid, "commit generation %d: "+format, append([]any{next.Generation}, args...)...)
	}
	if next.ChainID != base.ChainID || next.Source != base.Source {
		return bad("chain ID or source differs from generation %d's", base.Generation)
	}
	if len(next.Segments) == 0 {
		return bad("no segments")
	}
	first := next.Segments[0].Full.ID
	ch.Drop = -1
	for i := range base.Segments {
		if base.Segments[i].Full.ID == first {
			ch.Drop = i
			break
		}
	}
	if ch.Drop < 0 {
		return bad("first full %s is not in generation %d", first, base.Generation)
	}
	kept := base.Segments[ch.Drop:]
	if len(kept) > len(next.Segments) {
		return bad("removes segments from the end of generation %d", base.Generation)
	}
	for i := range kept {
		b, n := &kept[i], &next.Segments[i]
		if n.Layout != b.Layout && n.Layout != "" && sameLinks(b, n) && b.Capped == n.Capped {
			ch.Edits = append(ch.Edits, SegmentEdit{Segment: i, Layout: n.Layout})
			continue
		}
		if extends(b, n) {
			e := SegmentEdit{Segment: i, Append: n.Incrementals[len(b.Incrementals):], Cap: n.Capped && !b.Capped}
			if len(e.Append) > 0 || e.Cap {
				ch.Edits = append(ch.Edits, e)
			}
			continue
		}
		seg := *n
		ch.Edits = append(ch.Edits, SegmentEdit{Segment: i, Replace: &seg})
	}
	ch.Add = next.Segments[len(kept):]
	return ch, nil
}

// extends reports whether segment n is segment b with incrementals appended
// and perhaps capped.
func extends(b, n *Segment) bool {
	if !linkEqual(b.Full, n.Full) || b.Layout != n.Layout || (b.Capped && !n.Capped) || len(n.Incrementals) < len(b.Incrementals) {
		return false
	}
	if len(b.Incrementals) == 0 || &b.Incrementals[0] == &n.Incrementals[0] {
		return true // one backing array: one prefix
	}
	for i := range b.Incrementals {
		if !linkEqual(b.Incrementals[i], n.Incrementals[i]) {
			return false
		}
	}
	return true
}

// sameLinks reports whether segments b and n hold the same links.
func sameLinks(b, n *Segment) bool {
	if !linkEqual(b.Full, n.Full) || len(b.Incrementals) != len(n.Incrementals) {
		return false
	}
	if len(b.Incrementals) == 0 || &b.Incrementals[0] == &n.Incrementals[0] {
		return true
	}
	for i := range b.Incrementals {
		if !linkEqual(b.Incrementals[i], n.Incrementals[i]) {
			return false
		}
	}
	return true
}

func linkEqual(a, b Link) bool {
	return a.ID == b.ID && a.Kind == b.Kind && a.Parent == b.Parent && a.StartPosition == b.StartPosition &&
		a.EndPosition == b.EndPosition && a.CreatedAt.Equal(b.CreatedAt) &&
		a.Rows == b.Rows && a.Changes == b.Changes && a.Transactions == b.Transactions
}

// appendOnly reports whether ch only drops segments, appends incrementals
// to or caps the last kept segment, and adds segments without layouts: the
// changes validateCatalogChange checks without walking the whole catalog.
func appendOnly(base *Catalog, ch CatalogChange) bool {
	if base == nil {
		return false
	}
	kept := len(base.Segments) - ch.Drop
	for _, e := range ch.Edits {
		if e.Replace != nil || e.Layout != "" || e.Segment != kept-1 {
			return false
		}
	}
	for _, s := range ch.Add {
		if s.Layout != "" {
			return false
		}
	}
	return true
}

// validateCatalogChange checks next, made from base by the append-only change ch,
// as ValidateCatalog would, looking only at what ch touches: base passed
// those checks when it was committed or loaded. (A link ID that appeared
// twice would need a manifest whose content-derived ID, which covers its
// parent, repeats an earlier link's: the check is left to ValidateCatalog.)
func validateCatalogChange(base, next *Catalog, ch CatalogChange) error {
	bad := func(format string, args ...any) error {
		return errcode.New(errcode.ChainInvalid, "catalog generation %d: "+format, append([]any{next.Generation}, args...)...)
	}
	if next.Generation != base.Generation+1 {
		return bad("made from generation %d", base.Generation)
	}
	if len(next.Segments) == 0 {
		return bad("no segments")
	}
	for si := range next.Segments {
		if touched := si >= len(base.Segments)-ch.Drop-1; !touched {
			continue
		}
		seg := &next.Segments[si]
		if last := si == len(next.Segments)-1; seg.Capped == last {
			return bad("segment %d: only the last segment is uncapped", si)
		}
	}
	if ch.Drop > 0 && !ValidID(next.Segments[0].Full.Parent) {
		return bad("segment 0 full %s follows pruned segments but has no parent", next.Segments[0].Full.ID)
	}
	kept := len(base.Segments) - ch.Drop
	prev := base.Tip()
	added := map[string]bool{}
	check := func(l *Link, kind string, segment int) error {
		if err := checkLink(l, &prev, kind); err != nil {
			return bad("segment %d: %v", segment, err)
		}
		if added[l.ID] {
			return bad("segment %d: link %s appears twice", segment, l.ID)
		}
		added[l.ID] = true
		prev = *l
		return nil
	}
	for _, e := range ch.Edits {
		if len(e.Append) > 0 && base.Segments[ch.Drop+e.Segment].Capped {
			return bad("segment %d is capped and gains links", e.Segment)
		}
		for i := range e.Append {
			if err := check(&e.Append[i], KindIncremental, e.Segment); err != nil {
				return err
			}
		}
	}
	for si := range ch.Add {
		seg := &ch.Add[si]
		if err := check(&seg.Full, KindFull, kept+si); err != nil {
			return err
		}
		for i := range seg.Incrementals {
			if err := check(&seg.Incrementals[i], KindIncremental, kept+si); err != nil {
				return err
			}
		}
	}
	// A new link may not repeat the ID of one the chain keeps: Find and
	// Path would answer for the wrong one.
	if len(added) > 0 {
		for si := ch.Drop; si < len(base.Segments); si++ {
			seg := &base.Segments[si]
			if added[seg.Full.ID] {
				return bad("link %s appears twice (segment %d holds it already)", seg.Full.ID, si-ch.Drop)
			}
			for i := range seg.Incrementals {
				if id := seg.Incrementals[i].ID; added[id] {
					return bad("link %s appears twice (segment %d holds it already)", id, si-ch.Drop)
				}
			}
		}
	}
	return nil
}

// checkLink checks a link added after prev.
func checkLink(l, prev *Link, kind string) error {
	switch {
	case !ValidID(l.ID):
		return fmt.Errorf("ID %q is not a manifest ID", l.ID)
	case l.Kind != kind:
		return fmt.Errorf("link %s has kind %q, want %q", l.ID, l.Kind, kind)
	case l.EndPosition == "":
		return fmt.Errorf("link %s has no end position", l.ID)
	case l.ID == prev.ID:
		return fmt.Errorf("link %s appears twice", l.ID)
	case l.Parent != prev.ID:
		return fmt.Errorf("link %s: parent %q is not the previous link %s", l.ID, l.Parent, prev.ID)
	case kind == KindFull && l.StartPosition != l.EndPosition:
		return fmt.Errorf("full %s: start position %s differs from its end position %s", l.ID, l.StartPosition, l.EndPosition)
	case kind == KindIncremental && l.StartPosition != prev.EndPosition:
		return fmt.Errorf("incremental %s: start position %s is not its parent's end position %s", l.ID, l.StartPosition, prev.EndPosition)
	}
	return nil
}

// applyCommit returns the catalog c makes from base (nil for generation 1).
// base is not changed. It checks that c follows base: its generation, chain
// and Prev hash; a commit that does not is a coded errcode.ChainInvalid
// error.
func applyCommit(key string, base *Catalog, baseHash string, c *CatalogCommit) (next *Catalog, err error) {
	bad := func(format string, args ...any) (*Catalog, error) {
		return nil, errcode.New(errcode.ChainInvalid, "catalog commit %s: "+format, append([]any{key}, args...)...)
	}
	if base == nil {
		if c.Generation != 1 || c.Prev != "" || c.Source == nil || c.Change.Drop != 0 || len(c.Change.Edits) != 0 {
			return bad("does not start a chain")
		}
		next = &Catalog{ChainID: c.ChainID, Generation: 1, Source: *c.Source}
	} else {
		switch {
		case c.Generation != base.Generation+1:
			return bad("holds generation %d after generation %d", c.Generation, base.Generation)
		case c.ChainID != base.ChainID:
			return bad("names chain %s, generation %d names %s", c.ChainID, base.Generation, base.ChainID)
		case c.Prev != baseHash:
			return bad("follows a generation %d with hash %s, the stored one has %s", base.Generation, c.Prev, baseHash)
		case c.Source != nil:
			return bad("sets the source after generation 1")
		case c.Change.Drop < 0 || c.Change.Drop > len(base.Segments):
			return bad("drops %d of %d segments", c.Change.Drop, len(base.Segments))
		}
		next = base.Next()
		next.parent = nil
		next.Segments = next.Segments[c.Change.Drop:]
	}
	next.FormatVersion = CatalogFormatVersionCommits
	for _, e := range c.Change.Edits {
		if e.Segment < 0 || e.Segment >= len(next.Segments) {
			return bad("edits segment %d of %d", e.Segment, len(next.Segments))
		}
		seg := &next.Segments[e.Segment]
		if e.Replace != nil {
			*seg = *e.Replace
			continue
		}
		if e.Layout != "" {
			seg.Layout = e.Layout
		}
		if len(e.Append) > 0 {
			if e.Segment != len(next.Segments)-1 {
				return bad("appends to segment %d, which is not the last", e.Segment)
			}
			next.appendTail(e.Append...)
		}
		seg.Capped = seg.Capped || e.Cap
	}
	if len(c.Change.Add) > 0 {
		n := len(next.Segments)
		next.Segments = append(next.Segments[:n:n], c.Change.Add...)
		next.tail = new(atomic.Bool)
	}
	if base != nil && appendOnly(base, c.Change) {
		err = validateCatalogChange(base, next, c.Change)
	} else {
		err = ValidateCatalog(next)
	}
	if err != nil {
		return nil, fmt.Errorf("catalog commit %s: %w", key, err)
	}
	return next, nil
}

// encodeCommit returns the stored form of a commit: compact JSON and a
// newline (commits are read by programs; operators read checkpoints).
func encodeCommit(c *CatalogCommit) ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode catalog commit %d: %w", c.Generation, err)
	}
	return append(b, '\n'), nil
}

// decodeCommit parses the commit stored at key and checks its format
// version and generation.
func decodeCommit(key string, gen int64, data []byte) (*CatalogCommit, error) {
	var c CatalogCommit
	if err := strictUnmarshal(data, &c); err != nil {
		return nil, errcode.Wrap(errcode.ManifestInvalid, err, "catalog commit %s does not parse", key)
	}
	if c.FormatVersion != CatalogFormatVersionCommits {
		return nil, errcode.New(errcode.FormatUnsupported,
			"catalog commit %s has format version %d; this sluice reads version %d", key, c.FormatVersion, CatalogFormatVersionCommits)
	}
	if c.Generation != gen {
		return nil, errcode.New(errcode.ChainInvalid, "catalog commit %s holds generation %d", key, c.Generation)
	}
	return &c, nil
}

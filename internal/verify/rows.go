package verify

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/readback"
	"github.com/sluicehq/sluice/internal/value"
)

// Kinds of a differing row.
const (
	RowChanged = "changed" // the key on both sides, other values
	RowMissing = "missing" // on the source only
	RowExtra   = "extra"   // on the target only
)

// RowDiff is one differing row, its values rendered as the comparison
// normalises them (PostgreSQL's text for the column's kind; nil is NULL).
type RowDiff struct {
	Kind string `json:"kind"`
	// Key holds the key columns' values (none for a keyless table).
	Key []*string `json:"key,omitempty"`
	// Source and Target are the row's values on each side, in the order
	// of the table's Columns (only the side that holds it for a missing
	// or extra row).
	Source []*string `json:"source,omitempty"`
	Target []*string `json:"target,omitempty"`
	// Differing names the columns whose values differ (changed rows).
	Differing []string `json:"differing_columns,omitempty"`
	// SourceCopies and TargetCopies count the row on each side (a keyless
	// table, compared as a multiset of rows).
	SourceCopies int `json:"source_copies,omitempty"`
	TargetCopies int `json:"target_copies,omitempty"`
}

// shape is how one table's rows are compared: its stored columns' kinds,
// the target's normalisers, and its key (indexes into the columns; nil for
// a keyless table).
type shape struct {
	tb    *chain.Table
	kinds []value.Kind
	norm  []func(value.Value) value.Value
	key   []int
	row   []value.Value
}

func newShape(tb *chain.Table, dst readback.Snapshot) *shape {
	s := &shape{tb: tb, kinds: make([]value.Kind, len(tb.Columns))}
	for i, c := range tb.Columns {
		s.kinds[i] = c.NeutralKind()
	}
	if n, ok := dst.(readback.Normaliser); ok {
		s.norm = n.Normalisers(tb)
		if !slices.ContainsFunc(s.norm, func(f func(value.Value) value.Value) bool { return f != nil }) {
			s.norm = nil
		}
	}
	if keys := tb.CandidateKeys(); len(keys) > 0 {
		s.key = keys[0]
	}
	return s
}

// normalise applies the target's normalisers to a row (a copy, when any
// applies).
func (s *shape) normalise(row []value.Value) []value.Value {
	if s.norm == nil {
		return row
	}
	s.row = append(s.row[:0], row...)
	for i, f := range s.norm {
		if f != nil && i < len(s.row) {
			s.row[i] = f(s.row[i])
		}
	}
	return s.row
}

// The narrowing: every row falls in a segment named by the leading bits
// of a hash of its normalised key (of the whole row, for a keyless table),
// so both sides place a row alike whatever order their engines sort keys
// in. The first pass digests each side per segment of fanBits bits (their
// sum is the table's checksum); each later pass rereads both sides and
// digests only the rows of the segments that differed, split fanBits
// further; a differing segment of at most leafRows rows a side is read
// row by row and compared by key. Only digests of segments still in
// question and the rows of the last ones are held, never a whole table,
// and at most as many segments are followed as rows are wanted (each
// differing segment holds a differing row).
const (
	fanBits  = 10
	maxBits  = 60
	leafRows = 256
)

// segment is a pair of digests of one key-hash segment.
type segment struct{ src, dst Digest }

// entry is one distinct row of a leaf group, counted on each side.
type entry struct {
	vals     []*string
	src, dst int
}

// group is the rows of a leaf segment under one key.
type group struct {
	hash    uint64
	key     string
	entries map[string]*entry
}

// scanSide reads one side, calling fn with each row's key hash, the
// SHA-256 of its framed values, and (when fn asks for it by keep) the row.
func (s *shape) scanSide(ctx context.Context, snap readback.Snapshot, fn func(h uint64, rowHash [32]byte, enc []byte, row []value.Value) error) error {
	var buf, kbuf []byte
	keyKinds := make([]value.Kind, len(s.key))
	keyVals := make([]value.Value, len(s.key))
	for i, k := range s.key {
		keyKinds[i] = s.kinds[k]
	}
	return snap.Scan(ctx, s.tb, func(r []value.Value) error {
		r = s.normalise(r)
		buf = appendRow(buf[:0], s.kinds, r)
		var h [32]byte
		if s.key == nil {
			h = sha256.Sum256(buf)
		} else {
			for i, k := range s.key {
				keyVals[i] = r[k]
			}
			kbuf = appendRow(kbuf[:0], keyKinds, keyVals)
			h = sha256.Sum256(kbuf)
		}
		return fn(binary.BigEndian.Uint64(h[:8]), sha256.Sum256(buf), buf, r)
	})
}

func prefix(h uint64, bits int) uint64 {
	if bits == 0 {
		return 0
	}
	return h >> (64 - bits)
}

// compareRows compares the two sides at rows depth, filling t's counts,
// checksums and, when they differ, up to maxRows differing rows.
func compareRows(ctx context.Context, src, dst readback.Snapshot, s *shape, maxRows int, t *Table) error {
	for _, c := range s.tb.Columns {
		t.Columns = append(t.Columns, c.Name)
	}
	for _, k := range s.key {
		t.Key = append(t.Key, s.tb.Columns[k].Name)
	}
	open := map[uint64]bool{0: true} // segments read this pass, at bits
	leaf := map[uint64]bool{}        // those of them read row by row
	bits := 0
	var diffs []RowDiff
	var groups map[string]*group
	for pass := 0; ; pass++ {
		children := map[uint64]*segment{}
		groups = map[string]*group{}
		var total segment
		side := func(snap readback.Snapshot, fromSource bool) error {
			return s.scanSide(ctx, snap, func(h uint64, rh [32]byte, enc []byte, row []value.Value) error {
				if pass == 0 {
					if fromSource {
						total.src.addHash(rh)
					} else {
						total.dst.addHash(rh)
					}
				}
				p := prefix(h, bits)
				if !open[p] {
					return nil
				}
				if leaf[p] {
					s.collect(groups, h, enc, row, fromSource)
					return nil
				}
				c := prefix(h, bits+fanBits)
				seg := children[c]
				if seg == nil {
					seg = &segment{}
					children[c] = seg
				}
				if fromSource {
					seg.src.addHash(rh)
				} else {
					seg.dst.addHash(rh)
				}
				return nil
			})
		}
		if err := side(src, true); err != nil {
			return fmt.Errorf("source: %w", err)
		}
		if err := side(dst, false); err != nil {
			return fmt.Errorf("target: %w", err)
		}
		if pass == 0 {
			t.SourceRows, t.TargetRows = total.src.Rows, total.dst.Rows
			t.SourceChecksum, t.TargetChecksum = total.src.Sum(), total.dst.Sum()
			if total.src.Equal(&total.dst) {
				return nil
			}
		}
		diffs = append(diffs, s.diffGroups(groups)...)
		if len(diffs) >= maxRows {
			break
		}
		var differing []uint64
		for c, seg := range children {
			if !seg.src.Equal(&seg.dst) {
				differing = append(differing, c)
			}
		}
		if len(differing) == 0 {
			break
		}
		slices.Sort(differing)
		if want := maxRows - len(diffs); len(differing) > want {
			differing, t.MoreRows = differing[:want], true
		}
		bits += fanBits
		open, leaf = map[uint64]bool{}, map[uint64]bool{}
		for _, c := range differing {
			open[c] = true
			seg := children[c]
			if bits+fanBits > maxBits || max(seg.src.Rows, seg.dst.Rows) <= leafRows {
				leaf[c] = true
			}
		}
	}
	if len(diffs) > maxRows {
		diffs, t.MoreRows = diffs[:maxRows], true
	}
	t.Rows = diffs
	return nil
}

// collect adds a row of a leaf segment to its key's group.
func (s *shape) collect(groups map[string]*group, h uint64, enc []byte, row []value.Value, fromSource bool) {
	var key string
	if s.key == nil {
		key = string(enc)
	} else {
		keyKinds := make([]value.Kind, len(s.key))
		keyVals := make([]value.Value, len(s.key))
		for i, k := range s.key {
			keyKinds[i], keyVals[i] = s.kinds[k], row[k]
		}
		key = string(appendRow(nil, keyKinds, keyVals))
	}
	g := groups[key]
	if g == nil {
		g = &group{hash: h, key: key, entries: map[string]*entry{}}
		groups[key] = g
	}
	e := g.entries[string(enc)]
	if e == nil {
		e = &entry{vals: s.render(row)}
		g.entries[string(enc)] = e
	}
	if fromSource {
		e.src++
	} else {
		e.dst++
	}
}

// render renders a row's values as a comparison sees them.
func (s *shape) render(row []value.Value) []*string {
	out := make([]*string, len(row))
	for i, v := range row {
		if v.Null {
			continue
		}
		b, err := value.EncodePGText(s.kinds[i], v)
		text := string(b)
		if err != nil {
			text = "(not renderable: " + err.Error() + ")"
		}
		out[i] = &text
	}
	return out
}

// diffGroups lists the differing rows of the leaf groups, in the order of
// their key hash and key.
func (s *shape) diffGroups(groups map[string]*group) []RowDiff {
	gs := slices.Collect(maps.Values(groups))
	slices.SortFunc(gs, func(a, b *group) int {
		return cmp.Or(cmp.Compare(a.hash, b.hash), strings.Compare(a.key, b.key))
	})
	var out []RowDiff
	for _, g := range gs {
		var surplusSrc, surplusDst []*entry
		encs := slices.Sorted(maps.Keys(g.entries))
		for _, enc := range encs {
			e := g.entries[enc]
			switch {
			case e.src > e.dst:
				surplusSrc = append(surplusSrc, e)
			case e.dst > e.src:
				surplusDst = append(surplusDst, e)
			}
		}
		if s.key == nil {
			for _, e := range append(surplusSrc, surplusDst...) {
				kind := RowMissing
				if e.dst > e.src {
					kind = RowExtra
				}
				d := RowDiff{Kind: kind, SourceCopies: e.src, TargetCopies: e.dst}
				if e.src > 0 {
					d.Source = clip(e.vals)
				}
				if e.dst > 0 {
					d.Target = clip(e.vals)
				}
				out = append(out, d)
			}
			continue
		}
		if len(surplusSrc) == 1 && len(surplusDst) == 1 && surplusSrc[0].src-surplusSrc[0].dst == 1 && surplusDst[0].dst-surplusDst[0].src == 1 {
			a, b := surplusSrc[0].vals, surplusDst[0].vals
			d := RowDiff{Kind: RowChanged, Key: s.keyOf(a), Source: clip(a), Target: clip(b)}
			for i := range a {
				if !equalText(a[i], b[i]) {
					d.Differing = append(d.Differing, s.tb.Columns[i].Name)
				}
			}
			out = append(out, d)
			continue
		}
		for _, e := range surplusSrc {
			for range e.src - e.dst {
				out = append(out, RowDiff{Kind: RowMissing, Key: s.keyOf(e.vals), Source: clip(e.vals)})
			}
		}
		for _, e := range surplusDst {
			for range e.dst - e.src {
				out = append(out, RowDiff{Kind: RowExtra, Key: s.keyOf(e.vals), Target: clip(e.vals)})
			}
		}
	}
	return out
}

func (s *shape) keyOf(vals []*string) []*string {
	out := make([]*string, len(s.key))
	for i, k := range s.key {
		out[i] = vals[k]
	}
	return clip(out)
}

func equalText(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// clipAt bounds a reported value, so that a report of large values stays
// small enough to travel as a workflow's result.
const clipAt = 256

// clip copies values, cutting each longer than clipAt bytes.
func clip(vals []*string) []*string {
	out := make([]*string, len(vals))
	for i, v := range vals {
		if v == nil || len(*v) <= clipAt {
			out[i] = v
			continue
		}
		cut := *v
		n := clipAt
		for n > 0 && !isRuneStart(cut[n]) {
			n--
		}
		c := fmt.Sprintf("%s… (%d bytes)", cut[:n], len(cut))
		out[i] = &c
	}
	return out
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// rowsSummary is the part of a table's detail that counts the rows named.
func rowsSummary(t Table) string {
	if len(t.Rows) == 0 {
		return ""
	}
	more := ""
	if t.MoreRows {
		more = " (more may differ: raise --max-rows)"
	}
	return fmt.Sprintf("; %d differing row(s) named below%s", len(t.Rows), more)
}

// FormatRow renders one differing row for an operator, in one line: its
// key (or, for a keyless table, the row), and what each side holds.
func FormatRow(t Table, d RowDiff) string {
	pairs := func(names []string, vals []*string) string {
		var b strings.Builder
		for i, v := range vals {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(names[i])
			b.WriteByte('=')
			b.WriteString(show(v))
		}
		return b.String()
	}
	switch {
	case len(t.Key) == 0:
		vals := d.Source
		if vals == nil {
			vals = d.Target
		}
		return fmt.Sprintf("%-8s (%s): source holds %d, target %d", d.Kind, pairs(t.Columns, vals), d.SourceCopies, d.TargetCopies)
	case d.Kind == RowChanged:
		var b strings.Builder
		fmt.Fprintf(&b, "changed  %s:", pairs(t.Key, d.Key))
		for _, name := range d.Differing {
			i := slices.Index(t.Columns, name)
			fmt.Fprintf(&b, " %s source %s, target %s;", name, show(d.Source[i]), show(d.Target[i]))
		}
		return strings.TrimSuffix(b.String(), ";")
	case d.Kind == RowMissing:
		return fmt.Sprintf("missing  %s: on the source only (%s)", pairs(t.Key, d.Key), pairs(t.Columns, d.Source))
	default:
		return fmt.Sprintf("extra    %s: on the target only (%s)", pairs(t.Key, d.Key), pairs(t.Columns, d.Target))
	}
}

func show(v *string) string {
	if v == nil {
		return "NULL"
	}
	return fmt.Sprintf("%q", *v)
}

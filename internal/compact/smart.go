package compact

import (
	"bytes"
	"encoding/binary"

	"github.com/sluicehq/sluice/internal/chain"
)

// collapser folds one incremental's changes per key, across its
// transactions: of the changes to one row of a keyed table only what the
// last state needs is kept (an insert and its updates become one insert, an
// insert then a delete nothing, updates one update, updates then a delete
// one delete). What cannot be folded safely is a barrier that keeps its
// place: everything folded before it is written out first. Barriers are
// truncates, schema changes, changes to a table without exactly one unique
// key (rows of a table with a second unique index may trade values, so their
// order matters), updates that move a row to another key, and changes whose
// image carries no whole key.
type collapser struct {
	defs    map[string]*chain.Table
	entries map[string]*entry
	order   []*entry
	out     []*chain.Change
	// The incremental's first begin and last commit, for the one
	// transaction the output is framed as.
	first, last chain.Change
	seen        bool
	in          int64 // changes read
}

// entry is what is kept of one row: at most a delete followed by an insert.
type entry struct {
	changes []*chain.Change
}

func newCollapser(schema *chain.Schema) *collapser {
	c := &collapser{defs: map[string]*chain.Table{}, entries: map[string]*entry{}}
	if schema != nil {
		for i := range schema.Tables {
			t := schema.Tables[i]
			c.defs[t.QualifiedName()] = &t
		}
	}
	return c
}

// add takes the incremental's next record (the iterator's buffers: it is
// cloned when kept).
func (c *collapser) add(r *chain.Change) {
	switch r.Op {
	case chain.OpBegin:
		if !c.seen {
			c.first, c.seen = *r, true
		}
		return
	case chain.OpCommit:
		c.last = *r
		return
	}
	c.in++
	switch r.Op {
	case chain.OpSchema:
		c.barrier(r)
		if r.Schema != nil {
			t := *r.Schema
			c.defs[t.QualifiedName()] = &t
		}
		return
	case chain.OpTruncate:
		c.barrier(r)
		return
	}
	tb := c.defs[r.Table]
	if tb == nil || !foldable(tb) {
		c.barrier(r)
		return
	}
	keys := tb.CandidateKeys()
	_, img, ok := chain.KeyImage(r, keys)
	if !ok {
		c.barrier(r)
		return
	}
	key := keyOf(r.Table, keys[0], img)
	if r.Op == chain.OpUpdate && r.OldKind != 0 && keyOf(r.Table, keys[0], r.New) != key {
		c.barrier(r) // the row moves to another key
		return
	}
	e := c.entries[key]
	if e == nil {
		e = &entry{}
		c.entries[key] = e
		c.order = append(c.order, e)
	}
	e.fold(r)
}

// fold adds change r to the row's kept changes.
func (e *entry) fold(r *chain.Change) {
	n := len(e.changes)
	if n == 0 {
		e.changes = append(e.changes, clean(r))
		return
	}
	last := e.changes[n-1]
	if r.Op == chain.OpUpdate {
		r = clean(r) // its values are kept in an overlay
	}
	switch {
	case last.Op == chain.OpInsert && r.Op == chain.OpUpdate:
		last.New = overlay(last.New, r.New)
	case last.Op == chain.OpInsert && r.Op == chain.OpDelete:
		e.changes = e.changes[:n-1] // never there for the target
	case last.Op == chain.OpUpdate && r.Op == chain.OpUpdate:
		last.New = overlay(last.New, r.New) // the first update's old image finds the row
	case last.Op == chain.OpUpdate && r.Op == chain.OpDelete:
		e.changes[n-1] = clean(r)
	case last.Op == chain.OpInsert && r.Op == chain.OpInsert:
		e.changes[n-1] = clean(r)
	default:
		// A delete then an insert (the row replaced), or an order the
		// source should not produce: kept as it came.
		e.changes = append(e.changes, clean(r))
	}
}

// barrier writes out everything folded so far, then r.
func (c *collapser) barrier(r *chain.Change) {
	c.flush()
	c.out = append(c.out, clean(r))
}

func (c *collapser) flush() {
	for _, e := range c.order {
		c.out = append(c.out, e.changes...)
	}
	c.order = c.order[:0]
	clear(c.entries)
}

// records returns the collapsed incremental: one transaction without an
// apply identity, framed by the first begin's position and the last
// commit's, so the chain's severed-transaction check still holds for it.
func (c *collapser) records() []chain.Change {
	c.flush()
	begin := chain.Change{Op: chain.OpBegin, CommitLSN: c.last.CommitLSN, LSN: c.first.LSN, CommitTime: c.last.CommitTime}
	commit := chain.Change{Op: chain.OpCommit, CommitLSN: c.last.CommitLSN, LSN: c.last.LSN, EndLSN: c.last.EndLSN, CommitTime: c.last.CommitTime}
	out := make([]chain.Change, 0, len(c.out)+2)
	out = append(out, begin)
	for _, r := range c.out {
		out = append(out, *r)
	}
	return append(out, commit)
}

// foldable reports whether a table's changes fold per key: it has exactly
// one key a replayed row is found by and no other unique index.
func foldable(t *chain.Table) bool {
	unique := 0
	if len(t.PrimaryKey) > 0 {
		unique++
	}
	for _, ix := range t.Indexes {
		if ix.Unique {
			unique++
		}
	}
	return unique == 1 && len(t.CandidateKeys()) == 1
}

// keyOf names a row of table by its key columns' values in img.
func keyOf(table string, key []int, img []chain.Value) string {
	var b bytes.Buffer
	b.WriteString(table)
	b.WriteByte(0)
	for _, k := range key {
		if k >= len(img) {
			b.WriteByte('?')
			continue
		}
		b.WriteByte(img[k].Kind)
		b.Write(binary.AppendUvarint(nil, uint64(len(img[k].Data))))
		b.Write(img[k].Data)
	}
	return b.String()
}

// clean copies a change out of the iterator, without its identity.
func clean(r *chain.Change) *chain.Change {
	out := r.Clone()
	out.XID, out.CommitLSN, out.Ordinal, out.Tx, out.Identified = 0, 0, 0, "", false
	return out
}

// overlay is the image after an update: the update's values, and the
// earlier image's where the update left a column unchanged ('u').
func overlay(earlier, update []chain.Value) []chain.Value {
	out := make([]chain.Value, len(update))
	copy(out, update)
	for i := range out {
		if out[i].Kind == chain.ValueUnchanged && i < len(earlier) {
			out[i] = earlier[i]
		}
	}
	return out
}

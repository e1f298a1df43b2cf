package chain

import (
	"slices"
	"strconv"
)

// SuppliedColumns are the columns row images carry: every column that is
// not generated, in table order.
func (t *Table) SuppliedColumns() []Column {
	cols := make([]Column, 0, len(t.Columns))
	for _, c := range t.Columns {
		if c.Generated == "" {
			cols = append(cols, c)
		}
	}
	return cols
}

// CandidateKeys are the keys a replayed row can be found by, as indexes into
// SuppliedColumns: the primary key first, then each of the replay indexes
// (HasReplayKey). A key over a generated column does not count (rows do not
// carry it). Empty for a keyless table.
func (t *Table) CandidateKeys() [][]int {
	pos := map[string]int{}
	n := 0
	for _, c := range t.Columns {
		if c.Generated == "" {
			pos[c.Name] = n
			n++
		}
	}
	var keys [][]int
	add := func(cols []string) {
		key := make([]int, 0, len(cols))
		for _, c := range cols {
			i, ok := pos[c]
			if !ok {
				return
			}
			key = append(key, i)
		}
		for _, k := range keys {
			if slices.Equal(k, key) {
				return
			}
		}
		keys = append(keys, key)
	}
	if len(t.PrimaryKey) > 0 {
		add(t.PrimaryKey)
	}
	for _, ix := range t.replayIndexes() {
		add(ix.Columns)
	}
	return keys
}

// KeyImage chooses the candidate key (an index into keys, as CandidateKeys
// gives them) an update or delete finds its row by, and the image holding
// the key's values: the old image when the change has one, else the new
// one. A key-only old image ('K') may carry a unique index's columns rather
// than the primary key's, so the first candidate it carries whole is taken;
// any other image must carry the first. ok is false when the image carries
// no whole candidate (img is nil when the change has no image at all).
func KeyImage(c *Change, keys [][]int) (ki int, img []Value, ok bool) {
	img = c.New
	if c.OldKind != 0 {
		img = c.Old
	}
	if img == nil {
		return 0, nil, false
	}
	for i, key := range keys {
		whole := true
		for _, k := range key {
			whole = whole && k < len(img) && img[k].Kind == ValueText
		}
		if whole {
			return i, img, true
		}
		if c.OldKind != 'K' {
			break
		}
	}
	return 0, img, false
}

// KeyText joins the values of an image's key columns into one string that
// two images share exactly when they name the same key (a one-column key is
// its value; each value of a longer one is prefixed by its length).
func KeyText(key []int, img []Value) string {
	if len(key) == 1 {
		return string(img[key[0]].Data)
	}
	var b []byte
	for _, k := range key {
		b = strconv.AppendInt(b, int64(len(img[k].Data)), 10)
		b = append(b, ':')
		b = append(b, img[k].Data...)
	}
	return string(b)
}

// SameKey reports whether an update's new image keeps the key its old
// image (img) names: every key column carried by both, with one value.
func SameKey(key []int, img, next []Value) bool {
	for _, k := range key {
		if k >= len(next) || next[k].Kind != ValueText || img[k].Kind != ValueText || string(next[k].Data) != string(img[k].Data) {
			return false
		}
	}
	return true
}

package apply

import (
	"bytes"

	"github.com/sluicehq/sluice/internal/chain"
)

// Router decides how the changes of an incremental spread over lanes. It
// follows the tables' definitions as schema changes go by and never talks
// to a target.
type Router struct {
	keys map[string][][]int // candidate keys by qualified table name
	// byTable holds the tables with more than one unique index (the
	// primary key counts): their changes all go to one lane, in order.
	byTable map[string]bool
}

// NewRouter starts from the table definitions of schema.
func NewRouter(s *chain.Schema) *Router {
	r := &Router{keys: map[string][][]int{}, byTable: map[string]bool{}}
	if s != nil {
		for i := range s.Tables {
			r.follow(&s.Tables[i])
		}
	}
	return r
}

// follow records a table's definition.
func (r *Router) follow(t *chain.Table) {
	name := t.QualifiedName()
	r.keys[name] = t.CandidateKeys()
	unique := 0
	if len(t.PrimaryKey) > 0 {
		unique++
	}
	for _, ix := range t.Indexes {
		if ix.Unique {
			unique++
		}
	}
	r.byTable[name] = unique > 1
}

// Track follows a schema change.
func (r *Router) Track(c *chain.Change) {
	if c.Op != chain.OpSchema || c.Schema == nil {
		return
	}
	r.follow(c.Schema)
}

// Route says how a change may be applied on lanes: a change to one row of a
// keyed table goes to the lane its key hashes to (key holds the key values),
// or, when the table has more than one unique index, to the lane its name
// alone hashes to (key is empty), so that two rows trading a value of a
// secondary unique index keep their order — applied out of order, one would
// collide with the other's old value, or, on MySQL, whose ON DUPLICATE KEY
// UPDATE fires on any unique index, update the wrong row; everything else — keyless tables, a change that moves a row to another key,
// truncates and schema changes — is a barrier, applied alone after every
// lane has committed.
func (r *Router) Route(c *chain.Change) (key [][]byte, barrier bool) {
	switch c.Op {
	case chain.OpInsert, chain.OpUpdate, chain.OpDelete:
	default:
		return nil, true
	}
	keys := r.keys[c.Table]
	if len(keys) == 0 {
		return nil, true
	}
	ki, img, ok := chain.KeyImage(c, keys)
	if !ok {
		return nil, true
	}
	if r.byTable[c.Table] {
		return [][]byte{}, false
	}
	cols := keys[ki]
	key = make([][]byte, len(cols))
	for i, k := range cols {
		key[i] = img[k].Data
	}
	if c.Op == chain.OpUpdate && c.OldKind != 0 {
		// The old image names the row; if the new one names another key,
		// two lanes' rows are involved.
		if ki != 0 || len(c.New) != len(img) {
			return nil, true
		}
		for _, k := range cols {
			if c.New[k].Kind != chain.ValueText || !bytes.Equal(c.New[k].Data, img[k].Data) {
				return nil, true
			}
		}
	}
	return key, false
}

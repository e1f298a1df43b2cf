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
}

// NewRouter starts from the table definitions of schema.
func NewRouter(s *chain.Schema) *Router {
	r := &Router{keys: map[string][][]int{}}
	if s != nil {
		for i := range s.Tables {
			t := &s.Tables[i]
			r.keys[t.QualifiedName()] = t.CandidateKeys()
		}
	}
	return r
}

// Track follows a schema change.
func (r *Router) Track(c *chain.Change) {
	if c.Op != chain.OpSchema || c.Schema == nil {
		return
	}
	r.keys[c.Schema.QualifiedName()] = c.Schema.CandidateKeys()
}

// Route says how a change may be applied on lanes: a change to one row of a
// keyed table goes to the lane its key hashes to (key holds the key values);
// everything else — keyless tables, a change that moves a row to another key,
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

package postgres

import (
	"bytes"

	"github.com/sluicehq/sluice/internal/chain"
)

// Track brings the applier's view of a table up to date with a schema change
// that another applier executes (lanes share one target); it runs no SQL
// except deallocating the table's statements at the next flush.
func (a *Applier) Track(c *chain.Change) {
	if c.Op != chain.OpSchema || c.Schema == nil {
		return
	}
	t := *c.Schema
	name := t.QualifiedName()
	if old := a.tables[name]; old != nil {
		for _, st := range old.stmts {
			if st.ready || st.queued {
				a.queue = append(a.queue, entry{kind: entryDeallocate, op: c.Op, sql: st.name, table: name, xid: c.XID, ordinal: c.Ordinal})
			}
		}
	}
	a.tables[name] = newTableState(&t)
	a.known[t.Schema] = true
}

// Route says how a change may be applied on lanes: a change to one row of a
// keyed table goes to the lane its key hashes to (key holds the key values);
// everything else — keyless tables, a change that moves a row to another key,
// truncates and schema changes — is a barrier, applied alone after every
// lane has committed.
func (a *Applier) Route(c *chain.Change) (key [][]byte, barrier bool) {
	switch c.Op {
	case chain.OpInsert, chain.OpUpdate, chain.OpDelete:
	default:
		return nil, true
	}
	ts := a.tables[c.Table]
	if ts == nil || len(ts.keys) == 0 {
		return nil, true
	}
	ki, img, err := ts.rowKey(c)
	if err != nil {
		return nil, true
	}
	cols := ts.keys[ki]
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

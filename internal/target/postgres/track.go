package postgres

import (
	"github.com/sluicehq/sluice/internal/chain"
)

// Track brings the applier's view of a table up to date with a schema change
// that another applier executes (lanes share one target); it runs no SQL
// except deallocating the table's statements at the next flush.
func (a *applier) Track(c *chain.Change) {
	if c.Op != chain.OpSchema || c.Schema == nil {
		return
	}
	// The change records the table as its source wrote it; a lane tracks
	// it as this target stores it.
	checked, err := a.checkedTable(c.Schema)
	if err != nil {
		if a.err == nil {
			a.err = err
		}
		return
	}
	t := *checked
	name := t.QualifiedName()
	if old := a.tables[name]; old != nil {
		for _, st := range old.stmts {
			if st.ready || st.queued {
				a.queue = append(a.queue, entry{kind: entryDeallocate, op: c.Op, sql: st.name, table: name, xid: c.XID, tx: c.Tx, ordinal: c.Ordinal})
			}
		}
	}
	a.tables[name] = newTableState(&t)
	a.known[t.Schema] = true
}

package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/ddlcheck"
	"github.com/sluicehq/sluice/internal/target/sqlkit"
)

// applier applies change records to the target inside the caller's open
// transaction. It tracks each table's definition as the changes go (a
// schema change record replaces it) and turns every row change into a
// prepared statement, cached per table, operation and column set.
//
// Row images are over a table's supplied columns, which are exactly the
// columns the target stores. On a keyed table an insert is an upsert on
// its key (the arbiter the broker judged on the live table, else the
// chain's first candidate key), so applying it twice converges; updates
// and deletes find the row by its old key. On a keyless table an insert
// adds a row, and updates and deletes need the whole old row and change
// exactly one row equal to it. A value the change left unchanged (TOAST)
// keeps the column as it is. Where batchable allows it, inserts, deletes
// and key-keeping updates are held back per table and sent as multi-row
// statements (batch.go); flush sends what is held, and the lane flushes
// before it commits.
//
// An applier is not safe for concurrent use.
type applier struct {
	tables map[string]*tableState
	// userTypes are the user types the chain records so far, which a
	// schema change record is checked against (ddlcheck.CheckTable).
	userTypes *ddlcheck.Names
	arbiters  map[string][]string
	args      []any
	keyBuf    []byte
	setBuf    []bool
	matchBuf  []bool
	// holdBack lets the applier hold changes back at all: set when the
	// connection enforces no foreign keys.
	holdBack bool
	// groups hold row changes back per table (batch.go).
	groups    []*group
	heldRows  int
	heldBytes int
	keyText   []byte
	maskBuf   []byte
}

// tableState is the applier's view of one table and its statements.
type tableState struct {
	def    *chain.Table
	name   string // the SQLite name
	rel    string // quoted
	cols   []column
	keys   [][]int // candidate keys, as indexes into cols
	insKey []int   // the key an insert arbitrates on; nil for a keyless table
	stmts  sqlkit.Stmts
	// batch is 1 when the applier may hold back the table's changes, -1
	// when it may not, 0 before it asked (batchable).
	batch int8
	seq   []int // see series
}

func newApplier(schema *chain.Schema, arbiters map[string][]string) *applier {
	a := &applier{userTypes: ddlcheck.NamesOf(schema), tables: map[string]*tableState{}, arbiters: arbiters}
	if schema != nil {
		for i := range schema.Tables {
			t := schema.Tables[i]
			a.tables[t.QualifiedName()] = a.newTableState(&t)
		}
	}
	return a
}

func (a *applier) newTableState(t *chain.Table) *tableState {
	ts := &tableState{def: t, name: tableName(t), rel: quoteIdent(tableName(t)), cols: storedColumns(t), keys: t.CandidateKeys(), stmts: sqlkit.Stmts{}}
	if len(ts.keys) > 0 {
		ts.insKey = ts.keys[0]
		names := make([]string, len(ts.cols))
		for i, c := range ts.cols {
			names[i] = c.name
		}
		if idx, ok := sqlkit.Arbiter(names, a.arbiters[t.QualifiedName()], func(s string) string { return s }); ok {
			ts.insKey = idx
		}
	}
	return ts
}

// closeStmts closes the table's prepared statements.
func (ts *tableState) closeStmts() { ts.stmts.Close() }

// close closes every prepared statement of the applier.
func (a *applier) close() {
	for _, ts := range a.tables {
		ts.closeStmts()
	}
}

// apply applies one change on q, inside the caller's transaction. Begin
// and commit records are no-ops.
func (a *applier) apply(ctx context.Context, q execer, c *chain.Change) error {
	switch c.Op {
	case chain.OpBegin, chain.OpCommit:
		return nil
	case chain.OpInsert:
		return a.insert(ctx, q, c)
	case chain.OpUpdate:
		return a.update(ctx, q, c)
	case chain.OpDelete:
		return a.delete(ctx, q, c)
	case chain.OpTruncate, chain.OpSchema:
		if err := a.flush(ctx, q); err != nil {
			return err
		}
		if c.Op == chain.OpTruncate {
			return a.truncate(ctx, q, c)
		}
		return a.schemaChange(ctx, q, c)
	}
	return fmt.Errorf("apply change: unknown operation %#x", byte(c.Op))
}

// changeErr describes a change that cannot be applied (chain.ChangeError).
var changeErr = chain.ChangeError

// table returns the tracked table of a row change and checks its images.
func (a *applier) table(c *chain.Change) (*tableState, error) {
	ts := a.tables[c.Table]
	if ts == nil {
		return nil, changeErr(c, "the table has no recorded schema")
	}
	if err := chain.CheckImages(c, len(ts.cols)); err != nil {
		return nil, err
	}
	return ts, nil
}

// statement returns the table's statement cached under a.keyBuf, preparing
// the SQL build returns on first use.
func (a *applier) statement(ctx context.Context, q execer, ts *tableState, build func() string) (*sql.Stmt, error) {
	return ts.stmts.Get(ctx, q, a.keyBuf, build, classify)
}

// arg decodes value i of an image into the next statement argument.
func (a *applier) arg(ts *tableState, c *chain.Change, i int, v chain.Value) error {
	col := &ts.cols[i]
	x, _, err := col.FromChange(col.name, v)
	if err != nil {
		return fmt.Errorf("apply %s to %s (%s, change %d): %w", c.Op.String(), c.Table, txName(c), c.Ordinal, refuseValue(c.Table, col, err))
	}
	a.args = append(a.args, x)
	return nil
}

// exec runs st with the arguments gathered and forgets them.
func (a *applier) exec(ctx context.Context, st *sql.Stmt, c *chain.Change) error {
	_, err := st.ExecContext(ctx, a.args...)
	clear(a.args)
	a.args = a.args[:0]
	if err != nil {
		return classify(err, fmt.Sprintf("apply %s to %s (%s, change %d)", c.Op.String(), c.Table, txName(c), c.Ordinal))
	}
	return nil
}

// appendMask appends a bitmap of flags to a.keyBuf and counts the set ones.
func (a *applier) appendMask(flags []bool) int {
	var n int
	a.keyBuf, n = sqlkit.AppendMask(a.keyBuf, flags)
	return n
}

var growFlags = sqlkit.GrowFlags

func (a *applier) insert(ctx context.Context, q execer, c *chain.Change) error {
	ts, err := a.table(c)
	if err != nil {
		return err
	}
	if len(c.New) == 0 {
		return changeErr(c, "no new row image")
	}
	for i, v := range c.New {
		if v.Kind == chain.ValueUnchanged {
			return changeErr(c, "column %s is marked unchanged in an insert", ts.cols[i].name)
		}
	}
	held, err := a.batchable(ctx, q, ts)
	if err != nil {
		return err
	}
	if held {
		if err := a.gather(ts, c, c.New, ts.series()); err != nil {
			return err
		}
		return a.hold(ctx, q, ts, c, func(g *group) *heldRows { return &g.inserts }, ts.insKey)
	}
	a.keyBuf = append(a.keyBuf[:0], 'I')
	st, err := a.statement(ctx, q, ts, func() string { return insertRowsSQL(ts, 1) })
	if err != nil {
		return err
	}
	for i, v := range c.New {
		if err := a.arg(ts, c, i, v); err != nil {
			return err
		}
	}
	return a.exec(ctx, st, c)
}

// rowKey chooses the key an update or delete finds its row by, and the
// image holding its values: the old image when there is one, else the new
// one. A key-only old image may carry a unique index's columns rather than
// the primary key's, so the first candidate it carries whole is taken.
func (ts *tableState) rowKey(c *chain.Change) (int, []chain.Value, error) {
	ki, img, ok := chain.KeyImage(c, ts.keys)
	switch {
	case img == nil:
		return 0, nil, changeErr(c, "no row image to find the row by")
	case !ok:
		return 0, nil, changeErr(c, "the row image carries no value for a key column")
	}
	return ki, img, nil
}

// setFlags marks the columns an update sets: those the new image carries.
func (a *applier) setFlags(c *chain.Change) []bool {
	flags := growFlags(&a.setBuf, len(c.New))
	for i, v := range c.New {
		flags[i] = v.Kind != chain.ValueUnchanged
	}
	return flags
}

func (a *applier) update(ctx context.Context, q execer, c *chain.Change) error {
	ts, err := a.table(c)
	if err != nil {
		return err
	}
	if len(c.New) == 0 {
		return changeErr(c, "no new row image")
	}
	if len(ts.keys) == 0 {
		if err := a.flushTable(ctx, q, ts); err != nil {
			return err
		}
		return a.keylessChange(ctx, q, ts, c)
	}
	ki, img, err := ts.rowKey(c)
	if err != nil {
		return err
	}
	held, err := a.batchable(ctx, q, ts)
	if err != nil {
		return err
	}
	if held && ki == 0 && chain.SameKey(ts.keys[0], img, c.New) {
		return a.holdUpdate(ctx, q, ts, c, img)
	}
	// A key change goes alone, after what the table holds.
	if err := a.flushTable(ctx, q, ts); err != nil {
		return err
	}
	set := a.setFlags(c)
	a.keyBuf = append(a.keyBuf[:0], 'U', byte(ki), byte(ki>>8))
	if a.appendMask(set) == 0 {
		return nil
	}
	key := ts.keys[ki]
	st, err := a.statement(ctx, q, ts, func() string {
		return "UPDATE " + ts.rel + " SET " + assignments(ts, set) + " WHERE " + keyMatch(ts, key)
	})
	if err != nil {
		return err
	}
	for i, v := range c.New {
		if set[i] {
			if err := a.arg(ts, c, i, v); err != nil {
				return err
			}
		}
	}
	for _, k := range key {
		if err := a.arg(ts, c, k, img[k]); err != nil {
			return err
		}
	}
	return a.exec(ctx, st, c)
}

func assignments(ts *tableState, set []bool) string {
	var parts []string
	for i, f := range set {
		if f {
			parts = append(parts, ts.cols[i].quoted+" = ?")
		}
	}
	return strings.Join(parts, ", ")
}

func keyMatch(ts *tableState, key []int) string {
	parts := make([]string, len(key))
	for i, k := range key {
		parts[i] = ts.cols[k].quoted + " = ?"
	}
	return strings.Join(parts, " AND ")
}

func (a *applier) delete(ctx context.Context, q execer, c *chain.Change) error {
	ts, err := a.table(c)
	if err != nil {
		return err
	}
	if len(ts.keys) == 0 {
		if err := a.flushTable(ctx, q, ts); err != nil {
			return err
		}
		return a.keylessChange(ctx, q, ts, c)
	}
	if c.OldKind == 0 {
		return changeErr(c, "a delete without an old row image")
	}
	ki, img, err := ts.rowKey(c)
	if err != nil {
		return err
	}
	key := ts.keys[ki]
	held, err := a.batchable(ctx, q, ts)
	if err != nil {
		return err
	}
	if held && ki == 0 {
		if err := a.gather(ts, c, img, key); err != nil {
			return err
		}
		return a.hold(ctx, q, ts, c, func(g *group) *heldRows { return &g.deletes }, ts.leading())
	}
	a.keyBuf = append(a.keyBuf[:0], 'D', byte(ki), byte(ki>>8))
	st, err := a.statement(ctx, q, ts, func() string { return "DELETE FROM " + ts.rel + " WHERE " + keyMatch(ts, key) })
	if err != nil {
		return err
	}
	for _, k := range key {
		if err := a.arg(ts, c, k, img[k]); err != nil {
			return err
		}
	}
	return a.exec(ctx, st, c)
}

// keylessChange updates or deletes one row of a keyless table equal to the
// change's whole old row (REPLICA IDENTITY FULL): the first such row by
// rowid, so of two identical rows exactly one changes.
func (a *applier) keylessChange(ctx context.Context, q execer, ts *tableState, c *chain.Change) error {
	if c.OldKind != 'O' {
		return changeErr(c, "table %s has no key and the change carries no whole old row (REPLICA IDENTITY FULL is needed to %s its rows)", c.Table, c.Op.String())
	}
	rowid := rowidName(ts.cols)
	if rowid == "" {
		return changeErr(c, "keyless table %s has columns named rowid, _rowid_ and oid, so the target cannot name one of its rows", c.Table)
	}
	match := growFlags(&a.matchBuf, len(c.Old))
	some := false
	for i, v := range c.Old {
		match[i] = v.Kind != chain.ValueUnchanged
		some = some || match[i]
	}
	if !some {
		return changeErr(c, "the old row image of keyless table %s has no comparable value", c.Table)
	}
	var set []bool
	a.keyBuf = append(a.keyBuf[:0], byte(c.Op))
	if c.Op == chain.OpUpdate {
		set = a.setFlags(c)
		if a.appendMask(set) == 0 {
			return nil
		}
	}
	a.keyBuf = append(a.keyBuf, '/')
	a.appendMask(match)
	st, err := a.statement(ctx, q, ts, func() string {
		var conds []string
		for i, m := range match {
			if m {
				conds = append(conds, ts.cols[i].quoted+" IS ?")
			}
		}
		where := " WHERE " + rowid + " IN (SELECT " + rowid + " FROM " + ts.rel + " WHERE " + strings.Join(conds, " AND ") + " ORDER BY " + rowid + " LIMIT 1)"
		if set == nil {
			return "DELETE FROM " + ts.rel + where
		}
		return "UPDATE " + ts.rel + " SET " + assignments(ts, set) + where
	})
	if err != nil {
		return err
	}
	for i, v := range c.New {
		if set != nil && set[i] {
			if err := a.arg(ts, c, i, v); err != nil {
				return err
			}
		}
	}
	for i, v := range c.Old {
		if match[i] {
			if err := a.arg(ts, c, i, v); err != nil {
				return err
			}
		}
	}
	return a.exec(ctx, st, c)
}

// rowidName is a name of the rowid no column shadows, or "".
func rowidName(cols []column) string {
	for _, n := range []string{"rowid", "_rowid_", "oid"} {
		if !slices.ContainsFunc(cols, func(c column) bool { return foldName(c.name) == n }) {
			return n
		}
	}
	return ""
}

func (a *applier) truncate(ctx context.Context, q execer, c *chain.Change) error {
	for _, name := range c.Tables {
		ts := a.tables[name]
		if ts == nil {
			return fmt.Errorf("apply truncate of %s (%s, change %d): table %s has no recorded schema", strings.Join(c.Tables, ", "), txName(c), c.Ordinal, name)
		}
		if _, err := q.ExecContext(ctx, "DELETE FROM "+ts.rel); err != nil {
			return classify(err, fmt.Sprintf("apply truncate of %s (%s, change %d)", name, txName(c), c.Ordinal))
		}
	}
	return nil
}

// txName names a change's source transaction in messages: by its opaque
// ID (a MySQL-family source's GTID) when it has one, else by its XID.
func txName(c *chain.Change) string {
	if c.Tx != "" {
		return "transaction " + c.Tx
	}
	return fmt.Sprintf("xid %d", c.XID)
}

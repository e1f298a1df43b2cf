package mysql

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
// columns the target stores. On a keyed table an insert is an upsert on its
// key (the arbiter the broker judged on the live table, else the chain's
// first candidate key), so applying it twice converges. MySQL's ON
// DUPLICATE KEY UPDATE fires on any unique index, so it is used only on a
// table whose one unique index is that key; a table with more runs an
// UPDATE by the key and, when it matched no row, a plain INSERT, so a row
// colliding on another unique index fails loudly instead of being
// overwritten. Updates and deletes find the row by its old key. On a
// keyless table an insert adds a row, and updates and deletes need the
// whole old row and change exactly one row equal to it. A value the change
// left unchanged (TOAST) keeps the column as it is. Inserts, deletes and
// key-keeping updates are held back per table and sent as multi-row
// statements (batch.go); flush sends what is held, and the lane flushes
// before it commits.
//
// An applier is not safe for concurrent use.
type applier struct {
	f      flavor
	tables map[string]*tableState
	// userTypes are the user types the chain records so far, which a
	// schema change record is checked against (ddlcheck.CheckTable).
	userTypes *ddlcheck.Names
	arbiters  map[string][]string
	// multiUnique names the live tables with more than one unique index
	// (the probe's finding), beyond what the chain records.
	multiUnique map[string]bool
	args        []any
	keyBuf      []byte
	setBuf      []bool
	matchBuf    []bool
	// groups hold back inserts and deletes per table, to send them as
	// multi-row statements (batch.go); flush sends them.
	groups       []*group
	pendingRows  int
	pendingBytes int
}

// tableState is the applier's view of one table and its statements.
type tableState struct {
	def    *chain.Table
	name   string // the MySQL name
	rel    string // quoted
	cols   []column
	keys   [][]int // candidate keys, as indexes into cols
	insKey []int   // the key an insert arbitrates on; nil for a keyless table
	// guarded is set when the table has a unique index besides insKey, so
	// an insert may not use ON DUPLICATE KEY UPDATE.
	guarded bool
	stmts   sqlkit.Stmts
}

func newApplier(f flavor, schema *chain.Schema, arbiters map[string][]string, multiUnique map[string]bool) *applier {
	a := &applier{userTypes: ddlcheck.NamesOf(schema), f: f, tables: map[string]*tableState{}, arbiters: arbiters, multiUnique: multiUnique}
	if schema != nil {
		for i := range schema.Tables {
			t := schema.Tables[i]
			a.tables[t.QualifiedName()] = a.newTableState(&t)
		}
	}
	return a
}

// uniqueIndexes counts the unique indexes the target creates for t, its
// primary key included.
func uniqueIndexes(t *chain.Table) int {
	n := 0
	if len(t.PrimaryKey) > 0 {
		n++
	}
	for _, ix := range t.Indexes {
		if ix.Unique && indexSkipped(t, ix) == "" && keptIndex(t, ix) {
			n++
		}
	}
	return n
}

func (a *applier) newTableState(t *chain.Table) *tableState {
	ts := &tableState{def: t, name: tableName(t), rel: quoteIdent(tableName(t)), cols: storedColumns(t, a.f), keys: t.CandidateKeys(), stmts: sqlkit.Stmts{}}
	ts.guarded = uniqueIndexes(t) > 1 || a.multiUnique[t.QualifiedName()]
	if len(ts.keys) > 0 {
		ts.insKey = ts.keys[0]
		names := make([]string, len(ts.cols))
		for i, c := range ts.cols {
			names[i] = c.name
		}
		if idx, ok := sqlkit.Arbiter(names, a.arbiters[t.QualifiedName()], foldName); ok {
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

// apply applies one change on q, inside the caller's transaction (a
// schema change and a truncate commit it implicitly). Begin and commit
// records are no-ops.
func (a *applier) apply(ctx context.Context, q execer, c *chain.Change) error {
	switch c.Op {
	case chain.OpBegin, chain.OpCommit:
		return nil
	case chain.OpInsert:
		return a.insert(ctx, q, c)
	case chain.OpDelete:
		return a.delete(ctx, q, c)
	case chain.OpUpdate:
		return a.update(ctx, q, c)
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
	return a.argInto(&a.args, ts, c, i, v)
}

// argInto decodes value i of an image onto args.
func (a *applier) argInto(args *[]any, ts *tableState, c *chain.Change, i int, v chain.Value) error {
	col := &ts.cols[i]
	x, _, err := col.FromChange(col.name, v)
	if err != nil {
		return fmt.Errorf("apply %s to %s (%s, change %d): %w", c.Op.String(), c.Table, txName(c), c.Ordinal, refuseValue(c.Table, col, err))
	}
	*args = append(*args, x)
	return nil
}

// txName names a change's source transaction in messages.
func txName(c *chain.Change) string {
	if c.Tx != "" {
		return "transaction " + c.Tx
	}
	return fmt.Sprintf("xid %d", c.XID)
}

// exec runs st with the arguments gathered, forgets them, and returns the
// rows the statement matched.
func (a *applier) exec(ctx context.Context, st *sql.Stmt, c *chain.Change) (int64, error) {
	res, err := st.ExecContext(ctx, a.args...)
	clear(a.args)
	a.args = a.args[:0]
	if err != nil {
		return 0, a.execErr(err, c)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

func (a *applier) execErr(err error, c *chain.Change) error {
	if retryable(err) {
		return err // the lane retries the transaction in place
	}
	return classify(err, fmt.Sprintf("apply %s to %s (%s, change %d)", c.Op.String(), c.Table, txName(c), c.Ordinal))
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
	if !batchable(ts) {
		return a.guardedInsert(ctx, q, ts, c)
	}
	return a.hold(ctx, q, ts, c, 'I', c.New)
}

// insertSQL inserts rows rows of every stored column; with upsert, a row
// already there under a unique key is updated to it instead.
func (a *applier) insertSQL(ts *tableState, upsert bool, rows int) string {
	names := make([]string, len(ts.cols))
	for i, c := range ts.cols {
		names[i] = c.quoted
	}
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(ts.cols)), ", ") + ")"
	s := "INSERT INTO " + ts.rel + " (" + strings.Join(names, ", ") + ") VALUES " + strings.TrimSuffix(strings.Repeat(one+", ", rows), ", ")
	if !upsert {
		return s
	}
	var set []string
	for i, n := range names {
		if slices.Contains(ts.insKey, i) {
			continue
		}
		if a.f.aliasInsert() {
			set = append(set, n+" = sluice_new."+n)
		} else {
			set = append(set, n+" = VALUES("+n+")")
		}
	}
	if len(set) == 0 {
		k := names[ts.insKey[0]]
		set = append(set, k+" = "+k)
	}
	if a.f.aliasInsert() {
		s += " AS sluice_new"
	}
	return s + " ON DUPLICATE KEY UPDATE " + strings.Join(set, ", ")
}

// guardedInsert upserts on a table with more than one unique index: an
// UPDATE of every column by the arbiter key, and a plain INSERT when it
// matched no row.
func (a *applier) guardedInsert(ctx context.Context, q execer, ts *tableState, c *chain.Change) error {
	set := growFlags(&a.setBuf, len(ts.cols))
	for i := range set {
		set[i] = !slices.Contains(ts.insKey, i)
	}
	a.keyBuf = append(a.keyBuf[:0], 'G')
	st, err := a.statement(ctx, q, ts, func() string {
		assign := assignments(ts, set)
		if assign == "" {
			k := ts.cols[ts.insKey[0]].quoted
			assign = k + " = " + k
		}
		return "UPDATE " + ts.rel + " SET " + assign + " WHERE " + keyMatch(ts, ts.insKey)
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
	for _, k := range ts.insKey {
		if err := a.arg(ts, c, k, c.New[k]); err != nil {
			return err
		}
	}
	matched, err := a.exec(ctx, st, c)
	if err != nil || matched > 0 {
		return err
	}
	a.keyBuf = append(a.keyBuf[:0], 'P')
	ins, err := a.statement(ctx, q, ts, func() string { return a.insertSQL(ts, false, 1) })
	if err != nil {
		return err
	}
	for i, v := range c.New {
		if err := a.arg(ts, c, i, v); err != nil {
			return err
		}
	}
	_, err = a.exec(ctx, ins, c)
	return err
}

// rowKey chooses the key an update or delete finds its row by, and the
// image holding its values: the old image when there is one, else the new
// one.
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
	if batchable(ts) && chain.SameKey(ts.keys[ki], img, c.New) {
		return a.holdUpdate(ctx, q, ts, c, img)
	}
	if err := a.flushHeld(ctx, q, ts, img, c.New); err != nil {
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
	_, err = a.exec(ctx, st, c)
	return err
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
	if !batchable(ts) {
		return a.deleteOne(ctx, q, ts, c, ki, img)
	}
	return a.hold(ctx, q, ts, c, 'D', img)
}

// deleteOne deletes the row of key ki (whose values img holds) at once.
func (a *applier) deleteOne(ctx context.Context, q execer, ts *tableState, c *chain.Change, ki int, img []chain.Value) error {
	key := ts.keys[ki]
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
	_, err = a.exec(ctx, st, c)
	return err
}

// flushHeld sends ts's group when it holds the row an update names by its
// old key (img) or moves to by its new one.
func (a *applier) flushHeld(ctx context.Context, q execer, ts *tableState, img, next []chain.Value) error {
	if !batchable(ts) || len(ts.keys) != 1 {
		return nil
	}
	key := ts.keys[0]
	held := a.holding(ts, chain.KeyText(key, img))
	if !held && len(next) == len(ts.cols) {
		carried := true
		for _, k := range key {
			carried = carried && next[k].Kind == chain.ValueText
		}
		held = carried && a.holding(ts, chain.KeyText(key, next))
	}
	if !held {
		return nil
	}
	return a.flushTable(ctx, q, ts)
}

// keylessChange updates or deletes one row of a keyless table equal to the
// change's whole old row (REPLICA IDENTITY FULL), compared NULL-safely
// (<=>), with LIMIT 1, so of two identical rows exactly one changes.
func (a *applier) keylessChange(ctx context.Context, q execer, ts *tableState, c *chain.Change) error {
	if c.OldKind != 'O' {
		return changeErr(c, "table %s has no key and the change carries no whole old row (REPLICA IDENTITY FULL is needed to %s its rows)", c.Table, c.Op.String())
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
				conds = append(conds, ts.cols[i].quoted+" <=> ?")
			}
		}
		where := " WHERE " + strings.Join(conds, " AND ") + " LIMIT 1"
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
	_, err = a.exec(ctx, st, c)
	return err
}

// truncate empties each table with TRUNCATE TABLE, which commits
// implicitly; applying it again (a crash before its mark committed) finds
// the tables already empty, as nothing is applied between it and its mark.
func (a *applier) truncate(ctx context.Context, q execer, c *chain.Change) error {
	for _, name := range c.Tables {
		ts := a.tables[name]
		if ts == nil {
			return fmt.Errorf("apply truncate of %s (%s, change %d): table %s has no recorded schema", strings.Join(c.Tables, ", "), txName(c), c.Ordinal, name)
		}
		if _, err := q.ExecContext(ctx, "TRUNCATE TABLE "+ts.rel); err != nil {
			if retryable(err) {
				return err
			}
			return classify(err, fmt.Sprintf("apply truncate of %s (%s, change %d)", name, txName(c), c.Ordinal))
		}
	}
	return nil
}

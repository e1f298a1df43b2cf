package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/ddlcheck"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/value"
)

// schemaChange turns the live table into the change's new definition and
// tracks it. DDL commits implicitly on MySQL, so the broker applies a
// schema change alone (target.ImplicitCommitter) and it must be idempotent:
// a crash after the DDL and before its mark applies it again. So it
// converges rather than replays — it compares the live table with the new
// definition and runs only what is still missing (converge), and the
// default fill for added columns touches only rows still lacking it.
func (a *applier) schemaChange(ctx context.Context, q execer, c *chain.Change) error {
	next, old, err := a.nextTable(c)
	if err != nil {
		return err
	}
	if err := a.namesBesides(next.def.QualifiedName()).takeTable(next.def); err != nil {
		return fmt.Errorf("apply schema change of %s (%s, change %d): %w", c.Table, txName(c), c.Ordinal, err)
	}
	if old != nil {
		old.closeStmts()
		a.forget(old)
	}
	var oldDef *chain.Table
	if old != nil {
		oldDef = old.def
	}
	if err := converge(ctx, q, a.f, oldDef, next.def); err != nil {
		if retryable(err) {
			return err
		}
		return fmt.Errorf("apply schema change of %s (%s, change %d): %w", c.Table, txName(c), c.Ordinal, err)
	}
	a.tables[next.def.QualifiedName()] = next
	return nil
}

// track moves the applier's view of a table past a schema change applied
// elsewhere, without SQL.
func (a *applier) track(c *chain.Change) {
	if c.Op != chain.OpSchema {
		return
	}
	next, old, err := a.nextTable(c)
	if err != nil {
		return
	}
	if old != nil {
		old.closeStmts()
		a.forget(old)
	}
	a.tables[next.def.QualifiedName()] = next
}

// nextTable checks a schema change record and returns the table state of
// its new definition and the current one (nil for a new table).
func (a *applier) nextTable(c *chain.Change) (next, old *tableState, err error) {
	def := c.Schema
	if def == nil || def.Name == "" {
		return nil, nil, changeErr(c, "schema change without a table definition")
	}
	name := def.QualifiedName()
	if c.Table != "" && c.Table != name {
		return nil, nil, changeErr(c, "the record names table %s but its definition is of %s", c.Table, name)
	}
	if err := ddlcheck.CheckTable(def, a.userTypes); err != nil {
		return nil, nil, err
	}
	t := *def
	return a.newTableState(&t), a.tables[name], nil
}

// namesBesides is the set of MySQL names every tracked table but one takes.
func (a *applier) namesBesides(qualified string) nameSet {
	n := newNameSet()
	for name, ts := range a.tables {
		if name != qualified {
			_ = n.takeTable(ts.def)
		}
	}
	return n
}

// liveColumn is one column of a live table.
type liveColumn struct {
	name           string
	nullable       bool
	generated      bool
	autoInc        bool
	hasDefaultExpr bool
}

// liveTable is what information_schema says of a live table.
type liveTable struct {
	exists  bool
	view    bool
	columns []liveColumn
	// indexes by name ("PRIMARY" for the primary key), each its columns in
	// key order; prefix and functional key parts are recorded as "".
	indexes map[string][]string
	unique  map[string]bool
}

func (l *liveTable) column(name string) (liveColumn, bool) {
	for _, c := range l.columns {
		if foldName(c.name) == foldName(name) {
			return c, true
		}
	}
	return liveColumn{}, false
}

// readLive reads a live table's columns and indexes.
func readLive(ctx context.Context, q execer, name string) (*liveTable, error) {
	lt := &liveTable{indexes: map[string][]string{}, unique: map[string]bool{}}
	tableType, err := objectType(ctx, q, name)
	if err != nil || tableType == "" {
		return lt, err
	}
	lt.exists = true
	if tableType == "VIEW" {
		lt.view = true
		return lt, nil
	}
	rows, err := q.QueryContext(ctx, `SELECT COLUMN_NAME, IS_NULLABLE, EXTRA, COALESCE(GENERATION_EXPRESSION, ''), COALESCE(COLUMN_DEFAULT, '')
		FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, name)
	if err != nil {
		return nil, classify(err, "read the columns of "+name)
	}
	for rows.Next() {
		var c liveColumn
		var nullable, extra, gen, def string
		if err := rows.Scan(&c.name, &nullable, &extra, &gen, &def); err != nil {
			rows.Close()
			return nil, classify(err, "read the columns of "+name)
		}
		up := strings.ToUpper(extra)
		c.nullable = nullable == "YES"
		c.generated = gen != "" || strings.Contains(up, "GENERATED") || strings.Contains(up, "VIRTUAL") || strings.Contains(up, "PERSISTENT") || strings.Contains(up, "STORED")
		c.autoInc = strings.Contains(up, "AUTO_INCREMENT")
		c.hasDefaultExpr = strings.Contains(up, "DEFAULT_GENERATED") || strings.Contains(def, "(")
		lt.columns = append(lt.columns, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, classify(err, "read the columns of "+name)
	}
	rows, err = q.QueryContext(ctx, `SELECT INDEX_NAME, NON_UNIQUE, COALESCE(COLUMN_NAME, ''), SUB_PART IS NOT NULL
		FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY INDEX_NAME, SEQ_IN_INDEX`, name)
	if err != nil {
		return nil, classify(err, "read the indexes of "+name)
	}
	defer rows.Close()
	for rows.Next() {
		var ix, col string
		var nonUnique int
		var prefix bool
		if err := rows.Scan(&ix, &nonUnique, &col, &prefix); err != nil {
			return nil, classify(err, "read the indexes of "+name)
		}
		if prefix {
			col = "" // a prefix of a column is not the column
		}
		lt.indexes[ix] = append(lt.indexes[ix], col)
		lt.unique[ix] = nonUnique == 0
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err, "read the indexes of "+name)
	}
	return lt, nil
}

// sameColumns reports whether two column lists name the same columns in
// the same order, without case.
func sameColumns(a, b []string) bool {
	return slices.EqualFunc(a, b, func(x, y string) bool { return foldName(x) == foldName(y) })
}

// converge makes the live table match next, running only what is still
// missing, so that running it again after a crash at any point finishes
// the job: it creates a missing table; in one ALTER TABLE it drops the
// columns and indexes next lacks, adds the columns it lacks (NULL-able at
// first), changes the columns whose type changed from old or whose NULL-
// ability differs, and sets the primary key and indexes; it then gives the
// added columns their constant defaults on the rows lacking them, and
// makes the added NOT NULL columns NOT NULL.
func converge(ctx context.Context, q execer, f flavor, old, next *chain.Table) error {
	name := tableName(next)
	live, err := readLive(ctx, q, name)
	if err != nil {
		return err
	}
	if live.view {
		return errcode.New(errcode.BrokerKeylessTable, "a view stands under the name of table %s (MySQL %s); the broker writes only to tables", next.QualifiedName(), name)
	}
	if !live.exists {
		if _, err := q.ExecContext(ctx, createTableSQL(next, f, true)); err != nil {
			return classify(err, "create table "+name)
		}
		if clauses := indexClauses(next); len(clauses) > 0 {
			if _, err := q.ExecContext(ctx, "ALTER TABLE "+quoteIdent(name)+" "+strings.Join(clauses, ", ")); err != nil {
				return classify(err, "index table "+name)
			}
		}
		return nil
	}
	cols := storedColumns(next, f)
	var prev map[string]column
	if old != nil {
		prev = map[string]column{}
		for _, c := range storedColumns(old, f) {
			prev[foldName(c.name)] = c
		}
	}
	added := func(c column) bool {
		if prev == nil {
			return false
		}
		_, had := prev[foldName(c.name)]
		return !had
	}
	var clauses []string
	// Indexes that change or go are dropped first, so a column they cover
	// can be dropped or changed.
	want := map[string]chain.Index{}
	for _, ix := range next.Indexes {
		if indexSkipped(next, ix) == "" && keptIndex(next, ix) {
			want[foldName(indexName(ix))] = ix
		}
	}
	var liveNames []string
	for ix := range live.indexes {
		liveNames = append(liveNames, ix)
	}
	slices.Sort(liveNames)
	present := map[string]bool{}
	for _, ix := range liveNames {
		if ix == "PRIMARY" {
			continue
		}
		w, ok := want[foldName(ix)]
		switch {
		case ok && w.Unique == live.unique[ix] && sameColumns(w.Columns, live.indexes[ix]):
			present[foldName(ix)] = true
		case ok || recordedIndex(old, ix):
			clauses = append(clauses, "DROP INDEX "+quoteIdent(ix))
		}
	}
	livePK := live.indexes["PRIMARY"]
	if !sameColumns(livePK, next.PrimaryKey) && len(livePK) > 0 {
		clauses = append(clauses, "DROP PRIMARY KEY")
	}
	for _, lc := range live.columns {
		if !slices.ContainsFunc(cols, func(c column) bool { return foldName(c.name) == foldName(lc.name) }) && (old == nil || slices.ContainsFunc(old.Columns, func(c chain.Column) bool { return foldName(c.Name) == foldName(lc.name) })) {
			clauses = append(clauses, "DROP COLUMN "+quoteIdent(lc.name))
		}
	}
	for _, c := range cols {
		lc, ok := live.column(c.name)
		switch {
		case !ok:
			// Added plain: an AUTO_INCREMENT column must be NOT NULL and
			// a key's first, which it may become only below.
			nullable := c
			nullable.notNull, nullable.autoIncrement = false, false
			clauses = append(clauses, "ADD COLUMN "+nullable.columnDef())
		case added(c):
			// Its NOT NULL waits for the default fill below.
		case prev != nil && prev[foldName(c.name)].decl != c.decl, lc.nullable == c.notNull:
			// A changed column keeps an AUTO_INCREMENT the target has,
			// its own or an operator's.
			c.autoIncrement = c.autoIncrement || lc.autoInc
			clauses = append(clauses, "MODIFY COLUMN "+c.columnDef())
		}
	}
	if !sameColumns(livePK, next.PrimaryKey) && len(next.PrimaryKey) > 0 {
		clauses = append(clauses, "ADD PRIMARY KEY ("+quoteList(next.PrimaryKey)+")")
	}
	for _, ix := range next.Indexes {
		if indexSkipped(next, ix) != "" || !keptIndex(next, ix) || present[foldName(indexName(ix))] {
			continue
		}
		kind := "ADD INDEX "
		if ix.Unique {
			kind = "ADD UNIQUE INDEX "
		}
		clauses = append(clauses, kind+quoteIdent(indexName(ix))+" ("+quoteList(ix.Columns)+")")
	}
	if len(clauses) > 0 {
		stmt := "ALTER TABLE " + quoteIdent(name) + " " + strings.Join(clauses, ", ")
		if _, err := q.ExecContext(ctx, stmt); err != nil {
			if retryable(err) {
				return err
			}
			return classify(err, stmt)
		}
	}
	if old == nil {
		return nil
	}
	return fillAdded(ctx, q, next, cols, added)
}

// recordedIndex reports whether t (the definition before a change) records
// an index the target would have created under name: only such indexes are
// dropped, never one an operator added to the target.
func recordedIndex(t *chain.Table, name string) bool {
	if t == nil {
		return false
	}
	for _, ix := range t.Indexes {
		if foldName(indexName(ix)) == foldName(name) {
			return true
		}
	}
	return false
}

// fillAdded gives the columns a schema change added their constant
// default on the rows that lack it (PostgreSQL's ADD COLUMN … DEFAULT
// fills the rows that exist without logging a change for them), then sets
// the NOT NULL of those that have one. A default the target cannot
// compute (a sequence, now(), any other expression) on a table with rows
// is refused, never left NULL.
func fillAdded(ctx context.Context, q execer, next *chain.Table, cols []column, added func(column) bool) error {
	rel := quoteIdent(tableName(next))
	byName := map[string]chain.Column{}
	for _, c := range next.Columns {
		byName[foldName(c.Name)] = c
	}
	var notNull []string
	for i := range cols {
		c := &cols[i]
		if !added(*c) {
			continue
		}
		def := byName[foldName(c.name)].Default
		text, isNull, ok := value.ConstantDefault(def)
		switch {
		case def == "" || isNull:
		case !ok:
			var one int
			err := q.QueryRowContext(ctx, "SELECT 1 FROM "+rel+" WHERE "+c.quoted+" IS NULL LIMIT 1").Scan(&one)
			if err == nil {
				return errcode.New(errcode.TargetValueRefused,
					"table %s, added column %s: its default %s is not a constant, so the MySQL target cannot compute the values PostgreSQL gave the rows that exist",
					next.QualifiedName(), c.name, def)
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return classify(err, "look for rows of "+tableName(next))
			}
		default:
			arg, err := c.FromText([]byte(text))
			if err != nil {
				return refuseValue(next.QualifiedName(), c, err)
			}
			if _, err := q.ExecContext(ctx, "UPDATE "+rel+" SET "+c.quoted+" = ? WHERE "+c.quoted+" IS NULL", arg); err != nil {
				if retryable(err) {
					return err
				}
				return classify(err, fmt.Sprintf("give the rows of %s the default of %s", tableName(next), c.name))
			}
		}
		if c.notNull {
			notNull = append(notNull, "MODIFY COLUMN "+c.columnDef())
		}
	}
	if len(notNull) == 0 {
		return nil
	}
	stmt := "ALTER TABLE " + rel + " " + strings.Join(notNull, ", ")
	if _, err := q.ExecContext(ctx, stmt); err != nil {
		if retryable(err) {
			return err
		}
		return classify(err, stmt)
	}
	slog.Debug("MySQL target: added columns made NOT NULL", "table", next.QualifiedName(), "columns", len(notNull))
	return nil
}

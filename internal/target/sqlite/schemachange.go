package sqlite

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/ddlcheck"
)

// schemaChange applies a table's new definition: it creates a table new
// to the chain, or turns the live table into the new definition — ADD
// COLUMN and DROP COLUMN where they do it, otherwise a rebuild (create the
// new table, copy the rows, drop the old one, rename) — then tracks the new
// definition. Everything runs in the caller's transaction.
func (a *applier) schemaChange(ctx context.Context, q execer, c *chain.Change) error {
	next, old, err := a.nextTable(c)
	if err != nil {
		return err
	}
	if err := a.namesBesides(next.def.QualifiedName()).takeTable(next.def); err != nil {
		return fmt.Errorf("apply schema change of %s (%s, change %d): %w", c.Table, txName(c), c.Ordinal, err)
	}
	var stmts []string
	if old == nil {
		stmts = append([]string{createTableSQL(next.def, next.name, true)}, createIndexSQL(next.def)...)
	} else {
		old.closeStmts()
		a.forget(old)
		if !needsRebuild(old.def, next.def) {
			if err := execAll(ctx, q, alterSQL(old.def, next.def)); err == nil {
				if err := fillDefaults(ctx, q, old.def, next.def, next.name); err != nil {
					return err
				}
				a.tables[next.def.QualifiedName()] = next
				return nil
			}
			// An ALTER SQLite will not run here (a column an index or view of
			// the operator's uses, say): rebuild from where it stopped.
		}
		live, err := liveColumns(ctx, q, next.name)
		if err != nil {
			return err
		}
		stmts = rebuildSQL(next.def, live)
	}
	if err := execAll(ctx, q, stmts); err != nil {
		return fmt.Errorf("apply schema change of %s (%s, change %d): %w", c.Table, txName(c), c.Ordinal, err)
	}
	if old != nil {
		if err := fillDefaults(ctx, q, old.def, next.def, next.name); err != nil {
			return err
		}
	}
	a.tables[next.def.QualifiedName()] = next
	return nil
}

// track moves the applier's view of a table past a schema change applied
// elsewhere, without SQL. The caller sends what is held first (flush).
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

// namesBesides is the set of SQLite names every tracked table but one
// takes.
func (a *applier) namesBesides(qualified string) nameSet {
	n := newNameSet()
	for name, ts := range a.tables {
		if name != qualified {
			_ = n.takeTable(ts.def)
		}
	}
	return n
}

func execAll(ctx context.Context, q execer, stmts []string) error {
	for _, s := range stmts {
		if _, err := q.ExecContext(ctx, s); err != nil {
			return classify(err, s)
		}
	}
	return nil
}

// storedByName indexes a table's stored columns by folded name.
func storedByName(t *chain.Table) map[string]column {
	m := map[string]column{}
	for _, c := range storedColumns(t) {
		m[foldName(c.name)] = c
	}
	return m
}

// needsRebuild reports whether old cannot become next by ALTER TABLE: its
// primary key changed, or a column both have changed its SQLite type or
// its NOT NULL.
func needsRebuild(old, next *chain.Table) bool {
	if !slices.EqualFunc(old.PrimaryKey, next.PrimaryKey, func(x, y string) bool { return foldName(x) == foldName(y) }) {
		return true
	}
	prev := storedByName(old)
	for _, c := range storedColumns(next) {
		p, ok := prev[foldName(c.name)]
		if ok && (p.decl != c.decl || p.notNull != c.notNull) {
			return true
		}
	}
	return false
}

// keptIndexes are the indexes the target creates for t, by SQLite name.
func keptIndexes(t *chain.Table) map[string]chain.Index {
	m := map[string]chain.Index{}
	for _, ix := range t.Indexes {
		if indexSkipped(t, ix) == "" {
			m[foldName(indexName(t, ix.Name))] = ix
		}
	}
	return m
}

// alterSQL turns old into next in place: it creates a missing table, drops the indexes next no
// longer has (or has otherwise), drops the vanished columns, adds the new
// ones, and creates next's indexes. An added column is created without NOT
// NULL: SQLite adds one only with a default, and the chain's own changes
// fill the rows that exist.
func alterSQL(old, next *chain.Table) []string {
	rel := quoteIdent(tableName(next))
	// A table the target lacks is created (and the ALTERs below then fail
	// over to a rebuild).
	stmts := []string{createTableSQL(next, tableName(next), true)}
	nextIx := keptIndexes(next)
	for name, ix := range keptIndexes(old) {
		n, ok := nextIx[name]
		if !ok || n.Unique != ix.Unique || !slices.Equal(n.Columns, ix.Columns) {
			stmts = append(stmts, "DROP INDEX IF EXISTS "+quoteIdent(indexName(old, ix.Name)))
		}
	}
	now := storedByName(next)
	for _, c := range storedColumns(old) {
		if _, ok := now[foldName(c.name)]; !ok {
			stmts = append(stmts, "ALTER TABLE "+rel+" DROP COLUMN "+c.quoted)
		}
	}
	prev := storedByName(old)
	for _, c := range storedColumns(next) {
		if _, ok := prev[foldName(c.name)]; !ok {
			stmts = append(stmts, "ALTER TABLE "+rel+" ADD COLUMN "+c.quoted+" "+c.decl)
		}
	}
	return append(stmts, createIndexSQL(next)...)
}

// rebuildSQL replaces the live table by one of next's definition holding
// its rows: the columns both have are copied, each value converted by the
// new column's affinity (SQLite converts a value only when no information
// is lost, and keeps it as it is otherwise); a new column starts NULL.
func rebuildSQL(next *chain.Table, live []string) []string {
	name := tableName(next)
	tmp := name + rebuildSuffix
	have := map[string]bool{}
	for _, l := range live {
		have[foldName(l)] = true
	}
	var common []string
	for _, c := range storedColumns(next) {
		if have[foldName(c.name)] {
			common = append(common, c.quoted)
		}
	}
	stmts := []string{
		"DROP TABLE IF EXISTS " + quoteIdent(tmp),
		createTableSQL(next, tmp, false),
	}
	if len(common) > 0 {
		cols := strings.Join(common, ", ")
		stmts = append(stmts, "INSERT INTO "+quoteIdent(tmp)+" ("+cols+") SELECT "+cols+" FROM "+quoteIdent(name))
	}
	stmts = append(stmts,
		"DROP TABLE IF EXISTS "+quoteIdent(name),
		"ALTER TABLE "+quoteIdent(tmp)+" RENAME TO "+quoteIdent(name))
	return append(stmts, createIndexSQL(next)...)
}

// liveColumns lists the columns of the live table name.
func liveColumns(ctx context.Context, q execer, name string) ([]string, error) {
	rows, err := q.QueryContext(ctx, "SELECT name FROM pragma_table_info(?)", name)
	if err != nil {
		return nil, classify(err, "read the columns of "+name)
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, classify(err, "read the columns of "+name)
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err, "read the columns of "+name)
	}
	return cols, nil
}

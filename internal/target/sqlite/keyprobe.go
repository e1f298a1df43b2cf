package sqlite

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/target"
)

// liveColumn is one column of a live table, from PRAGMA table_xinfo.
type liveColumn struct {
	name      string
	decl      string
	notNull   bool
	pk        int // position in the primary key from 1; 0 when not in it
	generated bool
}

// keyCandidate is a PRIMARY KEY or UNIQUE index of a live table.
type keyCandidate struct {
	primary bool
	cols    []string
}

// probeKey reads the live table a chain table maps to and judges whether a
// re-written row collides there: some PRIMARY KEY or UNIQUE index without
// a predicate or expressions must be made of NOT NULL, non-generated
// columns the rows supply (a single INTEGER PRIMARY KEY, the rowid, is
// never NULL). The primary key is preferred, then a key the chain records,
// then the first by name. A table keyed only by its rowid has no such key.
func probeKey(ctx context.Context, q execer, qualified string, def *chain.Table) (target.LiveKey, error) {
	var lk target.LiveKey
	name := nameOfQualified(qualified)
	if def != nil {
		name = tableName(def)
	}
	typ, stored, err := objectType(ctx, q, name)
	if err != nil {
		return lk, err
	}
	switch typ {
	case "":
		lk.Missing = true
		return lk, nil
	case "view":
		lk.KindRefusal = qualified + " is a view (SQLite " + stored + ")"
		return lk, nil
	}
	cols, err := liveTableColumns(ctx, q, stored)
	if err != nil {
		return lk, err
	}
	cands, err := liveKeys(ctx, q, stored, cols)
	if err != nil {
		return lk, err
	}
	if len(cands) == 0 {
		lk.Why = "the table has no PRIMARY KEY or UNIQUE index (a rowid alone does not count)"
		return lk, nil
	}
	byName := map[string]liveColumn{}
	for _, c := range cols {
		byName[foldName(c.name)] = c
	}
	supplied := map[string]bool{}
	if def != nil {
		for _, c := range def.SuppliedColumns() {
			supplied[foldName(c.Name)] = true
		}
	}
	rowidAlias := func(k keyCandidate) bool {
		return k.primary && len(k.cols) == 1 && strings.EqualFold(byName[foldName(k.cols[0])].decl, "INTEGER")
	}
	carried, qualifying := false, []keyCandidate{}
	for _, k := range cands {
		all, notNull := true, true
		for _, c := range k.cols {
			lc := byName[foldName(c)]
			all = all && supplied[foldName(c)] && !lc.generated
			notNull = notNull && lc.notNull
		}
		carried = carried || all
		if all && (notNull || rowidAlias(k)) {
			qualifying = append(qualifying, k)
		}
	}
	if len(qualifying) == 0 {
		lk.KeyCols = strings.Join(cands[0].cols, ", ")
		lk.Surrogate = !carried
		lk.Why = "no PRIMARY KEY or UNIQUE index of NOT NULL columns the rows supply"
		return lk, nil
	}
	pick := qualifying[0]
	if !pick.primary && def != nil {
		sup := def.SuppliedColumns()
	chainKeys:
		for _, key := range def.CandidateKeys() {
			names := make([]string, len(key))
			for i, k := range key {
				names[i] = foldName(sup[k].Name)
			}
			for _, k := range qualifying {
				if slices.EqualFunc(k.cols, names, func(x, y string) bool { return foldName(x) == y }) {
					pick = k
					break chainKeys
				}
			}
		}
	}
	lk.Supplied, lk.Arbiter, lk.KeyCols = true, pick.cols, strings.Join(pick.cols, ", ")
	return lk, nil
}

// liveTableColumns reads a live table's columns.
func liveTableColumns(ctx context.Context, q execer, table string) ([]liveColumn, error) {
	rows, err := q.QueryContext(ctx, `SELECT name, type, "notnull", pk, hidden FROM pragma_table_xinfo(?)`, table)
	if err != nil {
		return nil, classify(err, "read the columns of target table "+table)
	}
	defer rows.Close()
	var cols []liveColumn
	for rows.Next() {
		var c liveColumn
		var hidden int
		if err := rows.Scan(&c.name, &c.decl, &c.notNull, &c.pk, &hidden); err != nil {
			return nil, classify(err, "read the columns of target table "+table)
		}
		c.generated = hidden == 2 || hidden == 3
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err, "read the columns of target table "+table)
	}
	return cols, nil
}

// liveKeys lists a live table's primary key (first) and its UNIQUE indexes
// that have no predicate and no expression, sorted by name.
func liveKeys(ctx context.Context, q execer, table string, cols []liveColumn) ([]keyCandidate, error) {
	var out []keyCandidate
	var pk []liveColumn
	for _, c := range cols {
		if c.pk > 0 {
			pk = append(pk, c)
		}
	}
	if len(pk) > 0 {
		sort.Slice(pk, func(i, j int) bool { return pk[i].pk < pk[j].pk })
		k := keyCandidate{primary: true}
		for _, c := range pk {
			k.cols = append(k.cols, c.name)
		}
		out = append(out, k)
	}
	names, err := uniqueIndexNames(ctx, q, table, false)
	if err != nil {
		return nil, err
	}
	for _, ix := range names {
		k, ok, err := indexColumns(ctx, q, ix)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, k)
		}
	}
	return out, nil
}

// uniqueIndexNames lists, by name, the UNIQUE indexes of a live table
// besides its primary key's; partial ones only when partial is set.
func uniqueIndexNames(ctx context.Context, q execer, table string, partial bool) ([]string, error) {
	query := `SELECT name FROM pragma_index_list(?) WHERE "unique" = 1 AND origin <> 'pk'`
	if !partial {
		query += ` AND partial = 0`
	}
	rows, err := q.QueryContext(ctx, query+` ORDER BY name`, table)
	if err != nil {
		return nil, classify(err, "read the indexes of target table "+table)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, classify(err, "read the indexes of target table "+table)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err, "read the indexes of target table "+table)
	}
	return names, nil
}

// indexColumns reads an index's key columns; ok is false for an index on
// an expression or the rowid.
func indexColumns(ctx context.Context, q execer, index string) (keyCandidate, bool, error) {
	rows, err := q.QueryContext(ctx, `SELECT cid, name FROM pragma_index_info(?) ORDER BY seqno`, index)
	if err != nil {
		return keyCandidate{}, false, classify(err, "read index "+index)
	}
	defer rows.Close()
	var k keyCandidate
	ok := true
	for rows.Next() {
		var cid int
		var name *string
		if err := rows.Scan(&cid, &name); err != nil {
			return keyCandidate{}, false, classify(err, "read index "+index)
		}
		if cid < 0 || name == nil {
			ok = false
			continue
		}
		k.cols = append(k.cols, *name)
	}
	if err := rows.Err(); err != nil {
		return keyCandidate{}, false, classify(err, "read index "+index)
	}
	return k, ok && len(k.cols) > 0, nil
}

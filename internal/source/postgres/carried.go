package postgres

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
)

// NotCarried names what a chain deliberately does not carry from a
// PostgreSQL source; restore says so once, and docs/operations.md lists it.
const NotCarried = "roles and their memberships (grants and policies name roles the target must have), object owners (the target's user owns what it creates), publications and subscriptions, grants on schemas, routines and types and default privileges, aggregates, operators, casts, collations and text search configurations, extended statistics, event triggers, foreign servers, indexes of materialized views, and a trigger's ENABLE ALWAYS/REPLICA or DISABLE state (triggers are created enabled)"

// objectReference holds the reg* types and their arrays (regclass, regtype,
// regproc, …): their values are OIDs of the source's own catalog objects.
var objectReference = map[uint32]bool{
	24: true, 2202: true, 2203: true, 2204: true, 2205: true, 2206: true, 3734: true, 3769: true, 4089: true, 4096: true, 4191: true,
	1008: true, 2207: true, 2208: true, 2209: true, 2210: true, 2211: true, 3735: true, 3770: true, 4090: true, 4097: true, 4192: true,
}

// typeFacts is what the carried check needs to know of one user-defined type.
type typeFacts struct {
	name     string
	typtype  string
	category string
	elem     uint32
	base     uint32
	relid    uint32
	relkind  string
	ext      bool
	subtype  uint32
	attrs    []uint32
}

// checkCarried refuses, before anything is written, a schema whose tables
// use something the chain cannot carry or a target could not recreate: a
// column whose type rests on a base type defined outside any extension (or
// on another table's row type), and a default, generated column, check,
// index or type built on a function that is neither built in nor an
// extension's. Every problem is listed in the one refusal.
func checkCarried(ctx context.Context, tx querier, s *chain.Schema, oids []uint32) error {
	problems, err := uncarriedIn(ctx, tx, s.Tables, oids)
	if err != nil {
		return err
	}
	if len(problems) == 0 {
		return nil
	}
	return errcode.New(errcode.SourceSchemaUnsupported, "the source schema cannot be carried whole; nothing was written:\n  %s", strings.Join(problems, "\n  "))
}

// uncarriedIn lists what of tables (whose OIDs are oids) a chain cannot
// carry.
func uncarriedIn(ctx context.Context, q querier, tables []chain.Table, oids []uint32) ([]string, error) {
	types, err := readTypeFacts(ctx, q)
	if err != nil {
		return nil, err
	}
	var problems []string
	used := map[uint32]bool{}
	for _, t := range tables {
		for _, c := range t.Columns {
			if objectReference[c.TypeOID] {
				problems = append(problems, fmt.Sprintf("column %s.%s (%s): a reg* value names a catalog object by its OID, which differs on every other cluster", t.QualifiedName(), c.Name, c.Type))
				continue
			}
			if why := uncarriedType(types, c.TypeOID, map[uint32]bool{}); why != "" {
				problems = append(problems, fmt.Sprintf("column %s.%s (%s): %s", t.QualifiedName(), c.Name, c.Type, why))
			}
			for _, u := range userTypesUnder(types, c.TypeOID, map[uint32]bool{}) {
				used[u] = true
			}
		}
	}
	usedOIDs := make([]uint32, 0, len(used))
	for o := range used {
		usedOIDs = append(usedOIDs, o)
	}
	sort.Slice(usedOIDs, func(i, j int) bool { return usedOIDs[i] < usedOIDs[j] })
	funcs, err := userFunctionUses(ctx, q, oids, usedOIDs)
	if err != nil {
		return nil, err
	}
	return append(problems, funcs...), nil
}

// userTypesUnder lists the user-defined types, no extension's, that type oid
// is built from, itself included.
func userTypesUnder(types map[uint32]*typeFacts, oid uint32, seen map[uint32]bool) []uint32 {
	f, ok := types[oid]
	if !ok || f.ext || seen[oid] {
		return nil
	}
	seen[oid] = true
	out := []uint32{oid}
	for _, d := range append([]uint32{f.elem, f.base, f.subtype}, f.attrs...) {
		if d != 0 {
			out = append(out, userTypesUnder(types, d, seen)...)
		}
	}
	return out
}

// uncarriedType says why the type oid cannot be recreated on a target, or "".
func uncarriedType(types map[uint32]*typeFacts, oid uint32, seen map[uint32]bool) string {
	t, ok := types[oid]
	if !ok || t.ext || seen[oid] {
		return "" // built in, an extension's, or already being looked at
	}
	seen[oid] = true
	switch t.typtype {
	case "b":
		if t.category == "A" && t.elem != 0 {
			return uncarriedType(types, t.elem, seen)
		}
		return fmt.Sprintf("type %s is a base type defined outside any extension, which sluice cannot recreate", t.name)
	case "d":
		return uncarriedType(types, t.base, seen)
	case "r":
		return uncarriedType(types, t.subtype, seen)
	case "m":
		return uncarriedType(types, t.subtype, seen)
	case "c":
		if t.relkind != "c" {
			return fmt.Sprintf("type %s is the row type of a table, which a restore creates beside this one, not before it", t.name)
		}
		for _, a := range t.attrs {
			if why := uncarriedType(types, a, seen); why != "" {
				return why
			}
		}
		return ""
	case "e":
		return ""
	}
	return fmt.Sprintf("type %s (kind %s) cannot be recreated", t.name, t.typtype)
}

// readTypeFacts loads every type created after initdb.
func readTypeFacts(ctx context.Context, tx querier) (map[uint32]*typeFacts, error) {
	rows, err := tx.Query(ctx, `
		SELECT t.oid, format_type(t.oid, NULL), t.typtype::text, t.typcategory::text, t.typelem, t.typbasetype, t.typrelid,
		       coalesce(c.relkind::text, ''),
		       EXISTS (SELECT 1 FROM pg_depend x WHERE x.classid = 'pg_type'::regclass AND x.objid = t.oid AND x.deptype = 'e'),
		       coalesce(r.rngsubtype, mr.rngtypid, 0)
		FROM pg_type t
		LEFT JOIN pg_class c ON c.oid = t.typrelid
		LEFT JOIN pg_range r ON r.rngtypid = t.oid
		LEFT JOIN pg_range mr ON (to_jsonb(mr) ->> 'rngmultitypid')::oid = t.oid
		WHERE t.oid >= $1`, firstUserOID)
	if err != nil {
		return nil, fmt.Errorf("read types: %w", err)
	}
	types := map[uint32]*typeFacts{}
	for rows.Next() {
		var oid uint32
		f := &typeFacts{}
		if err := rows.Scan(&oid, &f.name, &f.typtype, &f.category, &f.elem, &f.base, &f.relid, &f.relkind, &f.ext, &f.subtype); err != nil {
			return nil, fmt.Errorf("read types: %w", err)
		}
		types[oid] = f
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read types: %w", err)
	}
	rows, err = tx.Query(ctx, `
		SELECT t.oid, a.atttypid FROM pg_type t
		JOIN pg_class c ON c.oid = t.typrelid AND c.relkind = 'c'
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		WHERE t.oid >= $1 ORDER BY t.oid, a.attnum`, firstUserOID)
	if err != nil {
		return nil, fmt.Errorf("read composite attributes: %w", err)
	}
	for rows.Next() {
		var typ, att uint32
		if err := rows.Scan(&typ, &att); err != nil {
			return nil, fmt.Errorf("read composite attributes: %w", err)
		}
		if f := types[typ]; f != nil {
			f.attrs = append(f.attrs, att)
		}
	}
	return types, rows.Err()
}

// userFunctionUses lists the defaults, generated columns, checks and indexes
// of the tables oids, and the user-defined types they use (types), that
// call a function a restore would not find: one created after initdb by no
// extension.
func userFunctionUses(ctx context.Context, tx querier, oids, types []uint32) ([]string, error) {
	rows, err := tx.Query(ctx, `
		WITH tables AS (SELECT unnest($1::oid[]) AS oid),
		     uses AS (
		       SELECT d.classid, d.objid, d.objsubid, d.refobjid
		       FROM pg_depend d
		       WHERE d.refclassid = 'pg_proc'::regclass AND d.refobjid >= $2 AND d.deptype = 'n'
		         AND NOT EXISTS (SELECT 1 FROM pg_depend x WHERE x.classid = 'pg_proc'::regclass AND x.objid = d.refobjid AND x.deptype = 'e'))
		SELECT DISTINCT pg_describe_object(u.classid, u.objid, u.objsubid), u.refobjid::regprocedure::text
		FROM uses u
		WHERE (u.classid = 'pg_attrdef'::regclass AND EXISTS (SELECT 1 FROM pg_attrdef ad JOIN tables t ON t.oid = ad.adrelid WHERE ad.oid = u.objid))
		   OR (u.classid = 'pg_constraint'::regclass AND EXISTS (
		         SELECT 1 FROM pg_constraint co WHERE co.oid = u.objid
		           AND (co.conrelid IN (SELECT oid FROM tables)
		                OR co.contypid = ANY($3::oid[]))))
		   OR (u.classid = 'pg_class'::regclass AND EXISTS (SELECT 1 FROM pg_index ix JOIN tables t ON t.oid = ix.indrelid WHERE ix.indexrelid = u.objid))
		   OR (u.classid = 'pg_class'::regclass AND u.objid IN (SELECT oid FROM tables))
		   OR (u.classid = 'pg_type'::regclass AND u.objid = ANY($3::oid[]))
		ORDER BY 1, 2`, oids, firstUserOID, types)
	if err != nil {
		return nil, fmt.Errorf("find functions the schema uses: %w", err)
	}
	var out []string
	for rows.Next() {
		var what, fn string
		if err := rows.Scan(&what, &fn); err != nil {
			return nil, fmt.Errorf("find functions the schema uses: %w", err)
		}
		out = append(out, fmt.Sprintf("%s uses function %s, which sluice does not copy", what, fn))
	}
	return out, rows.Err()
}

package postgres

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
)

// notExtensionMember is a SQL condition true when the pg_type row aliased t
// was not created by an extension (whose objects the extension recreates).
const notExtensionMember = `NOT EXISTS (SELECT 1 FROM pg_depend x WHERE x.classid = 'pg_type'::regclass AND x.objid = t.oid AND x.deptype = 'e')`

// querier is what the schema readers need of a connection or transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// collationName is a SQL expression: the qualified name of collation oid.
func collationName(oid string) string {
	return "(SELECT quote_ident(cn.nspname) || '.' || quote_ident(co.collname) FROM pg_collation co JOIN pg_namespace cn ON cn.oid = co.collnamespace WHERE co.oid = " + oid + ")"
}

// userType is a type being read, with the user types it is built on.
type userType struct {
	chain.UserType
	oid  uint32
	deps []uint32
}

// readUserTypes records the domains, composite types and range types
// outside the system schemas that no extension owns, each as the statement
// that recreates it, ordered so that every type follows the types it uses.
// Enums are recorded apart (readEnums). The session's search_path is empty,
// so every type name in the statements comes back qualified.
func readUserTypes(ctx context.Context, tx querier, s *chain.Schema) error {
	var all []*userType
	for _, read := range []func(context.Context, querier) ([]*userType, error){readDomains, readComposites, readRanges} {
		ts, err := read(ctx, tx)
		if err != nil {
			return err
		}
		all = append(all, ts...)
	}
	ordered, err := dependencyOrder(all)
	if err != nil {
		return err
	}
	for _, t := range ordered {
		s.Types = append(s.Types, t.UserType)
	}
	return nil
}

// baseOf is a SQL expression: the element type of an array type, or the
// type itself.
func baseOf(oid string) string {
	return fmt.Sprintf("(SELECT CASE WHEN e.typcategory = 'A' AND e.typelem <> 0 THEN e.typelem ELSE e.oid END FROM pg_type e WHERE e.oid = %s)", oid)
}

func readDomains(ctx context.Context, tx querier) ([]*userType, error) {
	rows, err := tx.Query(ctx, `
		SELECT t.oid, n.nspname, t.typname, format_type(t.typbasetype, t.typtypmod), `+baseOf("t.typbasetype")+`,
		       t.typnotnull, coalesce(t.typdefault, ''),
		       CASE WHEN t.typcollation <> 0 AND t.typcollation <> b.typcollation
		            THEN `+collationName("t.typcollation")+`
		            ELSE '' END,
		       coalesce((SELECT array_agg('CONSTRAINT ' || quote_ident(c.conname) || ' ' || pg_get_constraintdef(c.oid) ORDER BY c.conname)
		                 FROM pg_constraint c WHERE c.contypid = t.oid AND c.contype = 'c'), '{}')
		FROM pg_type t
		JOIN pg_namespace n ON n.oid = t.typnamespace
		JOIN pg_type b ON b.oid = t.typbasetype
		WHERE t.typtype = 'd' AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND `+notExtensionMember+`
		ORDER BY n.nspname, t.typname`)
	if err != nil {
		return nil, fmt.Errorf("list domains: %w", err)
	}
	var out []*userType
	for rows.Next() {
		u := &userType{}
		var base, collation, def string
		var baseOID uint32
		var notNull bool
		var checks []string
		if err := rows.Scan(&u.oid, &u.Schema, &u.Name, &base, &baseOID, &notNull, &def, &collation, &checks); err != nil {
			return nil, fmt.Errorf("list domains: %w", err)
		}
		u.Kind = chain.TypeDomain
		sql := "CREATE DOMAIN " + QuoteQualified(u.Schema, u.Name) + " AS " + base
		if collation != "" {
			sql += " COLLATE " + collation
		}
		if def != "" {
			sql += " DEFAULT " + def
		}
		if notNull {
			sql += " NOT NULL"
		}
		for _, c := range checks {
			sql += " " + c
		}
		u.Definition = sql
		u.deps = []uint32{baseOID}
		out = append(out, u)
	}
	return out, rows.Err()
}

func readComposites(ctx context.Context, tx querier) ([]*userType, error) {
	rows, err := tx.Query(ctx, `
		SELECT t.oid, n.nspname, t.typname,
		       coalesce(array_agg(quote_ident(a.attname) || ' ' || format_type(a.atttypid, a.atttypmod) ||
		                 CASE WHEN a.attcollation <> 0 AND a.attcollation <> at.typcollation
		                      THEN ' COLLATE ' || `+collationName("a.attcollation")+`
		                      ELSE '' END
		                 ORDER BY a.attnum) FILTER (WHERE a.attnum IS NOT NULL), '{}'),
		       coalesce(array_agg(`+baseOf("a.atttypid")+`) FILTER (WHERE a.attnum IS NOT NULL), '{}')
		FROM pg_type t
		JOIN pg_namespace n ON n.oid = t.typnamespace
		JOIN pg_class c ON c.oid = t.typrelid AND c.relkind = 'c'
		LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		LEFT JOIN pg_type at ON at.oid = a.atttypid
		WHERE t.typtype = 'c' AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND `+notExtensionMember+`
		GROUP BY t.oid, n.nspname, t.typname
		ORDER BY n.nspname, t.typname`)
	if err != nil {
		return nil, fmt.Errorf("list composite types: %w", err)
	}
	var out []*userType
	for rows.Next() {
		u := &userType{}
		var attrs []string
		if err := rows.Scan(&u.oid, &u.Schema, &u.Name, &attrs, &u.deps); err != nil {
			return nil, fmt.Errorf("list composite types: %w", err)
		}
		u.Kind = chain.TypeComposite
		u.Definition = "CREATE TYPE " + QuoteQualified(u.Schema, u.Name) + " AS (" + strings.Join(attrs, ", ") + ")"
		out = append(out, u)
	}
	return out, rows.Err()
}

func readRanges(ctx context.Context, tx querier) ([]*userType, error) {
	// The multirange type (PostgreSQL 14 and later) is read through jsonb so
	// the query also runs on servers whose pg_range has no such column.
	rows, err := tx.Query(ctx, `
		SELECT t.oid, n.nspname, t.typname, format_type(r.rngsubtype, NULL), `+baseOf("r.rngsubtype")+`,
		       CASE WHEN NOT oc.opcdefault THEN quote_ident(ocn.nspname) || '.' || quote_ident(oc.opcname) ELSE '' END,
		       CASE WHEN r.rngcollation <> 0 AND r.rngcollation <> st.typcollation
		            THEN `+collationName("r.rngcollation")+`
		            ELSE '' END,
		       CASE WHEN r.rngsubdiff <> 0 THEN r.rngsubdiff::regprocedure::text ELSE '' END,
		       coalesce((SELECT quote_ident(mn.nspname) || '.' || quote_ident(m.typname) FROM pg_type m JOIN pg_namespace mn ON mn.oid = m.typnamespace
		                 WHERE m.oid = (to_jsonb(r) ->> 'rngmultitypid')::oid), '')
		FROM pg_type t
		JOIN pg_namespace n ON n.oid = t.typnamespace
		JOIN pg_range r ON r.rngtypid = t.oid
		JOIN pg_type st ON st.oid = r.rngsubtype
		JOIN pg_opclass oc ON oc.oid = r.rngsubopc
		JOIN pg_namespace ocn ON ocn.oid = oc.opcnamespace
		WHERE t.typtype = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND `+notExtensionMember+`
		ORDER BY n.nspname, t.typname`)
	if err != nil {
		return nil, fmt.Errorf("list range types: %w", err)
	}
	var out []*userType
	for rows.Next() {
		u := &userType{}
		var subtype, opclass, collation, diff, multirange string
		var subOID uint32
		if err := rows.Scan(&u.oid, &u.Schema, &u.Name, &subtype, &subOID, &opclass, &collation, &diff, &multirange); err != nil {
			return nil, fmt.Errorf("list range types: %w", err)
		}
		u.Kind = chain.TypeRange
		opts := []string{"SUBTYPE = " + subtype}
		if opclass != "" {
			opts = append(opts, "SUBTYPE_OPCLASS = "+opclass)
		}
		if collation != "" {
			opts = append(opts, "COLLATION = "+collation)
		}
		if diff != "" {
			// regprocedure prints "name(argtypes)"; the option takes the name.
			name, _, _ := strings.Cut(diff, "(")
			opts = append(opts, "SUBTYPE_DIFF = "+name)
		}
		if multirange != "" {
			opts = append(opts, "MULTIRANGE_TYPE_NAME = "+multirange)
		}
		u.Definition = "CREATE TYPE " + QuoteQualified(u.Schema, u.Name) + " AS RANGE (" + strings.Join(opts, ", ") + ")"
		u.deps = []uint32{subOID}
		out = append(out, u)
	}
	return out, rows.Err()
}

// dependencyOrder sorts types so each follows the recorded types it uses;
// among types free to go, the order is by schema and name, so the same
// schema always records the same order.
func dependencyOrder(types []*userType) ([]*userType, error) {
	byOID := map[uint32]*userType{}
	for _, t := range types {
		byOID[t.oid] = t
	}
	waiting := map[uint32]int{}
	users := map[uint32][]*userType{}
	for _, t := range types {
		for _, d := range t.deps {
			if _, ok := byOID[d]; ok && d != t.oid {
				waiting[t.oid]++
				users[d] = append(users[d], t)
			}
		}
	}
	var ready, out []*userType
	for _, t := range types {
		if waiting[t.oid] == 0 {
			ready = append(ready, t)
		}
	}
	less := func(a, b *userType) bool {
		if a.Schema != b.Schema {
			return a.Schema < b.Schema
		}
		return a.Name < b.Name
	}
	for len(ready) > 0 {
		sort.Slice(ready, func(i, j int) bool { return less(ready[i], ready[j]) })
		t := ready[0]
		ready = ready[1:]
		out = append(out, t)
		for _, u := range users[t.oid] {
			if waiting[u.oid]--; waiting[u.oid] == 0 {
				ready = append(ready, u)
			}
		}
	}
	if len(out) != len(types) {
		var stuck []string
		for _, t := range types {
			if waiting[t.oid] > 0 {
				stuck = append(stuck, t.Schema+"."+t.Name)
			}
		}
		return nil, fmt.Errorf("user-defined types depend on each other in a cycle: %s", strings.Join(stuck, ", "))
	}
	return out, nil
}

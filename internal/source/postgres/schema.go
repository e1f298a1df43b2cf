// Package postgres reads a PostgreSQL source: its schema, a consistent
// snapshot of every table for a full backup, and (later) its logical log.
package postgres

import (
	"context"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/filter"
	"github.com/sluicehq/sluice/internal/value"
)

// firstUserOID is the first OID PostgreSQL hands to user-created objects;
// types below it are built in and have the same OID on every cluster.
const firstUserOID = 16384

// ReadSchema records every ordinary table outside the system schemas, with
// its columns, keys, indexes and constraints, plus the enums, sequences and
// extensions they use. It runs inside tx so it sees the snapshot. The session
// must have an empty search_path so every name comes back qualified.
func ReadSchema(ctx context.Context, tx pgx.Tx) (*chain.Schema, []uint32, error) {
	s, oids, err := readSchema(ctx, tx)
	if err != nil {
		return nil, nil, err
	}
	if err := checkCarried(ctx, tx, s, oids); err != nil {
		return nil, nil, err
	}
	return s, oids, nil
}

// readSchema is ReadSchema without the check that the chain can carry the
// tables: a filtered full checks only the tables and columns it keeps.
func readSchema(ctx context.Context, tx pgx.Tx) (*chain.Schema, []uint32, error) {
	s := &chain.Schema{}
	rows, err := tx.Query(ctx, `
		SELECT c.oid, n.nspname, c.relname, c.relreplident::text,
		       CASE WHEN c.relkind = 'p' THEN pg_get_partkeydef(c.oid) ELSE '' END,
		       coalesce(pn.nspname || '.' || p.relname, ''),
		       CASE WHEN c.relispartition THEN pg_get_expr(c.relpartbound, c.oid) ELSE '' END
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_inherits i ON c.relispartition AND i.inhrelid = c.oid
		LEFT JOIN pg_class p ON p.oid = i.inhparent
		LEFT JOIN pg_namespace pn ON pn.oid = p.relnamespace
		WHERE c.relkind IN ('r', 'p')
		  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
		  AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp%'
		  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
		                  AND d.objid = c.oid AND d.deptype = 'e')
		ORDER BY n.nspname, c.relname`)
	if err != nil {
		return nil, nil, fmt.Errorf("list tables: %w", err)
	}
	var oids []uint32
	for rows.Next() {
		var t chain.Table
		var oid uint32
		if err := rows.Scan(&oid, &t.Schema, &t.Name, &t.ReplicaIdentity, &t.PartitionKey, &t.PartitionOf, &t.PartitionBound); err != nil {
			return nil, nil, fmt.Errorf("list tables: %w", err)
		}
		oids = append(oids, oid)
		s.Tables = append(s.Tables, t)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("list tables: %w", err)
	}
	for i := range s.Tables {
		if err := readTable(ctx, tx, oids[i], &s.Tables[i]); err != nil {
			return nil, nil, fmt.Errorf("table %s: %w", s.Tables[i].QualifiedName(), err)
		}
	}
	if err := readEnums(ctx, tx, s); err != nil {
		return nil, nil, err
	}
	if err := readUserTypes(ctx, tx, s); err != nil {
		return nil, nil, err
	}
	if err := readSequences(ctx, tx, s); err != nil {
		return nil, nil, err
	}
	var extSchemas []string
	if err := tx.QueryRow(ctx, `SELECT coalesce(array_agg(e.extname::text ORDER BY e.extname), '{}'), coalesce(array_agg(n.nspname::text ORDER BY e.extname), '{}')
		FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname <> 'plpgsql'`).Scan(&s.Extensions, &extSchemas); err != nil {
		return nil, nil, fmt.Errorf("list extensions: %w", err)
	}
	seen := map[string]bool{}
	for _, t := range s.Tables {
		seen[t.Schema] = true
	}
	for _, e := range s.Enums {
		seen[e.Schema] = true
	}
	for _, u := range s.Types {
		seen[u.Schema] = true
	}
	for i, e := range s.Extensions {
		if s.ExtensionSchemas == nil {
			s.ExtensionSchemas = map[string]string{}
		}
		s.ExtensionSchemas[e] = extSchemas[i]
		if extSchemas[i] != "pg_catalog" {
			seen[extSchemas[i]] = true
		}
	}
	for _, q := range s.Sequences {
		seen[q.Schema] = true
	}
	for n := range seen {
		s.Schemas = append(s.Schemas, n)
	}
	sort.Strings(s.Schemas)
	return s, oids, nil
}

// preflightSchema reads the schema as it stands, before any slot or
// publication exists, so a schema the chain cannot carry, or one the filter
// refuses (a key column excluded, a mask the column cannot take), is
// refused while the source is still untouched (the snapshot's own read
// checks it again).
func preflightSchema(ctx context.Context, conn *pgx.Conn, f *filter.Filter) error {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return classify(err, "read source schema")
	}
	defer tx.Rollback(context.Background())
	// A fixed value the server refuses aborts this transaction, and ends
	// the read with the refusal.
	_, _, _, err = readShapedSchema(ctx, tx, f, fixedEncoder(ctx, conn.PgConn()))
	return classify(err, "read source schema")
}

func readTable(ctx context.Context, tx pgx.Tx, oid uint32, t *chain.Table) error {
	rows, err := tx.Query(ctx, `
		SELECT a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.atttypid, a.attnotnull,
		       coalesce(CASE WHEN a.attgenerated = '' THEN pg_get_expr(d.adbin, d.adrelid) END, ''),
		       a.attidentity::text,
		       coalesce(CASE WHEN a.attgenerated <> '' THEN pg_get_expr(d.adbin, d.adrelid) END, ''),
		       ty.typtype::text, ty.typelem, ty.typbasetype,
		       coalesce(el.typtype::text, ''),
		       CASE WHEN ty.typtype = 'd' THEN format_type(ty.typbasetype, ty.typtypmod) ELSE '' END,
		       coalesce(bt.typtype::text, ''),
		       coalesce((SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder) FROM pg_enum e
		                 WHERE e.enumtypid = CASE WHEN ty.typtype = 'e' THEN ty.oid
		                                          WHEN el.typtype = 'e' THEN el.oid
		                                          WHEN bt.typtype = 'e' THEN bt.oid END), '{}')
		FROM pg_attribute a
		JOIN pg_type ty ON ty.oid = a.atttypid
		LEFT JOIN pg_type el ON el.oid = ty.typelem AND ty.typcategory = 'A'
		LEFT JOIN pg_type bt ON bt.oid = ty.typbasetype AND ty.typtype = 'd'
		LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped
		ORDER BY a.attnum`, oid)
	if err != nil {
		return fmt.Errorf("columns: %w", err)
	}
	names := map[int16]string{}
	for rows.Next() {
		var c chain.Column
		var num int16
		var typtype, eltyptype, baseType, basetyptype string
		var elem, base uint32
		var labels []string
		if err := rows.Scan(&num, &c.Name, &c.Type, &c.TypeOID, &c.NotNull, &c.Default, &c.Identity, &c.Generated,
			&typtype, &elem, &base, &eltyptype, &baseType, &basetyptype, &labels); err != nil {
			return fmt.Errorf("columns: %w", err)
		}
		names[num] = c.Name
		c.Encoding = columnEncoding(c.TypeOID, typtype, elem, base, eltyptype)
		k := columnKind(c, typtype, elem, eltyptype, base, baseType, basetyptype, labels)
		c.Kind = &k
		if c.Encoding == chain.EncodingBinary && opaqueKind(k) && !xmlBased(c.TypeOID, elem, base) {
			// Binary forms of kind other (inet, money, geometry, ranges …)
			// only PostgreSQL reads: as text every engine can hold them.
			// xml stays binary: its binary input normalizes the XML
			// declaration as parsing does, its text input keeps it
			// verbatim, and only the former lets a keyless target row
			// match the old row a change names.
			c.Encoding = chain.EncodingText
		}
		t.Columns = append(t.Columns, c)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("columns: %w", err)
	}

	rows, err = tx.Query(ctx, `
		SELECT ic.relname, ix.indisprimary, ix.indisunique, ix.indpred IS NOT NULL,
		       ix.indkey::int2[], pg_get_indexdef(ix.indexrelid),
		       coalesce(con.conname, ''), coalesce(con.contype::text, '')
		FROM pg_index ix
		JOIN pg_class ic ON ic.oid = ix.indexrelid
		LEFT JOIN pg_constraint con ON con.conindid = ix.indexrelid AND con.conrelid = ix.indrelid AND con.contype IN ('p','u','x')
		WHERE ix.indrelid = $1
		ORDER BY ic.relname`, oid)
	if err != nil {
		return fmt.Errorf("indexes: %w", err)
	}
	for rows.Next() {
		var ix chain.Index
		var primary bool
		var keys []int16
		var conName, conType string
		if err := rows.Scan(&ix.Name, &primary, &ix.Unique, &ix.Partial, &keys, &ix.Definition, &conName, &conType); err != nil {
			return fmt.Errorf("indexes: %w", err)
		}
		for _, k := range keys {
			if k == 0 {
				ix.Expression = true
				continue
			}
			ix.Columns = append(ix.Columns, names[k])
		}
		if conType == "x" {
			continue // exclusion constraints travel as constraints
		}
		if primary {
			t.PrimaryKey = ix.Columns
			t.PrimaryKeyName = conName
			continue
		}
		if conType == "u" {
			ix.Constraint = conName
		}
		t.Indexes = append(t.Indexes, ix)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("indexes: %w", err)
	}

	rows, err = tx.Query(ctx, `
		SELECT conname, contype::text, pg_get_constraintdef(oid)
		FROM pg_constraint WHERE conrelid = $1 AND contype IN ('c','f','x')
		ORDER BY contype, conname`, oid)
	if err != nil {
		return fmt.Errorf("constraints: %w", err)
	}
	for rows.Next() {
		var c chain.Constraint
		if err := rows.Scan(&c.Name, &c.Type, &c.Definition); err != nil {
			return fmt.Errorf("constraints: %w", err)
		}
		t.Constraints = append(t.Constraints, c)
	}
	return rows.Err()
}

// oidXML is the OID of PostgreSQL's xml type.
const oidXML = 142

// xmlBased reports whether a column's type is xml, an array of it or a
// domain over it.
func xmlBased(oid, elem, base uint32) bool { return oid == oidXML || elem == oidXML || base == oidXML }

// opaqueKind reports whether values of kind k have no neutral decoding of
// their binary form: kind other, or an array of it.
func opaqueKind(k value.Kind) bool {
	for k.Name == value.Array && k.Elem != nil {
		k = *k.Elem
	}
	return k.Name == value.Other
}

// columnEncoding decides whether a column's values can travel in PostgreSQL's
// binary format: only when every OID the binary form embeds is the same on
// any cluster (built-in types, arrays of them, enums whose binary form is the
// label, domains over built-ins). Everything else travels as text.
func columnEncoding(oid uint32, typtype string, elem, base uint32, eltyptype string) string {
	switch {
	case oid < firstUserOID && (elem == 0 || elem < firstUserOID):
		return chain.EncodingBinary
	case typtype == "e":
		return chain.EncodingBinary
	case typtype == "d" && base < firstUserOID:
		return chain.EncodingBinary
	}
	return chain.EncodingText
}

// columnKind is the neutral kind a column's values decode by. The catalog
// says what the type text cannot: an enum (with its labels, an array's
// element and a domain's base alike) from any other user-defined type, and
// for a domain over a built-in type, the base type, whose form the values
// take.
func columnKind(c chain.Column, typtype string, elem uint32, eltyptype string, base uint32, baseType, basetyptype string, labels []string) value.Kind {
	enum := value.Kind{Name: value.Enum, Labels: labels}
	switch {
	case typtype == "e":
		return enum
	case typtype == "d" && basetyptype == "e":
		return enum
	case typtype == "d" && base < firstUserOID:
		return value.FromPostgres(baseType, base)
	case eltyptype == "e":
		return value.Kind{Name: value.Array, Elem: &enum}
	case eltyptype != "" && elem >= firstUserOID:
		other := value.Kind{Name: value.Other}
		return value.Kind{Name: value.Array, Elem: &other}
	case typtype != "b" || c.TypeOID >= firstUserOID:
		// Domains over user types, composite, range and multirange types,
		// and extensions' base types.
		return value.Kind{Name: value.Other}
	}
	return value.FromPostgres(c.Type, c.TypeOID)
}

func readEnums(ctx context.Context, tx querier, s *chain.Schema) error {
	rows, err := tx.Query(ctx, `
		SELECT n.nspname, t.typname, array_agg(e.enumlabel::text ORDER BY e.enumsortorder)
		FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace JOIN pg_enum e ON e.enumtypid = t.oid
		WHERE NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_type'::regclass AND d.objid = t.oid AND d.deptype = 'e')
		GROUP BY n.nspname, t.typname ORDER BY n.nspname, t.typname`)
	if err != nil {
		return fmt.Errorf("list enums: %w", err)
	}
	for rows.Next() {
		var e chain.Enum
		if err := rows.Scan(&e.Schema, &e.Name, &e.Labels); err != nil {
			return fmt.Errorf("list enums: %w", err)
		}
		s.Enums = append(s.Enums, e)
	}
	return rows.Err()
}

func readSequences(ctx context.Context, tx pgx.Tx, s *chain.Schema) error {
	rows, err := tx.Query(ctx, `
		SELECT n.nspname, c.relname, format_type(sq.seqtypid, NULL), sq.seqstart, sq.seqincrement,
		       sq.seqmin, sq.seqmax, sq.seqcache, sq.seqcycle,
		       coalesce(tc.relname, ''), coalesce(a.attname, ''), coalesce(d.deptype = 'i', false)
		FROM pg_sequence sq
		JOIN pg_class c ON c.oid = sq.seqrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid
		     AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a','i')
		LEFT JOIN pg_class tc ON tc.oid = d.refobjid
		LEFT JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
		WHERE NOT EXISTS (SELECT 1 FROM pg_depend x WHERE x.classid = 'pg_class'::regclass AND x.objid = c.oid AND x.deptype = 'e')
		ORDER BY n.nspname, c.relname`)
	if err != nil {
		return fmt.Errorf("list sequences: %w", err)
	}
	for rows.Next() {
		var q chain.Sequence
		if err := rows.Scan(&q.Schema, &q.Name, &q.DataType, &q.Start, &q.Increment, &q.Min, &q.Max, &q.Cache, &q.Cycle,
			&q.OwnedByTable, &q.OwnedByColumn, &q.Identity); err != nil {
			return fmt.Errorf("list sequences: %w", err)
		}
		s.Sequences = append(s.Sequences, q)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list sequences: %w", err)
	}
	for i := range s.Sequences {
		q := &s.Sequences[i]
		sql := fmt.Sprintf("SELECT last_value, is_called FROM %s", QuoteQualified(q.Schema, q.Name))
		if err := tx.QueryRow(ctx, sql).Scan(&q.LastValue, &q.IsCalled); err != nil {
			return fmt.Errorf("sequence %s.%s: %w", q.Schema, q.Name, err)
		}
	}
	return nil
}

// QuoteQualified quotes "schema"."name" for SQL.
func QuoteQualified(schema, name string) string {
	return pgx.Identifier{schema, name}.Sanitize()
}

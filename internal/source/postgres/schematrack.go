package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/filter"
)

// schemaTracker follows the source's table definitions through the log: it
// starts from the chain's recorded schema and compares every Relation
// message against it, so a new table or an added, dropped or retyped column
// becomes a schema change record.
type schemaTracker struct {
	sql    *pgx.Conn
	base   *chain.Schema
	tables map[string]*chain.Table
	types  map[[2]int64]string
	dirty  bool
	// knownTypes names ("schema.name") the user-defined types and enums
	// the chain holds; added are those the log's new tables brought.
	knownTypes map[string]bool
	added      []chain.UserType
	addedEnums []chain.Enum
	// filter is the segment's filter (nil: none). The base schema is
	// already shaped by it; each Relation message is shaped before it is
	// compared with the tracked definition, and tables it leaves out are
	// not tracked at all.
	filter *filter.Filter
	// objects are the schema objects as last recorded or read; objectsFP
	// is the catalog fingerprint they were read at (empty: not read by
	// this tracker yet), and objectsTables the tableChanges count then.
	objects       []chain.Object
	objectsFP     string
	objectsTables int
	// tableChanges counts the table definitions the tracker changed.
	tableChanges int
}

func newSchemaTracker(sql *pgx.Conn, s *chain.Schema) *schemaTracker {
	st := &schemaTracker{sql: sql, base: s, tables: map[string]*chain.Table{}, types: map[[2]int64]string{}, knownTypes: map[string]bool{}}
	if s != nil {
		st.objects = s.Objects
		for _, u := range s.Types {
			st.knownTypes[u.Schema+"."+u.Name] = true
		}
		for _, e := range s.Enums {
			st.knownTypes[e.Schema+"."+e.Name] = true
		}
		for i := range s.Tables {
			t := s.Tables[i]
			st.tables[t.QualifiedName()] = &t
		}
	}
	return st
}

func (st *schemaTracker) typeName(ctx context.Context, oid uint32, mod int32) (string, error) {
	k := [2]int64{int64(oid), int64(mod)}
	if n, ok := st.types[k]; ok {
		return n, nil
	}
	var n string
	if err := st.sql.QueryRow(ctx, `SELECT format_type($1, $2)`, oid, mod).Scan(&n); err != nil {
		return "", classify(err, fmt.Sprintf("name type %d", oid))
	}
	st.types[k] = n
	return n, nil
}

// observe compares a Relation message with the tracked definition and
// returns the table's new definition when it changed (nil when not). With
// a filter it also returns how the relation's row images cross (nil: as
// they are) and whether the filter includes the table at all: a table it
// leaves out is neither tracked nor recorded.
func (st *schemaTracker) observe(ctx context.Context, rel *pglogrepl.RelationMessageV2) (def *chain.Table, shape *filter.Shape, included bool, err error) {
	name := rel.Namespace + "." + rel.RelationName
	parent, bound, err := st.partitionOf(ctx, rel.Namespace, rel.RelationName)
	if err != nil {
		return nil, nil, false, err
	}
	if st.filter != nil {
		// A partition crosses, is cut and masked as the root of its tree:
		// tell the filter the tree, up to the root.
		st.filter.LearnPartition(name, parent)
		for p := parent; p != "" && !st.filter.Knows(p); {
			schema, table, _ := strings.Cut(p, ".")
			up, _, err := st.partitionOf(ctx, schema, table)
			if err != nil {
				return nil, nil, false, err
			}
			st.filter.LearnPartition(p, up)
			p = up
		}
	}
	if !st.filter.Includes(rel.Namespace, rel.RelationName) {
		return nil, nil, false, nil
	}
	cols := make([]chain.Column, len(rel.Columns))
	for i, rc := range rel.Columns {
		typ, err := st.typeName(ctx, rc.DataType, rc.TypeModifier)
		if err != nil {
			return nil, nil, false, err
		}
		cols[i] = chain.Column{Name: rc.Name, Type: typ, TypeOID: rc.DataType, Encoding: chain.EncodingText}
	}
	old, known := st.tables[name]
	if st.filter != nil {
		// The recorded definition is shaped: compare it with the relation
		// shaped alike, so an excluded column never looks like a change.
		if shape, err = st.shape(ctx, rel, cols, old); err != nil {
			return nil, nil, false, err
		}
		kept := make([]chain.Column, len(shape.Keep))
		for i, from := range shape.Keep {
			kept[i] = cols[from]
		}
		cols = kept
	}
	if known && sameSupplied(SuppliedColumns(old), cols) && old.PartitionOf == parent && old.PartitionBound == bound {
		return nil, shape, true, nil
	}
	var next chain.Table
	if !known {
		next = relationTable(rel, cols)
	} else {
		next = evolve(old, cols)
	}
	next.PartitionOf, next.PartitionBound = parent, bound
	if err := st.fillAttributes(ctx, &next, old); err != nil {
		return nil, nil, false, err
	}
	if err := st.typesFor(ctx, &next); err != nil {
		return nil, nil, false, err
	}
	// The types travel on the record; the tracked definition, which the
	// whole schema is built from, does not repeat them.
	out := next
	next.Types = nil
	st.tables[name] = &next
	st.dirty = true
	st.tableChanges++
	return &out, shape, true, nil
}

// relationTable is the definition of a table the chain does not hold yet,
// as far as its Relation message tells: the given columns (the relation's,
// or those of them the filter keeps) and its replica identity as the key.
func relationTable(rel *pglogrepl.RelationMessageV2, cols []chain.Column) chain.Table {
	t := chain.Table{Schema: rel.Namespace, Name: rel.RelationName, Columns: cols, ReplicaIdentity: string(rune(rel.ReplicaIdentity))}
	var key []string
	for _, rc := range rel.Columns {
		if rc.Flags&1 != 0 {
			key = append(key, rc.Name)
		}
	}
	switch rel.ReplicaIdentity {
	case 'd':
		t.PrimaryKey = key
		for _, k := range key {
			for i := range t.Columns {
				if t.Columns[i].Name == k {
					t.Columns[i].NotNull = true
				}
			}
		}
	case 'i':
		if len(key) > 0 {
			t.Indexes = []chain.Index{{Name: rel.RelationName + "_replica_identity", Columns: key, Unique: true}}
		}
	}
	return t
}

// shape returns how the row images of a relation cross under the filter.
// Its input table has exactly the relation's columns in their order (row
// images are over them), with the tracked definition's attributes, keys
// and constraints where the table is known, so the filter checks its
// masks against what the chain recorded. A column the filter names that
// the relation no longer has (dropped on the source since) is passed over
// by the filter.
func (st *schemaTracker) shape(ctx context.Context, rel *pglogrepl.RelationMessageV2, cols []chain.Column, old *chain.Table) (*filter.Shape, error) {
	var in chain.Table
	if old == nil {
		in = relationTable(rel, append([]chain.Column(nil), cols...))
	} else {
		in = *old
		in.Types = nil
		recorded := make(map[string]chain.Column, len(old.Columns))
		for _, c := range old.Columns {
			recorded[c.Name] = c
		}
		in.Columns = make([]chain.Column, 0, len(cols))
		for _, c := range cols {
			if rc, ok := recorded[c.Name]; ok && rc.TypeOID == c.TypeOID && rc.Type == c.Type {
				c = rc
			}
			in.Columns = append(in.Columns, c)
		}
	}
	return st.filter.Shape(&in, fixedEncoder(ctx, st.sql.PgConn()))
}

// typesFor refuses a table the log brought that the chain cannot carry (a
// type or function of the user's own, as at a full), and records on it the
// user-defined types and enums the chain does not hold yet, so the applier
// creates them first. Tables are new or changed rarely, so reading the
// catalog for each is cheap.
func (st *schemaTracker) typesFor(ctx context.Context, t *chain.Table) error {
	var oid uint32
	if err := st.sql.QueryRow(ctx, `SELECT coalesce(to_regclass($1)::oid, 0)`, QuoteQualified(t.Schema, t.Name)).Scan(&oid); err != nil {
		return classify(err, "look up "+t.QualifiedName())
	}
	problems, err := uncarriedIn(ctx, st.sql, []chain.Table{*t}, []uint32{oid})
	if err != nil {
		return classify(err, "check what "+t.QualifiedName()+" needs")
	}
	if len(problems) > 0 {
		return errcode.New(errcode.SourceSchemaUnsupported, "a table the log brought cannot be carried:\n  %s", strings.Join(problems, "\n  "))
	}
	user := false
	for _, c := range t.Columns {
		user = user || c.TypeOID >= firstUserOID
	}
	if !user {
		return nil
	}
	var now chain.Schema
	if err := readEnums(ctx, st.sql, &now); err != nil {
		return classify(err, "read enums")
	}
	if err := readUserTypes(ctx, st.sql, &now); err != nil {
		return classify(err, "read user-defined types")
	}
	for _, e := range now.Enums {
		if name := e.Schema + "." + e.Name; !st.knownTypes[name] {
			st.knownTypes[name] = true
			st.addedEnums = append(st.addedEnums, e)
			t.Types = append(t.Types, chain.UserType{Schema: e.Schema, Name: e.Name, Kind: chain.TypeEnum, Definition: enumSQL(e)})
		}
	}
	for _, u := range now.Types {
		if name := u.Schema + "." + u.Name; !st.knownTypes[name] {
			st.knownTypes[name] = true
			st.added = append(st.added, u)
			t.Types = append(t.Types, u)
		}
	}
	return nil
}

// enumSQL is the statement that creates enum e.
func enumSQL(e chain.Enum) string {
	labels := make([]string, len(e.Labels))
	for i, l := range e.Labels {
		labels[i] = "'" + strings.ReplaceAll(l, "'", "''") + "'"
	}
	return "CREATE TYPE " + QuoteQualified(e.Schema, e.Name) + " AS ENUM (" + strings.Join(labels, ", ") + ")"
}

// partitionOf returns the partitioned table ("schema.name") a table is now a
// partition of, and its bound; both empty for a table that is none. A
// Relation message follows any change to a table's definition, attaching
// and detaching included, so reading this beside it notices those too.
func (st *schemaTracker) partitionOf(ctx context.Context, schema, name string) (parent, bound string, err error) {
	err = st.sql.QueryRow(ctx, `
		SELECT coalesce((SELECT pn.nspname || '.' || p.relname FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent
		                 JOIN pg_namespace pn ON pn.oid = p.relnamespace WHERE i.inhrelid = c.oid), ''),
		       coalesce(pg_get_expr(c.relpartbound, c.oid), '')
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = $2 AND c.relispartition`, schema, name).Scan(&parent, &bound)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", nil
	}
	if err != nil {
		return "", "", classify(err, "read the partition bound of "+schema+"."+name)
	}
	return parent, bound, nil
}

// sameSupplied reports whether the supplied columns match by name and type.
func sameSupplied(a, b []chain.Column) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].TypeOID != b[i].TypeOID || a[i].Type != b[i].Type {
			return false
		}
	}
	return true
}

// evolve applies a changed column list to a known table: columns keep their
// order and attributes, dropped ones go, new ones are appended, a changed
// type is replaced; keys and indexes lose references to dropped columns.
func evolve(old *chain.Table, supplied []chain.Column) chain.Table {
	next := *old
	byName := map[string]chain.Column{}
	for _, c := range supplied {
		byName[c.Name] = c
	}
	next.Columns = nil
	seen := map[string]bool{}
	for _, c := range old.Columns {
		if c.Generated != "" {
			next.Columns = append(next.Columns, c)
			continue
		}
		nc, ok := byName[c.Name]
		if !ok {
			continue // dropped
		}
		if nc.TypeOID != c.TypeOID || nc.Type != c.Type {
			c.Type, c.TypeOID, c.Encoding, c.Default = nc.Type, nc.TypeOID, chain.EncodingText, ""
			// The recorded kind was the old type's: derive it again.
			c.Kind = nil
		}
		next.Columns = append(next.Columns, c)
		seen[c.Name] = true
	}
	for _, c := range supplied {
		if !seen[c.Name] {
			next.Columns = append(next.Columns, c)
		}
	}
	present := func(cols []string) bool {
		for _, c := range cols {
			if _, ok := byName[c]; !ok {
				return false
			}
		}
		return true
	}
	if !present(next.PrimaryKey) {
		next.PrimaryKey, next.PrimaryKeyName = nil, ""
	}
	next.Indexes = nil
	for _, ix := range old.Indexes {
		if present(ix.Columns) && !ix.Expression {
			next.Indexes = append(next.Indexes, ix)
		}
	}
	return next
}

// schema returns the whole tracked schema, tables sorted, when any table
// changed since the tracker started, and nil otherwise.
func (st *schemaTracker) schema() *chain.Schema {
	if !st.dirty {
		return nil
	}
	out := &chain.Schema{}
	if st.base != nil {
		out.Enums, out.Types, out.Sequences, out.Extensions = st.base.Enums, st.base.Types, st.base.Sequences, st.base.Extensions
		out.ExtensionSchemas = st.base.ExtensionSchemas
		out.Schemas = append([]string(nil), st.base.Schemas...)
	}
	if len(st.added) > 0 || len(st.addedEnums) > 0 {
		out.Types = append(append([]chain.UserType(nil), out.Types...), st.added...)
		out.Enums = append(append([]chain.Enum(nil), out.Enums...), st.addedEnums...)
	}
	names := make([]string, 0, len(st.tables))
	for n := range st.tables {
		names = append(names, n)
	}
	sort.Strings(names)
	seenSchema := map[string]bool{}
	for _, s := range out.Schemas {
		seenSchema[s] = true
	}
	for _, n := range names {
		t := *st.tables[n]
		out.Tables = append(out.Tables, t)
		if !seenSchema[t.Schema] {
			out.Schemas = append(out.Schemas, t.Schema)
			seenSchema[t.Schema] = true
		}
	}
	sort.Strings(out.Schemas)
	out.Objects = st.objects
	return out
}

// refreshObjects reads the source's schema objects again when the catalog
// fingerprint moved or a table changed since the last read (a table the
// chain did not hold takes its triggers, policies and grants in with it),
// and marks the schema changed when they differ from those recorded:
// PostgreSQL's log carries no record of a view, routine, trigger, policy,
// comment or grant, so this is how their changes reach the chain.
func (st *schemaTracker) refreshObjects(ctx context.Context) error {
	fp, err := objectsFingerprint(ctx, st.sql)
	if err != nil {
		return classify(err, "fingerprint the source's schema objects")
	}
	if fp == st.objectsFP && st.objectsTables == st.tableChanges {
		return nil
	}
	tables := make([]chain.Table, 0, len(st.tables))
	for _, t := range st.tables {
		tables = append(tables, *t)
	}
	objs, err := readObjects(ctx, st.sql, tables)
	if err != nil {
		return classify(err, "read the source's schema objects")
	}
	st.objectsFP, st.objectsTables = fp, st.tableChanges
	if chain.SameObjects(objs, st.objects) {
		return nil
	}
	st.objects = objs
	st.dirty = true
	return nil
}

// fillAttributes reads, from the source's catalog as it is now, what a
// Relation message does not carry for columns the chain has not recorded
// yet: NOT NULL and the default. An ADD COLUMN … DEFAULT fills existing rows
// without writing WAL, so the target must add the column with the same
// default to hold the same values. A volatile default is evaluated again on
// the target (docs/operations.md lists this).
func (st *schemaTracker) fillAttributes(ctx context.Context, t *chain.Table, old *chain.Table) error {
	known := map[string]bool{}
	if old != nil {
		for _, c := range old.Columns {
			known[c.Name] = true
		}
	}
	rows, err := st.sql.Query(ctx, `
		SELECT a.attname, a.attnotnull, coalesce(pg_get_expr(d.adbin, d.adrelid), '')
		FROM pg_attribute a
		JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''`, t.Schema, t.Name)
	if err != nil {
		return classify(err, "read columns of "+t.QualifiedName())
	}
	defer rows.Close()
	for rows.Next() {
		var name, def string
		var notNull bool
		if err := rows.Scan(&name, &notNull, &def); err != nil {
			return classify(err, "read columns of "+t.QualifiedName())
		}
		if known[name] {
			continue
		}
		for i := range t.Columns {
			if t.Columns[i].Name == name {
				t.Columns[i].NotNull = t.Columns[i].NotNull || notNull
				t.Columns[i].Default = def
			}
		}
	}
	return rows.Err()
}

package chain

import (
	"slices"

	"github.com/sluicehq/sluice/internal/value"
)

// Schema is the recorded schema of a source database: what a restore needs to
// recreate the tables, and what the broker judges keys against.
type Schema struct {
	// Tables in a stable order (schema, then name).
	Tables []Table `json:"tables"`
	// Enums are user-defined enum types the tables use.
	Enums []Enum `json:"enums,omitempty"`
	// Types are the user-defined domains, composite and range types, in the
	// order they must be created: each after every recorded type it uses.
	Types []UserType `json:"types,omitempty"`
	// Sequences with their values as of the snapshot.
	Sequences []Sequence `json:"sequences,omitempty"`
	// Extensions the source has installed (other than plpgsql), created on
	// the target before the tables.
	Extensions []string `json:"extensions,omitempty"`
	// ExtensionSchemas maps an extension to the schema its objects live in
	// on the source (absent in chains written before it was recorded).
	ExtensionSchemas map[string]string `json:"extension_schemas,omitempty"`
	// Schemas are the namespaces that hold the tables and types.
	Schemas []string `json:"schemas,omitempty"`
	// Objects are the source's schema objects that are neither tables,
	// types nor sequences (views, routines, triggers, rules, policies,
	// comments, grants, events), in the order they must be created: each
	// after every object and table it depends on. Absent in chains written
	// before they were recorded.
	Objects []Object `json:"objects,omitempty"`
}

// ObjectKind names what a recorded schema object is.
type ObjectKind string

// The kinds of recorded schema objects.
const (
	ObjectView             ObjectKind = "view"
	ObjectMaterializedView ObjectKind = "materialized_view"
	ObjectFunction         ObjectKind = "function"
	ObjectProcedure        ObjectKind = "procedure"
	ObjectTrigger          ObjectKind = "trigger"
	ObjectRule             ObjectKind = "rule"
	ObjectPolicy           ObjectKind = "policy"
	// ObjectRowSecurity is a table's row-level security switch (ENABLE,
	// and FORCE when set).
	ObjectRowSecurity ObjectKind = "row_security"
	ObjectComment     ObjectKind = "comment"
	ObjectGrant       ObjectKind = "grant"
	// ObjectEvent is a MySQL-family scheduled event (created disabled on
	// a target).
	ObjectEvent ObjectKind = "event"
)

// Object is one recorded schema object other than a table, a type or a
// sequence. Its definition is the source engine's own statement text:
// only a target of the same engine runs it, and only from a chain whose
// signature was verified or a store the operator declared trusted.
type Object struct {
	// Kind says what the object is.
	Kind ObjectKind `json:"kind"`
	// Schema is the namespace the object lives in (PostgreSQL schema or
	// MySQL database).
	Schema string `json:"schema,omitempty"`
	// Name is the object's name; for a function or procedure it includes
	// the argument types ("f(integer, text)"), for a comment or a grant it
	// names what it is on ("column public.t.c", "table public.t").
	Name string `json:"name"`
	// Table is the qualified table a trigger, rule, policy or row-security
	// switch belongs to, empty for the others.
	Table string `json:"table,omitempty"`
	// Definition is the statement (or statements, each ending in ";")
	// that creates the object on an empty target of the source's engine.
	Definition string `json:"definition"`
	// Roles are the roles the definition names (owners excluded) that
	// must exist on the target: a grant's grantees, a policy's roles.
	Roles []string `json:"roles,omitempty"`
	// Definer is a MySQL-family view's, routine's, trigger's or event's
	// DEFINER ("user@host"), kept apart from the definition so a target
	// can map it.
	Definer string `json:"definer,omitempty"`
}

// Key identifies an object within a schema: two recordings of the same
// object have the same key, and a changed definition under one key is an
// object altered.
func (o *Object) Key() string {
	return string(o.Kind) + " " + o.Schema + " " + o.Table + " " + o.Name
}

// SameObjects reports whether two recordings of schema objects hold the
// same objects with the same definitions, in the same order.
func SameObjects(a, b []Object) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key() != b[i].Key() || a[i].Definition != b[i].Definition || a[i].Definer != b[i].Definer ||
			!slices.Equal(a[i].Roles, b[i].Roles) {
			return false
		}
	}
	return true
}

// Table is one recorded table.
type Table struct {
	// Schema is the namespace (PostgreSQL schema or MySQL database).
	Schema string `json:"schema"`
	// Name is the table's name.
	Name string `json:"name"`
	// Columns in ordinal order (dropped columns excluded).
	Columns []Column `json:"columns"`
	// PrimaryKey lists the primary key's columns in key order; empty if none.
	PrimaryKey []string `json:"primary_key,omitempty"`
	// PrimaryKeyName is the primary key constraint's name on the source.
	PrimaryKeyName string `json:"primary_key_name,omitempty"`
	// Indexes are the table's other indexes (unique or not), each with its
	// definition as the source prints it.
	Indexes []Index `json:"indexes,omitempty"`
	// Constraints are CHECK, FOREIGN KEY and EXCLUDE constraints, restored
	// after the data.
	Constraints []Constraint `json:"constraints,omitempty"`
	// ReplicaIdentity is the PostgreSQL replica identity: d, f, i or n.
	ReplicaIdentity string `json:"replica_identity,omitempty"`
	// PartitionKey is set on a partitioned table: its partition key as the
	// source prints it (PostgreSQL: "RANGE (created_at)"). Such a table
	// holds no rows of its own; its partitions do.
	PartitionKey string `json:"partition_key,omitempty"`
	// PartitionOf names ("schema.name") the partitioned table this table is
	// a partition of, and PartitionBound its bound as the source prints it
	// ("FOR VALUES FROM ('2026-01-01') TO ('2026-02-01')", "DEFAULT").
	PartitionOf    string `json:"partition_of,omitempty"`
	PartitionBound string `json:"partition_bound,omitempty"`
	// Dialect is the engine whose SQL the table's type texts, defaults
	// and index definitions are written in: "mysql" for a table recorded
	// from a MySQL-family source, empty for PostgreSQL (every chain
	// written before other sources existed). A target of another dialect
	// builds the table from the columns' neutral kinds and the key and
	// index column lists, never from that text.
	Dialect string `json:"dialect,omitempty"`
	// Types is set only on a schema change record: the user-defined types
	// (enums included, as Kind TypeEnum) the table's columns use that the
	// chain did not hold before it, in the order they must be created. The
	// applier creates each that the target lacks before the table.
	Types []UserType `json:"types,omitempty"`
}

// Partitioned reports whether the table is a partitioned table (rows live
// in its partitions).
func (t *Table) Partitioned() bool { return t.PartitionKey != "" }

// Constraint is a recorded table constraint other than the primary key and
// UNIQUE constraints (those travel as indexes).
type Constraint struct {
	// Name of the constraint.
	Name string `json:"name"`
	// Type is "c" (check), "f" (foreign key) or "x" (exclusion).
	Type string `json:"type"`
	// Definition is the source's constraint definition, e.g. "CHECK (a > 0)".
	Definition string `json:"definition"`
}

// Column is one recorded column.
type Column struct {
	// Name of the column.
	Name string `json:"name"`
	// Type is the source's full type text, e.g. "numeric(40,20)" or "public.mood[]".
	Type string `json:"type"`
	// TypeOID is the source's type OID (PostgreSQL); 0 where unknown.
	TypeOID uint32 `json:"type_oid,omitempty"`
	// NotNull is true when the column is declared NOT NULL.
	NotNull bool `json:"not_null,omitempty"`
	// Default is the column default expression, if any (sequence defaults included).
	Default string `json:"default,omitempty"`
	// Identity is "a" (ALWAYS) or "d" (BY DEFAULT) for identity columns;
	// a MySQL-family table's AUTO_INCREMENT column is recorded as "d".
	Identity string `json:"identity,omitempty"`
	// Generated is the generation expression of a stored generated column; such
	// a column is never supplied by rows.
	Generated string `json:"generated,omitempty"`
	// Encoding says how this column's values are encoded in row chunks:
	// EncodingBinary or EncodingText (see docs/chain-format.md).
	Encoding string `json:"encoding"`
	// Kind is the column's engine-neutral kind, by which a target of
	// another engine decodes its values. Nil in chains written before
	// kinds were recorded: read NeutralKind, which derives one from Type
	// and TypeOID.
	Kind *value.Kind `json:"kind,omitempty"`
}

// Identities of a column (Column.Identity).
const (
	// IdentityAlways is PostgreSQL's GENERATED ALWAYS AS IDENTITY.
	IdentityAlways = "a"
	// IdentityByDefault is PostgreSQL's GENERATED BY DEFAULT AS IDENTITY,
	// and a MySQL-family AUTO_INCREMENT column.
	IdentityByDefault = "d"
)

// Value encodings of a column in row chunks.
const (
	// EncodingBinary values are PostgreSQL's binary send format of the column's type.
	EncodingBinary = "binary"
	// EncodingText values are the type's text output (UTF-8).
	EncodingText = "text"
)

// Index is a recorded index.
type Index struct {
	// Name of the index.
	Name string `json:"name"`
	// Columns are the key columns; empty when the index is on expressions.
	Columns []string `json:"columns,omitempty"`
	// Unique is true for a unique index.
	Unique bool `json:"unique,omitempty"`
	// Partial is true when the index has a WHERE predicate.
	Partial bool `json:"partial,omitempty"`
	// Expression is true when any key is an expression rather than a column.
	Expression bool `json:"expression,omitempty"`
	// Constraint names the UNIQUE constraint backing the index, if any.
	Constraint string `json:"constraint,omitempty"`
	// Definition is the source's full CREATE INDEX statement.
	Definition string `json:"definition"`
}

// Enum is a user-defined enum type.
type Enum struct {
	Schema string   `json:"schema"`
	Name   string   `json:"name"`
	Labels []string `json:"labels"`
}

// Kinds of UserType.
const (
	TypeDomain    = "domain"
	TypeComposite = "composite"
	TypeRange     = "range"
	// TypeEnum appears only in Table.Types; a schema records enums in Enums.
	TypeEnum = "enum"
)

// UserType is a user-defined type a restore recreates before the tables.
type UserType struct {
	Schema string `json:"schema"`
	Name   string `json:"name"`
	// Kind is TypeDomain, TypeComposite or TypeRange.
	Kind string `json:"kind"`
	// Definition is the statement that creates the type on the source's
	// engine (for PostgreSQL, CREATE DOMAIN or CREATE TYPE), with every
	// name qualified.
	Definition string `json:"definition"`
}

// Sequence is a sequence and its state at the snapshot.
type Sequence struct {
	Schema    string `json:"schema"`
	Name      string `json:"name"`
	DataType  string `json:"data_type"`
	Start     int64  `json:"start"`
	Increment int64  `json:"increment"`
	Min       int64  `json:"min"`
	Max       int64  `json:"max"`
	Cache     int64  `json:"cache"`
	Cycle     bool   `json:"cycle,omitempty"`
	LastValue int64  `json:"last_value"`
	IsCalled  bool   `json:"is_called"`
	// OwnedByTable and OwnedByColumn name the column that owns the sequence
	// (a serial); the table is in the sequence's schema.
	OwnedByTable  string `json:"owned_by_table,omitempty"`
	OwnedByColumn string `json:"owned_by_column,omitempty"`
	// Identity is true for the implicit sequence of an identity column; the
	// restore recreates it with the column and only sets its value.
	Identity bool `json:"identity,omitempty"`
}

// QualifiedName returns "schema.name".
func (t *Table) QualifiedName() string { return t.Schema + "." + t.Name }

// HasReplayKey reports whether the recorded schema gives the table a key a
// replayed row collides on: a primary key, or a unique, non-partial,
// non-expression index over NOT NULL columns.
func (t *Table) HasReplayKey() bool {
	return len(t.PrimaryKey) > 0 || len(t.replayIndexes()) > 0
}

// replayIndexes are the table's indexes a replayed row collides on: unique,
// neither partial nor on expressions, over NOT NULL columns only.
func (t *Table) replayIndexes() []Index {
	notNull := map[string]bool{}
	for _, c := range t.Columns {
		notNull[c.Name] = c.NotNull
	}
	var out []Index
	for _, ix := range t.Indexes {
		if !ix.Unique || ix.Partial || ix.Expression || len(ix.Columns) == 0 {
			continue
		}
		all := true
		for _, c := range ix.Columns {
			all = all && notNull[c]
		}
		if all {
			out = append(out, ix)
		}
	}
	return out
}

// DialectMySQL is Table.Dialect of a table recorded from a MySQL-family
// source.
const DialectMySQL = "mysql"

// Foreign reports whether the table was recorded from a source whose SQL
// is not PostgreSQL's, so its type texts, defaults and definitions are not
// PostgreSQL's either.
func (t *Table) Foreign() bool { return t.Dialect != "" }

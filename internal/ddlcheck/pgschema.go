package ddlcheck

import (
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
)

// Postgres checks every recorded text of schema s that a PostgreSQL
// target would send and returns a copy in which each is replaced by its
// rendering from the parse tree: user type definitions, and the tables
// (PostgresTable). s is not modified; nil stays nil.
func Postgres(s *chain.Schema) (*chain.Schema, error) {
	if s == nil {
		return nil, nil
	}
	names := NamesOf(s)
	out := *s
	out.Tables = slices.Clone(s.Tables)
	if err := checkSchemaNames(s); err != nil {
		return nil, err
	}
	out.Types = slices.Clone(s.Types)
	for i := range out.Types {
		def, err := PGUserType(out.Types[i], names)
		if err != nil {
			return nil, err
		}
		out.Types[i].Definition = def
	}
	for i := range out.Tables {
		t, err := PostgresTable(&out.Tables[i], names)
		if err != nil {
			return nil, err
		}
		out.Tables[i] = *t
	}
	return &out, nil
}

// PostgresTable checks the recorded texts of one table a PostgreSQL
// target sends (column types, defaults and generation expressions,
// partition key and bound, indexes, constraints, and the user types of a
// schema change record) and returns a copy with each rendered again from
// its parse tree. Every column without a recorded kind gets the kind its
// recorded type text gives it (chain.Column.NeutralKind), so a type
// rendered in another spelling keeps its kind. A table recorded from
// another dialect is left as it is (its texts are never sent; see
// CheckForeign). t is not modified.
func PostgresTable(t *chain.Table, names *Names) (*chain.Table, error) {
	if t.Foreign() {
		return t, CheckForeign(t)
	}
	if err := checkTableNames(t); err != nil {
		return nil, err
	}
	for _, u := range t.Types {
		names.AddType(u.Schema, u.Name)
	}
	out := *t
	q := t.QualifiedName()
	var err error
	out.Types = slices.Clone(t.Types)
	for i := range out.Types {
		if out.Types[i].Definition, err = PGUserType(out.Types[i], names); err != nil {
			return nil, err
		}
	}
	out.Columns = slices.Clone(t.Columns)
	for i := range out.Columns {
		c := &out.Columns[i]
		if c.Kind == nil {
			k := c.NeutralKind()
			c.Kind = &k
		}
		if c.Type, err = PGType(Where{Table: q, Column: "column " + c.Name, What: "type"}, c.Type, names); err != nil {
			return nil, err
		}
		if c.Default != "" {
			if c.Default, err = PGExpr(Where{Table: q, Column: "column " + c.Name, What: "default"}, c.Default, names, InDefault); err != nil {
				return nil, err
			}
		}
		if c.Generated != "" {
			if c.Generated, err = PGExpr(Where{Table: q, Column: "column " + c.Name, What: "generation expression"}, c.Generated, names, WithColumns); err != nil {
				return nil, err
			}
		}
		if c.Identity != "" && c.Identity != "a" && c.Identity != "d" {
			return nil, refuse(Where{Table: q, Column: "column " + c.Name, What: "identity"}, c.Identity, "it is neither a nor d")
		}
	}
	if t.PartitionKey != "" {
		if out.PartitionKey, err = PGPartitionKey(t, names); err != nil {
			return nil, err
		}
	}
	if t.PartitionBound != "" {
		if out.PartitionBound, err = PGPartitionBound(t, names); err != nil {
			return nil, err
		}
	}
	out.Indexes = slices.Clone(t.Indexes)
	for i := range out.Indexes {
		if out.Indexes[i].Definition == "" {
			continue // nothing to send: a restore refuses to send an empty statement
		}
		if out.Indexes[i].Definition, err = PGIndex(t, t.Indexes[i], names); err != nil {
			return nil, err
		}
	}
	out.Constraints = slices.Clone(t.Constraints)
	for i := range out.Constraints {
		if out.Constraints[i].Definition, err = PGConstraint(t, t.Constraints[i], names); err != nil {
			return nil, err
		}
	}
	return &out, nil
}

// checkSchemaNames checks the names of a schema's objects outside its
// tables: namespaces, enums and their labels' encoding, user types,
// sequences and extensions.
func checkSchemaNames(s *chain.Schema) error {
	for _, n := range s.Schemas {
		if err := CheckName(Where{Column: "schema " + n, What: "name"}, n); err != nil {
			return err
		}
	}
	for _, e := range s.Enums {
		if err := checkQualified("enum", e.Schema, e.Name); err != nil {
			return err
		}
	}
	for _, u := range s.Types {
		if err := checkQualified("type", u.Schema, u.Name); err != nil {
			return err
		}
	}
	for _, q := range s.Sequences {
		if err := checkQualified("sequence", q.Schema, q.Name); err != nil {
			return err
		}
		if !slices.Contains([]string{"smallint", "integer", "bigint"}, q.DataType) {
			return refuse(Where{Column: "sequence " + q.Schema + "." + q.Name, What: "data type"}, q.DataType, "it is not smallint, integer or bigint")
		}
	}
	for _, e := range s.Extensions {
		if err := CheckName(Where{Column: "extension " + e, What: "name"}, e); err != nil {
			return err
		}
	}
	for e, n := range s.ExtensionSchemas {
		if err := CheckName(Where{Column: "extension " + e, What: "schema"}, n); err != nil {
			return err
		}
	}
	return nil
}

func checkQualified(what, schema, name string) error {
	w := Where{Column: what + " " + schema + "." + name, What: "name"}
	if err := CheckName(w, schema); err != nil {
		return err
	}
	return CheckName(w, name)
}

// checkTableNames checks a table's names: its own, its columns', keys',
// indexes' and constraints', and the partitioned table it names.
func checkTableNames(t *chain.Table) error {
	q := t.QualifiedName()
	if err := checkQualified("table", t.Schema, t.Name); err != nil {
		return err
	}
	for _, c := range t.Columns {
		if err := CheckName(Where{Table: q, Column: "column " + c.Name, What: "name"}, c.Name); err != nil {
			return err
		}
	}
	for _, n := range slices.Concat([]string{}, t.PrimaryKey) {
		if err := CheckName(Where{Table: q, Column: "primary key column " + n, What: "name"}, n); err != nil {
			return err
		}
	}
	if t.PrimaryKeyName != "" {
		if err := CheckName(Where{Table: q, Column: "primary key", What: "name"}, t.PrimaryKeyName); err != nil {
			return err
		}
	}
	for _, ix := range t.Indexes {
		for _, n := range append([]string{ix.Name}, ix.Columns...) {
			if err := CheckName(Where{Table: q, Column: "index " + ix.Name, What: "name"}, n); err != nil {
				return err
			}
		}
		if ix.Constraint != "" {
			if err := CheckName(Where{Table: q, Column: "index " + ix.Name, What: "constraint name"}, ix.Constraint); err != nil {
				return err
			}
		}
	}
	for _, c := range t.Constraints {
		if err := CheckName(Where{Table: q, Column: "constraint " + c.Name, What: "name"}, c.Name); err != nil {
			return err
		}
	}
	if t.PartitionOf != "" {
		if err := CheckName(Where{Table: q, What: "partitioned table name"}, t.PartitionOf); err != nil {
			return err
		}
	}
	if !slices.Contains([]string{"", "d", "f", "i", "n"}, t.ReplicaIdentity) {
		return refuse(Where{Table: q, What: "replica identity"}, t.ReplicaIdentity, "it is none of d, f, i and n")
	}
	if strings.ContainsRune(t.Dialect, 0) {
		return refuse(Where{Table: q, What: "dialect"}, t.Dialect, "it holds a NUL byte")
	}
	return nil
}

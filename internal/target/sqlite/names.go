package sqlite

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/ddlcheck"
	"github.com/sluicehq/sluice/internal/errcode"
)

// The broker's and restore's control tables.
const (
	stateTable = "sluice_cdc_state"
	marksTable = "sluice_cdc_apply_marks"
	// legacyRestoreLinksTable is where restores once recorded the
	// incrementals they applied; the name stays reserved, and
	// EnsureControlTables drops the table.
	legacyRestoreLinksTable = "sluice_restore_links"
)

// rebuildSuffix names the table a rebuild copies into before it takes the
// table's name.
const rebuildSuffix = "__sluice_rebuild"

// objectName is the SQLite name of a recorded table or index: SQLite has
// one namespace per database file, so an object of PostgreSQL schema public
// keeps its name and one of any other schema is named schema__name. Tables
// and indexes share a namespace in both engines, so the mapping keeps them
// apart exactly as the source did, except for the collisions checkNames
// refuses.
func objectName(schema, name string) string {
	if schema == "public" || schema == "" {
		return name
	}
	return schema + "__" + name
}

// tableName is the SQLite name of a recorded table. A MySQL-family
// source's chain holds one database, so its tables keep their bare names.
func tableName(t *chain.Table) string {
	if t.Dialect == chain.DialectMySQL {
		return t.Name
	}
	return objectName(t.Schema, t.Name)
}

// indexName is the SQLite name of a recorded table's index. MySQL names
// indexes per table, so a MySQL-family table's index is named after the
// table (orders__idx_customer), where a PostgreSQL schema's index names
// are already distinct in their schema.
func indexName(t *chain.Table, ix string) string {
	if t.Dialect == chain.DialectMySQL {
		return t.Name + "__" + ix
	}
	return objectName(t.Schema, ix)
}

// nameOfQualified is the SQLite name of a table known only by its
// qualified name "schema.name" (a change to a table the schema does not
// record).
func nameOfQualified(qualified string) string {
	schema, name, ok := strings.Cut(qualified, ".")
	if !ok {
		return qualified
	}
	return objectName(schema, name)
}

// quoteIdent quotes an SQLite identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// foldName folds a name as SQLite compares identifiers: ASCII letters
// without case, every other character as it is.
func foldName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

// nameSet tracks the SQLite names a schema takes, folded, and what took
// each, to refuse two source objects that would land on one name.
type nameSet map[string]string

func newNameSet() nameSet {
	n := nameSet{}
	for _, c := range []string{stateTable, marksTable, legacyRestoreLinksTable} {
		n[c] = "sluice's control table " + c
	}
	return n
}

// take claims name for what, refusing a name SQLite reserves, one a
// rebuild would use, and one another object claimed.
func (n nameSet) take(name, what string) error {
	folded := foldName(name)
	switch {
	case strings.HasPrefix(folded, "sqlite_"):
		return errcode.New(errcode.SourceSchemaUnsupported, "%s maps to SQLite name %q, which SQLite reserves (names starting with sqlite_)", what, name)
	case strings.HasSuffix(folded, rebuildSuffix):
		return errcode.New(errcode.SourceSchemaUnsupported, "%s maps to SQLite name %q, whose suffix %s the SQLite target uses for table rebuilds", what, name, rebuildSuffix)
	}
	if prev, ok := n[folded]; ok {
		return errcode.New(errcode.SourceSchemaUnsupported,
			"%s and %s both map to SQLite name %q (SQLite names ignore ASCII case, and schema s table t is named s__t); rename one on the source",
			what, prev, name)
	}
	n[folded] = what
	return nil
}

// takeTable claims the names of a table and the indexes the target creates
// for it, and checks that its columns stay distinct in SQLite.
func (n nameSet) takeTable(t *chain.Table) error {
	if err := n.take(tableName(t), "table "+t.QualifiedName()); err != nil {
		return err
	}
	if len(t.SuppliedColumns()) == 0 {
		return errcode.New(errcode.SourceSchemaUnsupported, "table %s has no column the target stores (SQLite tables need one; generated columns are not stored)", t.QualifiedName())
	}
	for _, ix := range t.Indexes {
		if indexSkipped(t, ix) != "" {
			continue
		}
		if err := n.take(indexName(t, ix.Name), fmt.Sprintf("index %s.%s", t.Schema, ix.Name)); err != nil {
			return err
		}
	}
	cols := map[string]string{}
	for _, c := range t.Columns {
		f := foldName(c.Name)
		if prev, ok := cols[f]; ok {
			return errcode.New(errcode.SourceSchemaUnsupported,
				"table %s: columns %q and %q are one column in SQLite, whose names ignore ASCII case; rename one on the source", t.QualifiedName(), prev, c.Name)
		}
		cols[f] = c.Name
	}
	return nil
}

// checkNames refuses a schema two of whose tables or indexes would share an
// SQLite name, or one of whose tables has two columns SQLite cannot tell
// apart.
func checkNames(s *chain.Schema) error {
	if s == nil {
		return nil
	}
	// Recorded text is checked whether or not this target sends it, so a
	// forged schema is refused by every reader alike.
	if err := ddlcheck.Check(s); err != nil {
		return err
	}
	n := newNameSet()
	for i := range s.Tables {
		if err := n.takeTable(&s.Tables[i]); err != nil {
			return err
		}
	}
	return nil
}

// indexSkipped says why the target does not create a recorded index, or ""
// when it does: SQLite gets the indexes over plain columns; a partial index
// or one on expressions is PostgreSQL SQL the target does not translate,
// and an index over a generated column indexes what the target does not
// store.
func indexSkipped(t *chain.Table, ix chain.Index) string {
	switch {
	case ix.Partial:
		return "it is partial (its predicate is PostgreSQL SQL)"
	case ix.Expression || len(ix.Columns) == 0:
		return "it is on expressions (PostgreSQL SQL)"
	}
	for _, name := range ix.Columns {
		found := false
		for _, c := range t.Columns {
			if c.Name == name {
				found = c.Generated == ""
				break
			}
		}
		if !found {
			return "column " + name + " is generated, and the target does not store generated columns"
		}
	}
	return ""
}

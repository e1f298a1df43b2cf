package mysql

import (
	"fmt"
	"hash/fnv"
	"strings"
	"unicode/utf8"

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

// maxIdent is the longest identifier MySQL and MariaDB take, in characters.
const maxIdent = 64

// tableName is the MySQL name of a recorded table: the target database is
// one namespace, so a table of PostgreSQL schema public keeps its name and
// one of any other schema is named schema__name. A MySQL-family source's
// chain holds one database, so its tables keep their bare names (shop.orders
// is orders), as a MySQL-to-MySQL copy would name them.
func tableName(t *chain.Table) string {
	if t.Dialect == chain.DialectMySQL {
		return t.Name
	}
	return objectName(t.Schema, t.Name)
}

func objectName(schema, name string) string {
	if schema == "public" || schema == "" {
		return name
	}
	return schema + "__" + name
}

// nameOfQualified is the MySQL name of a table known only by its qualified
// name "schema.name".
func nameOfQualified(qualified string) string {
	schema, name, ok := strings.Cut(qualified, ".")
	if !ok {
		return qualified
	}
	return objectName(schema, name)
}

// quoteIdent quotes a MySQL identifier.
func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// foldName folds a name for collision checks: MySQL compares column and
// index names without case, and table names too on servers with
// lower_case_table_names set, so two names equal under ASCII case are
// refused everywhere.
func foldName(s string) string { return strings.ToLower(s) }

// nameSet tracks the MySQL table names a schema takes, folded.
type nameSet map[string]string

func newNameSet() nameSet {
	n := nameSet{}
	for _, c := range []string{stateTable, marksTable, legacyRestoreLinksTable} {
		n[c] = "sluice's control table " + c
	}
	return n
}

// checkIdent refuses a name MySQL cannot hold.
func checkIdent(name, what string) error {
	switch {
	case utf8.RuneCountInString(name) > maxIdent:
		return errcode.New(errcode.SourceSchemaUnsupported, "%s maps to MySQL name %q, longer than MySQL's %d characters; rename it on the source", what, name, maxIdent)
	case strings.HasSuffix(name, " "):
		return errcode.New(errcode.SourceSchemaUnsupported, "%s maps to MySQL name %q, which ends in a space (MySQL refuses such names); rename it on the source", what, name)
	case name == "":
		return errcode.New(errcode.SourceSchemaUnsupported, "%s has an empty name", what)
	}
	return nil
}

// takeTable claims a table's MySQL name and checks its columns and the
// indexes the target creates for it.
func (n nameSet) takeTable(t *chain.Table) error {
	name := tableName(t)
	what := "table " + t.QualifiedName()
	if err := checkIdent(name, what); err != nil {
		return err
	}
	folded := foldName(name)
	if prev, ok := n[folded]; ok {
		return errcode.New(errcode.SourceSchemaUnsupported,
			"%s and %s both map to MySQL table %q (schema s table t is named s__t, and names are compared without case); rename one on the source", what, prev, name)
	}
	n[folded] = what
	if len(t.SuppliedColumns()) == 0 {
		return errcode.New(errcode.SourceSchemaUnsupported, "table %s has no column the target stores (generated columns are not stored)", t.QualifiedName())
	}
	cols := map[string]string{}
	for _, c := range t.Columns {
		if err := checkIdent(c.Name, fmt.Sprintf("column %s.%s", t.QualifiedName(), c.Name)); err != nil {
			return err
		}
		f := foldName(c.Name)
		if prev, ok := cols[f]; ok {
			return errcode.New(errcode.SourceSchemaUnsupported,
				"table %s: columns %q and %q are one column in MySQL, whose column names ignore case; rename one on the source", t.QualifiedName(), prev, c.Name)
		}
		cols[f] = c.Name
	}
	return nil
}

// checkNames refuses a schema two of whose tables would share a MySQL
// name, or a name MySQL cannot hold.
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

// indexName is the MySQL name of a recorded index (index names are per
// table in MySQL), shortened with a hash suffix when too long.
func indexName(ix chain.Index) string {
	if utf8.RuneCountInString(ix.Name) <= maxIdent {
		return ix.Name
	}
	r := []rune(ix.Name)
	h := fnv.New32a()
	h.Write([]byte(ix.Name))
	return string(r[:maxIdent-9]) + fmt.Sprintf("_%08x", h.Sum32())
}

// indexSkipped says why the target does not create a recorded index, or ""
// when it does: a partial index or one on expressions is PostgreSQL SQL the
// target does not translate, and one over a generated column indexes what
// the target does not store.
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

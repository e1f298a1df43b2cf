package sqlite

import (
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/target/sqlkit"
	"github.com/sluicehq/sluice/internal/value"
)

// kindOf is a recorded column's neutral kind. Every value the target
// writes is decoded and rendered by it.
func kindOf(c chain.Column) value.Kind { return c.NeutralKind() }

// declType is the SQLite column type of a neutral kind. Each name gives
// the column the affinity its values are stored under: INTEGER for 64-bit
// integers and booleans, REAL for floats, BLOB for bytes, and TEXT for
// everything else, decimals included — a decimal under NUMERIC affinity
// would be rounded to a REAL.
func declType(k value.Kind) string {
	switch k.Name {
	case value.Int, value.Bool:
		return "INTEGER"
	case value.Float:
		return "REAL"
	case value.Bytes:
		return "BLOB"
	}
	return "TEXT"
}

// column is one stored column of a target table: a supplied column of the
// recorded table (generated columns are not stored).
type column struct {
	// Column decodes and renders the column's values.
	sqlkit.Column
	name    string
	quoted  string
	notNull bool
	decl    string
}

// verbatimKinds are the kinds whose PostgreSQL text the target stores as
// it is.
var verbatimKinds = []value.Name{value.Text, value.Enum, value.Other}

func newColumn(c chain.Column) column {
	k := kindOf(c)
	return column{Column: sqlkit.Column{Kind: k, OID: c.TypeOID, Encoding: c.Encoding, Verbatim: verbatimKinds,
		Render: func(v value.Value) (any, error) { return render(k, v) }},
		name: c.Name, quoted: quoteIdent(c.Name), notNull: c.NotNull, decl: declType(k)}
}

// withKinds returns a copy of t whose every column carries its kind,
// resolved against the enums s records (chain.Schema.FillKinds): in a
// chain written before kinds were recorded, a user-defined type is taken
// for an enum unless it is one of s's, and only an enum's binary form is
// its label. s and t stay as they are.
func withKinds(s *chain.Schema, t *chain.Table) *chain.Table {
	cp := *t
	cp.Columns = slices.Clone(t.Columns)
	one := chain.Schema{Tables: []chain.Table{cp}}
	if s != nil {
		one.Enums = s.Enums
	}
	one.FillKinds()
	return &one.Tables[0]
}

// storedColumns are the columns the target stores for t: its supplied
// columns, in table order, the order row images carry them in.
func storedColumns(t *chain.Table) []column {
	sup := t.SuppliedColumns()
	cols := make([]column, len(sup))
	for i, c := range sup {
		cols[i] = newColumn(c)
	}
	return cols
}

// createTableSQL creates t bare: its stored columns with their types and
// NOT NULL, and its primary key, which SQLite only takes in CREATE TABLE.
// Defaults, CHECK and foreign keys are not carried. ifMissing makes it
// CREATE TABLE IF NOT EXISTS; as names the table (a rebuild's copy).
func createTableSQL(t *chain.Table, as string, ifMissing bool) string {
	cols := storedColumns(t)
	defs := make([]string, 0, len(cols)+1)
	for _, c := range cols {
		d := c.quoted + " " + c.decl
		if c.notNull {
			d += " NOT NULL"
		}
		defs = append(defs, d)
	}
	if len(t.PrimaryKey) > 0 {
		pk := make([]string, len(t.PrimaryKey))
		for i, c := range t.PrimaryKey {
			pk[i] = quoteIdent(c)
		}
		defs = append(defs, "PRIMARY KEY ("+strings.Join(pk, ", ")+")")
	}
	create := "CREATE TABLE "
	if ifMissing {
		create += "IF NOT EXISTS "
	}
	return create + quoteIdent(as) + " (" + strings.Join(defs, ", ") + ")"
}

// createIndexSQL creates the indexes of t the target keeps (see
// indexSkipped) when missing: UNIQUE ones, which inserts arbitrate on, and
// plain ones, for the target's readers.
func createIndexSQL(t *chain.Table) []string {
	var stmts []string
	for _, ix := range t.Indexes {
		if indexSkipped(t, ix) != "" {
			continue
		}
		cols := make([]string, len(ix.Columns))
		for i, c := range ix.Columns {
			cols[i] = quoteIdent(c)
		}
		create := "CREATE INDEX IF NOT EXISTS "
		if ix.Unique {
			create = "CREATE UNIQUE INDEX IF NOT EXISTS "
		}
		stmts = append(stmts, create+quoteIdent(indexName(t, ix.Name))+" ON "+quoteIdent(tableName(t))+" ("+strings.Join(cols, ", ")+")")
	}
	return stmts
}

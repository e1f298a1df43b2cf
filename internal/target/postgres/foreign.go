package postgres

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/value"
)

// A table recorded from a source of another SQL dialect (chain.Table's
// Foreign: a MySQL-family source) carries type texts, generation
// expressions and index definitions the target must not execute. Every
// schema entering the target goes through nativeSchema or nativeTable,
// which turn each such table into the PostgreSQL table it is stored as,
// built from the columns' neutral kinds and the key and index column
// lists alone (docs/cross-engine-types.md). The restore, the incremental
// apply, the lanes and their schema changes all see that one shape.

// pgIdentMax is the longest identifier PostgreSQL keeps (NAMEDATALEN-1).
const pgIdentMax = 63

// nativeSchema returns s with every foreign table replaced by the table it
// is stored as; s itself when it holds none (and nil for nil). s is not
// modified.
func nativeSchema(s *chain.Schema) *chain.Schema {
	if s == nil || !slices.ContainsFunc(s.Tables, func(t chain.Table) bool { return t.Foreign() }) {
		return s
	}
	cp := *s
	cp.Tables = make([]chain.Table, len(s.Tables))
	for i := range s.Tables {
		cp.Tables[i] = *nativeTable(&s.Tables[i])
	}
	return &cp
}

// nativeTable returns the PostgreSQL table a recorded table is stored as:
// t itself unless it is foreign, else a new table of the same schema and
// name whose columns have the PostgreSQL types of their kinds (pgType),
// only constant defaults, no identities or generated columns (a generated column's
// expression is the source's SQL, and its values never travel: the column
// is not stored), the primary key and the indexes on plain columns under
// names unique in the schema, and no constraints. t is not modified.
func nativeTable(t *chain.Table) *chain.Table {
	if t == nil || !t.Foreign() {
		return t
	}
	out := &chain.Table{Schema: t.Schema, Name: t.Name}
	stored := map[string]bool{}
	for _, c := range t.Columns {
		if c.Generated != "" {
			continue
		}
		k := c.NeutralKind()
		col := chain.Column{Name: c.Name, Type: pgType(k), NotNull: c.NotNull, Encoding: c.Encoding, Kind: &k}
		// A constant default is rendered again as a quoted literal of
		// its value's text (never the recorded text), which PostgreSQL
		// takes as it is: it fills the rows that exist when the column is
		// added, as MySQL's ADD COLUMN did on the source without logging
		// them.
		if text, isNull, ok := value.ConstantDefault(c.Default); ok {
			col.Default = quoteLiteral(text)
			if isNull {
				col.Default = "NULL"
			}
		}
		out.Columns = append(out.Columns, col)
		stored[c.Name] = true
	}
	covered := func(cols []string) bool {
		return len(cols) > 0 && !slices.ContainsFunc(cols, func(c string) bool { return !stored[c] })
	}
	if covered(t.PrimaryKey) {
		out.PrimaryKey = slices.Clone(t.PrimaryKey)
	}
	for _, ix := range t.Indexes {
		if ix.Expression || ix.Partial || !covered(ix.Columns) {
			continue
		}
		name := indexName(t.Name, ix.Name)
		cols := make([]string, len(ix.Columns))
		for i, c := range ix.Columns {
			cols[i] = ident(c)
		}
		create := "CREATE INDEX "
		if ix.Unique {
			create = "CREATE UNIQUE INDEX "
		}
		out.Indexes = append(out.Indexes, chain.Index{
			Name: name, Columns: slices.Clone(ix.Columns), Unique: ix.Unique,
			Definition: create + ident(name) + " ON " + ident(t.Schema, t.Name) + " (" + strings.Join(cols, ", ") + ")",
		})
	}
	return out
}

// noteForeign logs what of foreign table t the target leaves out when it
// creates the table (nativeTable): generated columns, and the key and
// indexes over expressions, column prefixes or generated columns.
func noteForeign(t *chain.Table) {
	if t == nil || !t.Foreign() {
		return
	}
	generated := map[string]bool{}
	for _, c := range t.Columns {
		if c.Generated != "" {
			generated[c.Name] = true
			slog.Info("PostgreSQL target: generated column not stored", "table", t.QualifiedName(), "column", c.Name,
				"reason", "its expression is "+t.Dialect+" SQL, and its values are not recorded")
		}
	}
	if slices.ContainsFunc(t.PrimaryKey, func(c string) bool { return generated[c] }) {
		slog.Warn("PostgreSQL target: primary key not created", "table", t.QualifiedName(), "reason", "it has a generated column, which is not stored")
	}
	for _, ix := range t.Indexes {
		switch {
		case ix.Expression || ix.Partial:
			slog.Info("PostgreSQL target: index not created", "table", t.QualifiedName(), "index", ix.Name,
				"reason", "it is on expressions or column prefixes, written in "+t.Dialect+" SQL")
		case slices.ContainsFunc(ix.Columns, func(c string) bool { return generated[c] }):
			slog.Info("PostgreSQL target: index not created", "table", t.QualifiedName(), "index", ix.Name,
				"reason", "it covers a generated column, which is not stored")
		}
	}
}

// indexName names a foreign table's index on the target. MySQL names an
// index within its table, PostgreSQL within the schema, so the table's
// name leads; a name beyond PostgreSQL's 63 bytes is cut and ends in a
// hash of the whole, so two long names stay apart.
func indexName(table, index string) string {
	name := table + "_" + index
	if len(name) <= pgIdentMax {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	tail := "_" + hex.EncodeToString(sum[:4])
	cut := pgIdentMax - len(tail)
	for cut > 0 && !validCut(name, cut) {
		cut--
	}
	return name[:cut] + tail
}

// validCut reports whether cutting s at byte i leaves whole UTF-8
// characters.
func validCut(s string, i int) bool { return i >= len(s) || s[i]&0xC0 != 0x80 }

// pgType is the PostgreSQL type a column of kind k of a foreign table is
// stored as: one that holds every value of the kind exactly
// (docs/cross-engine-types.md tabulates it).
func pgType(k value.Kind) string {
	switch k.Name {
	case value.Int:
		bits := value.IntBits(k)
		if k.Unsigned {
			bits++ // the sign needs one more bit
		}
		switch {
		case bits <= 16:
			return "smallint"
		case bits <= 32:
			return "integer"
		case bits <= 64:
			return "bigint"
		}
		return "numeric(20,0)"
	case value.Decimal:
		if k.Precision > 0 && k.Scale >= 0 && k.Scale <= k.Precision {
			return "numeric(" + strconv.Itoa(k.Precision) + "," + strconv.Itoa(k.Scale) + ")"
		}
		return "numeric"
	case value.Float:
		if k.Width == 32 {
			return "real"
		}
		return "double precision"
	case value.Bool:
		return "boolean"
	case value.Bytes:
		return "bytea"
	case value.Date:
		return "date"
	case value.Time:
		if k.Zoned {
			return "time(6) with time zone"
		}
		return "time(6) without time zone"
	case value.Timestamp:
		return "timestamp(6) without time zone"
	case value.TimestampTZ:
		return "timestamp(6) with time zone"
	case value.Interval:
		return "interval"
	case value.UUID:
		return "uuid"
	case value.JSON:
		return "json"
	case value.Array:
		if k.Elem != nil && k.Elem.Name != value.Array {
			return pgType(*k.Elem) + "[]"
		}
	}
	// Text, enum (its labels unchecked: a later label needs no DDL) and
	// every other kind are stored as their text.
	return "text"
}

package ddlcheck

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/value"
)

// A table recorded from a MySQL-family source carries MySQL's texts:
// COLUMN_TYPE, a constant default and the generation expression. No
// target sends them as they are: every target builds such a table from
// the columns' neutral kinds, and the MySQL target keeps a few native
// types it re-renders from their parsed form (MySQLMembers). They are
// still checked against a strict grammar of what the MySQL source
// records, so a forged one is refused like any other.

// mysqlTypeNames are the type names COLUMN_TYPE prints on MySQL and
// MariaDB.
var mysqlTypeNames = setOf(
	"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "decimal", "numeric", "float", "double", "real",
	"bit", "bool", "boolean", "year", "date", "time", "datetime", "timestamp",
	"char", "varchar", "binary", "varbinary", "tinytext", "text", "mediumtext", "longtext",
	"tinyblob", "blob", "mediumblob", "longblob", "json", "enum", "set",
	"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
	"geometrycollection", "geomcollection", "uuid", "inet4", "inet6", "vector",
)

var mysqlType = regexp.MustCompile(`^([a-z0-9]+)(?:\(\s*([0-9]+)\s*(?:,\s*([0-9]+)\s*)?\))?((?: (?:unsigned|signed|zerofill))*)$`)

// MySQLType checks a recorded MySQL COLUMN_TYPE: an allowlisted type name
// with up to two integer modifiers and UNSIGNED, SIGNED or ZEROFILL, or
// ENUM or SET with a list of quoted members (MySQLMembers).
func MySQLType(w Where, text string) error {
	t := strings.ToLower(strings.TrimSpace(text))
	if strings.HasPrefix(t, "enum(") || strings.HasPrefix(t, "set(") {
		_, err := MySQLMembers(text)
		if err != nil {
			return refuse(w, text, "%v", err)
		}
		return nil
	}
	m := mysqlType.FindStringSubmatch(t)
	if m == nil || !mysqlTypeNames[m[1]] {
		return refuse(w, text, "it is not a MySQL column type sluice records")
	}
	return nil
}

// MySQLMembers reads the members of a recorded ENUM(…) or SET(…) type:
// single-quoted strings separated by commas, a quote inside doubled or
// escaped with a backslash, as COLUMN_TYPE prints them. A target renders
// the members again from what it returns, never from the text.
func MySQLMembers(text string) ([]string, error) {
	t := strings.TrimSpace(text)
	open := strings.IndexByte(t, '(')
	if open < 0 || !strings.HasSuffix(t, ")") {
		return nil, fmt.Errorf("it is not ENUM(…) or SET(…)")
	}
	if kw := strings.ToLower(t[:open]); kw != "enum" && kw != "set" {
		return nil, fmt.Errorf("it is not ENUM(…) or SET(…)")
	}
	body := t[open+1 : len(t)-1]
	var members []string
	for i := 0; ; {
		for i < len(body) && body[i] == ' ' {
			i++
		}
		if i >= len(body) || body[i] != '\'' {
			return nil, fmt.Errorf("a member is not a quoted string")
		}
		var b strings.Builder
		i++
		closed := false
		for i < len(body) && !closed {
			c := body[i]
			switch {
			case c == '\'' && i+1 < len(body) && body[i+1] == '\'':
				b.WriteByte('\'')
				i += 2
			case c == '\'':
				closed = true
				i++
			case c == '\\' && i+1 < len(body):
				b.WriteByte(body[i+1])
				i += 2
			default:
				b.WriteByte(c)
				i++
			}
		}
		if !closed {
			return nil, fmt.Errorf("a member's quote is not closed")
		}
		if m := b.String(); !utf8.ValidString(m) || strings.ContainsRune(m, 0) {
			return nil, fmt.Errorf("a member is not UTF-8 text")
		} else {
			members = append(members, m)
		}
		for i < len(body) && body[i] == ' ' {
			i++
		}
		if i == len(body) {
			return members, nil
		}
		if body[i] != ',' {
			return nil, fmt.Errorf("members are not separated by commas")
		}
		i++
	}
}

// CheckForeign checks a table recorded from a MySQL-family source: its
// names, its dialect, each column's type (MySQLType), default (a
// constant, value.ConstantDefault) and identity (none, or d for
// AUTO_INCREMENT), and that its generation expressions and index
// definitions, which no target sends, are UTF-8 text.
func CheckForeign(t *chain.Table) error {
	if err := checkTableNames(t); err != nil {
		return err
	}
	q := t.QualifiedName()
	if t.Dialect != chain.DialectMySQL {
		return refuse(Where{Table: q, What: "dialect"}, t.Dialect, "it is not a dialect sluice records")
	}
	for _, c := range t.Columns {
		w := Where{Table: q, Column: "column " + c.Name}
		w.What = "type"
		if err := MySQLType(w, c.Type); err != nil {
			return err
		}
		if c.Default != "" {
			if _, _, ok := value.ConstantDefault(c.Default); !ok {
				w.What = "default"
				return refuse(w, c.Default, "it is not a constant")
			}
		}
		if c.Identity != "" && c.Identity != chain.IdentityByDefault {
			w.What = "identity"
			return refuse(w, c.Identity, "a MySQL-family column is recorded only as d (AUTO_INCREMENT)")
		}
		if !utf8.ValidString(c.Generated) || strings.ContainsRune(c.Generated, 0) {
			w.What = "generation expression"
			return refuse(w, c.Generated, "it is not UTF-8 text")
		}
	}
	for _, ix := range t.Indexes {
		if !utf8.ValidString(ix.Definition) || strings.ContainsRune(ix.Definition, 0) {
			return refuse(Where{Table: q, Column: "index " + ix.Name, What: "index definition"}, ix.Definition, "it is not UTF-8 text")
		}
	}
	return nil
}

// Check checks every recorded text of schema s (Postgres, CheckForeign).
// It is what verify-chain and the targets that build tables from kinds
// alone run, so that a forged schema is refused by every reader.
func Check(s *chain.Schema) error {
	_, err := Postgres(s)
	return err
}

// CheckTable checks the table definition of a schema change record
// against the names known so far (names gains its new user types).
func CheckTable(t *chain.Table, names *Names) error {
	_, err := PostgresTable(t, names)
	return err
}

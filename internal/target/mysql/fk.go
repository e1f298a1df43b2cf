package mysql

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/chain"
)

// foreignKey is a recorded FOREIGN KEY translated for MySQL.
type foreignKey struct {
	name      string // the MySQL constraint name
	table     string // the MySQL name of the referencing table
	cols      []string
	refTable  string // the MySQL name of the referenced table
	refCols   []string
	onDelete  string
	onUpdate  string
	skipWhy   string
	qualified string // the referencing table's recorded name, for logs
	source    string // the recorded constraint name, for logs
}

var fkDefinition = regexp.MustCompile(`^FOREIGN KEY \((.+?)\) REFERENCES (.+?)\s*\((.+?)\)(.*)$`)
var fkAction = regexp.MustCompile(`ON (DELETE|UPDATE) (CASCADE|SET NULL|SET DEFAULT|RESTRICT|NO ACTION)(?:\s*\([^)]*\))?`)

// splitIdents splits a list of PostgreSQL identifiers ("a, \"B c\"").
func splitIdents(s string) []string {
	var out []string
	for _, part := range splitOutsideQuotes(s, ',') {
		out = append(out, unquotePG(strings.TrimSpace(part)))
	}
	return out
}

// splitOutsideQuotes splits s at sep where it is not inside double quotes.
func splitOutsideQuotes(s string, sep byte) []string {
	var parts []string
	inQuote, start := false, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '"':
			inQuote = !inQuote
		case s[i] == sep && !inQuote:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// unquotePG reads one PostgreSQL identifier, quoted or not.
func unquotePG(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return strings.ReplaceAll(s[1:len(s)-1], `""`, `"`)
	}
	return s
}

// translateForeignKey turns a recorded FOREIGN KEY of table t into MySQL
// terms; skipWhy is set when it does not translate.
func translateForeignKey(s *chain.Schema, t *chain.Table, c chain.Constraint) foreignKey {
	fk := foreignKey{table: tableName(t), qualified: t.QualifiedName(), source: c.Name}
	m := fkDefinition.FindStringSubmatch(strings.TrimSpace(c.Definition))
	if m == nil {
		fk.skipWhy = "its definition does not read as FOREIGN KEY (…) REFERENCES …(…)"
		return fk
	}
	fk.cols, fk.refCols = splitIdents(m[1]), splitIdents(m[3])
	ref := splitOutsideQuotes(strings.TrimSpace(m[2]), '.')
	refSchema, refName := t.Schema, unquotePG(ref[len(ref)-1])
	if len(ref) == 2 {
		refSchema = unquotePG(ref[0])
	}
	found := false
	for i := range s.Tables {
		if s.Tables[i].Schema == refSchema && s.Tables[i].Name == refName {
			fk.refTable, found = tableName(&s.Tables[i]), true
		}
	}
	if !found {
		fk.skipWhy = "it references " + refSchema + "." + refName + ", which the chain does not hold"
		return fk
	}
	rest := m[4]
	if strings.Contains(rest, "MATCH FULL") {
		fk.skipWhy = "MATCH FULL, which InnoDB does not enforce"
		return fk
	}
	for _, a := range fkAction.FindAllStringSubmatch(rest, -1) {
		if a[2] == "SET DEFAULT" {
			fk.skipWhy = "ON " + a[1] + " SET DEFAULT, which InnoDB refuses"
			return fk
		}
		if strings.Contains(a[0], "(") {
			fk.skipWhy = "ON DELETE SET NULL of some columns only, which MySQL has not"
			return fk
		}
		if a[1] == "DELETE" {
			fk.onDelete = a[2]
		} else {
			fk.onUpdate = a[2]
		}
	}
	return fk
}

// constraintName gives a foreign key a MySQL name unique in the database
// (PostgreSQL's are unique per table only).
func constraintName(taken map[string]bool, table, name string) string {
	candidate := name
	if taken[foldName(candidate)] || utf8.RuneCountInString(candidate) > maxIdent {
		h := fnv.New32a()
		h.Write([]byte(table + "." + name))
		base := []rune(table + "_" + name)
		if len(base) > maxIdent-9 {
			base = base[:maxIdent-9]
		}
		candidate = fmt.Sprintf("%s_%08x", string(base), h.Sum32())
	}
	taken[foldName(candidate)] = true
	return candidate
}

// addForeignKeys creates, after every table's data and indexes, the
// foreign keys that translate and do not exist yet; foreign_key_checks is
// off on the connection, so the rows are not checked again. A foreign key
// that does not translate, or that MySQL refuses (a referenced column
// without an index, say), is logged and left out: the rows are loaded
// either way.
func addForeignKeys(ctx context.Context, q execer, s *chain.Schema) error {
	existing := map[string]bool{}
	rows, err := q.QueryContext(ctx, `SELECT CONSTRAINT_NAME FROM information_schema.TABLE_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = DATABASE() AND CONSTRAINT_TYPE = 'FOREIGN KEY'`)
	if err != nil {
		return classify(err, "read the target's foreign keys")
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return classify(err, "read the target's foreign keys")
		}
		existing[foldName(n)] = true
	}
	rows.Close()
	taken := map[string]bool{}
	for i := range s.Tables {
		t := &s.Tables[i]
		for _, c := range t.Constraints {
			switch c.Type {
			case "f":
			case "c":
				slog.Info("MySQL target: CHECK constraint not created", "table", t.QualifiedName(), "constraint", c.Name, "reason", "its expression is PostgreSQL SQL")
				continue
			default:
				slog.Info("MySQL target: constraint not created", "table", t.QualifiedName(), "constraint", c.Name, "reason", "MySQL has no "+c.Type+" constraint")
				continue
			}
			fk := translateForeignKey(s, t, c)
			if fk.skipWhy != "" {
				slog.Warn("MySQL target: foreign key not created", "table", fk.qualified, "constraint", fk.source, "reason", fk.skipWhy)
				continue
			}
			fk.name = constraintName(taken, fk.table, c.Name)
			if existing[foldName(fk.name)] {
				continue
			}
			stmt := "ALTER TABLE " + quoteIdent(fk.table) + " ADD CONSTRAINT " + quoteIdent(fk.name) +
				" FOREIGN KEY (" + quoteList(fk.cols) + ") REFERENCES " + quoteIdent(fk.refTable) + " (" + quoteList(fk.refCols) + ")"
			if fk.onDelete != "" {
				stmt += " ON DELETE " + fk.onDelete
			}
			if fk.onUpdate != "" {
				stmt += " ON UPDATE " + fk.onUpdate
			}
			if _, err := q.ExecContext(ctx, stmt); err != nil {
				slog.Warn("MySQL target: foreign key not created", "table", fk.qualified, "constraint", fk.source, "reason", err.Error())
			}
		}
	}
	return nil
}

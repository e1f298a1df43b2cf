package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/value"
)

// querier is what reading the schema needs: a pool, a connection or a
// transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// column facts read from information_schema beside the recorded column.
type columnFacts struct {
	dataType string // DATA_TYPE, lowercase
	charset  string // CHARACTER_SET_NAME ("" for non-character types)
}

// tableFacts are a recorded table and what the capture checks its binlog
// table maps against.
type tableFacts struct {
	table chain.Table
	cols  []columnFacts
}

// readSchema reads every base table of database from information_schema,
// in one statement per catalog table, as the chain records them. Views are
// not tables and are left out. Columns whose type a chain cannot carry, and
// text in a character set other than UTF-8 or ASCII, are refused with
// SOURCE-SCHEMA-UNSUPPORTED, naming each.
func readSchema(ctx context.Context, q querier, database string) (*chain.Schema, map[string]*tableFacts, error) {
	facts, err := readTables(ctx, q, database, "")
	if err != nil {
		return nil, nil, err
	}
	s := &chain.Schema{Schemas: []string{database}}
	var problems []string
	for _, name := range sortedNames(facts) {
		tf := facts[name]
		problems = append(problems, unsupported(tf)...)
		s.Tables = append(s.Tables, tf.table)
	}
	if len(problems) > 0 {
		return nil, nil, errcode.New(errcode.SourceSchemaUnsupported, "the source has columns a chain cannot carry: %s", strings.Join(problems, "; "))
	}
	return s, facts, nil
}

func sortedNames(m map[string]*tableFacts) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// unsupported lists the columns of a table the chain cannot carry.
func unsupported(tf *tableFacts) []string {
	var out []string
	for i := range tf.table.Columns {
		out = append(out, unsupportedColumn(tf, i)...)
	}
	return out
}

// unsupportedColumn says why the chain cannot carry column i of a table
// (nothing when it can).
func unsupportedColumn(tf *tableFacts, i int) []string {
	var out []string
	c, f := tf.table.Columns[i], tf.cols[i]
	if f.charset != "" && !utf8Compatible(f.charset) {
		out = append(out, fmt.Sprintf("%s.%s is %s in character set %s (only utf8mb4, utf8mb3, utf8 and ascii text is carried; convert the column)",
			tf.table.QualifiedName(), c.Name, c.Type, f.charset))
	}
	if c.Kind.Name == value.Other {
		out = append(out, fmt.Sprintf("%s.%s has type %s, which sluice does not carry", tf.table.QualifiedName(), c.Name, c.Type))
	}
	return out
}

func utf8Compatible(cs string) bool {
	switch strings.ToLower(cs) {
	case "utf8mb4", "utf8mb3", "utf8", "ascii", "binary":
		return true
	}
	return false
}

// readTables reads the base tables of database (only the one named by
// table, when it is not empty), keyed by name.
func readTables(ctx context.Context, q querier, database, table string) (map[string]*tableFacts, error) {
	filter, args := "", []any{database}
	if table != "" {
		filter, args = " AND t.TABLE_NAME = ?", append(args, table)
	}
	var version string
	if err := queryRow(ctx, q, "SELECT VERSION()", &version); err != nil {
		return nil, classify(err, "read the source's version")
	}
	mariadb := strings.Contains(strings.ToLower(version), "mariadb")
	rows, err := q.QueryContext(ctx, `SELECT c.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, c.IS_NULLABLE, c.EXTRA,
		       COALESCE(c.GENERATION_EXPRESSION, ''), COALESCE(c.CHARACTER_SET_NAME, ''), COALESCE(c.NUMERIC_PRECISION, 0), COALESCE(c.NUMERIC_SCALE, 0),
		       c.COLUMN_DEFAULT
		  FROM information_schema.COLUMNS c
		  JOIN information_schema.TABLES t ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME
		 WHERE c.TABLE_SCHEMA = ? AND t.TABLE_TYPE = 'BASE TABLE'`+filter+`
		 ORDER BY c.TABLE_NAME, c.ORDINAL_POSITION`, args...)
	if err != nil {
		return nil, classify(err, "read the source's columns")
	}
	out := map[string]*tableFacts{}
	var lossyCols []lossyColumn
	for rows.Next() {
		var tname, cname, dataType, colType, nullable, extra, genExpr, charset string
		var prec, scale int64
		var def sql.NullString
		if err := rows.Scan(&tname, &cname, &dataType, &colType, &nullable, &extra, &genExpr, &charset, &prec, &scale, &def); err != nil {
			rows.Close()
			return nil, classify(err, "read the source's columns")
		}
		tf := out[tname]
		if tf == nil {
			tf = &tableFacts{table: chain.Table{Schema: database, Name: tname, Dialect: chain.DialectMySQL}}
			out[tname] = tf
		}
		dataType = strings.ToLower(dataType)
		k := kindOf(dataType, colType, int(prec), int(scale))
		col := chain.Column{Name: cname, Type: colType, NotNull: nullable == "NO", Encoding: chain.EncodingText, Kind: &k}
		if strings.Contains(strings.ToLower(extra), "auto_increment") {
			// MySQL's AUTO_INCREMENT takes a value written to it as it is
			// and hands out the next otherwise: PostgreSQL's BY DEFAULT.
			col.Identity = chain.IdentityByDefault
		}
		facts := columnFacts{dataType: dataType, charset: charset}
		lc := lossyColumn{tf: tf, i: len(tf.table.Columns), c: codec{kind: k, dataType: dataType, bytes: fixedWidth(colType), where: tname + "." + cname}}
		if lit, ok := defaultLiteral(def, extra, mariadb); ok && genExpr == "" {
			if lossy(lit, charset) {
				lc.lit = &lit
			} else {
				col.Default = encodeDefault(lit, lc.c)
			}
		}
		tf.table.Columns = append(tf.table.Columns, col)
		tf.cols = append(tf.cols, facts)
		if lc.lit != nil || (dataType == "enum" || dataType == "set") && lossy(colType, charset) {
			lossyCols = append(lossyCols, lc)
		}
	}
	if err := rows.Close(); err != nil {
		return nil, classify(err, "read the source's columns")
	}
	if err := readExactText(ctx, q, database, lossyCols); err != nil {
		return nil, err
	}
	if err := readJSONChecks(ctx, q, database, out); err != nil {
		return nil, err
	}
	if err := readIndexes(ctx, q, database, table, out); err != nil {
		return nil, err
	}
	return out, nil
}

// queryRow scans one row of a query on q.
func queryRow(ctx context.Context, q querier, query string, dest ...any) error {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	return rows.Scan(dest...)
}

var numericDefault = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)

// defaultLiteral is the value of a constant default as the catalog shows
// it (COLUMN_DEFAULT, quotes and doubled quotes taken off); ok is false
// for no default, NULL, and an expression (CURRENT_TIMESTAMP, functions),
// which the chain does not record. MariaDB prints a string default quoted
// and an expression bare; MySQL 8 prints a string default bare and flags
// an expression DEFAULT_GENERATED. Where the text shows a '?' that may
// stand for a four-byte character, readExactText reads the value again.
func defaultLiteral(def sql.NullString, extra string, mariadb bool) (string, bool) {
	if !def.Valid || strings.EqualFold(def.String, "NULL") || strings.Contains(strings.ToUpper(extra), "DEFAULT_GENERATED") {
		return "", false
	}
	lit := def.String
	switch {
	case len(lit) >= 2 && lit[0] == '\'' && lit[len(lit)-1] == '\'':
		lit = strings.ReplaceAll(lit[1:len(lit)-1], "''", "'")
	case numericDefault.MatchString(lit):
	case mariadb:
		return "", false // an expression
	}
	return lit, true
}

// encodeDefault is a column's constant default, of value lit, as the chain
// records it for a MySQL-family table: a quoted literal of the value's
// PostgreSQL text form ('5', 'abc'), which every target reads
// (value.ConstantDefault) and a PostgreSQL target takes as SQL; "" for a
// value no kind's text holds. It matters beyond new rows: ALTER TABLE …
// ADD COLUMN … DEFAULT fills the existing rows without logging them, so a
// target must fill them the same way.
func encodeDefault(lit string, c codec) string {
	if c.dataType == "bit" || c.dataType == "set" && lit == "" {
		return "" // b'…' literals, and the empty set, have no plain text form
	}
	text, err := c.fromText([]byte(lit))
	if err != nil || text == nil {
		return ""
	}
	return "'" + strings.ReplaceAll(string(text), "'", "''") + "'"
}

// readJSONChecks marks as JSON MariaDB's JSON columns: LONGTEXT with the
// json_valid check MariaDB adds for the JSON alias.
func readJSONChecks(ctx context.Context, q querier, database string, tables map[string]*tableFacts) error {
	rows, err := q.QueryContext(ctx, `SELECT TABLE_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = ?`, database)
	if err != nil {
		// MySQL before 8.0.16 and MariaDB before 10.2 have no such table:
		// their JSON is a type of its own, known by DATA_TYPE.
		return nil
	}
	defer rows.Close()
	for rows.Next() {
		var tname, clause string
		if err := rows.Scan(&tname, &clause); err != nil {
			return classify(err, "read the source's check constraints")
		}
		tf := tables[tname]
		m := jsonValid.FindStringSubmatch(clause)
		if tf == nil || m == nil {
			continue
		}
		for i := range tf.table.Columns {
			c := &tf.table.Columns[i]
			if c.Name == m[1] && tf.cols[i].dataType == "longtext" {
				c.Kind = &value.Kind{Name: value.JSON}
			}
		}
	}
	return classify(rows.Err(), "read the source's check constraints")
}

var jsonValid = regexp.MustCompile("^json_valid\\(`((?:[^`]|``)+)`\\)$")

// readIndexes records each table's primary key and other indexes.
func readIndexes(ctx context.Context, q querier, database, table string, tables map[string]*tableFacts) error {
	filter, args := "", []any{database}
	if table != "" {
		filter, args = " AND TABLE_NAME = ?", append(args, table)
	}
	rows, err := q.QueryContext(ctx, `SELECT TABLE_NAME, INDEX_NAME, NON_UNIQUE, COLUMN_NAME, SUB_PART IS NOT NULL
		  FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ?`+filter+`
		 ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX`, args...)
	if err != nil {
		return classify(err, "read the source's indexes")
	}
	defer rows.Close()
	for rows.Next() {
		var tname, iname string
		var nonUnique int
		var col sql.NullString
		var prefix bool
		if err := rows.Scan(&tname, &iname, &nonUnique, &col, &prefix); err != nil {
			return classify(err, "read the source's indexes")
		}
		tf := tables[tname]
		if tf == nil {
			continue
		}
		t := &tf.table
		if iname == "PRIMARY" {
			t.PrimaryKey = append(t.PrimaryKey, col.String)
			t.PrimaryKeyName = "PRIMARY"
			continue
		}
		var ix *chain.Index
		if n := len(t.Indexes); n > 0 && t.Indexes[n-1].Name == iname {
			ix = &t.Indexes[n-1]
		} else {
			t.Indexes = append(t.Indexes, chain.Index{Name: iname, Unique: nonUnique == 0})
			ix = &t.Indexes[len(t.Indexes)-1]
		}
		if !col.Valid || prefix {
			ix.Expression = true // a functional key part, or a prefix of a column
		}
		if col.Valid {
			ix.Columns = append(ix.Columns, col.String)
		}
	}
	if err := rows.Err(); err != nil {
		return classify(err, "read the source's indexes")
	}
	for _, tf := range tables {
		for i := range tf.table.Indexes {
			ix := &tf.table.Indexes[i]
			ix.Definition = indexDefinition(ix)
			if ix.Expression {
				ix.Columns = nil
			}
		}
	}
	return nil
}

// indexDefinition is the index as MySQL would declare it, for reading only:
// a target of another engine builds its index from the column list.
func indexDefinition(ix *chain.Index) string {
	cols := make([]string, len(ix.Columns))
	for i, c := range ix.Columns {
		cols[i] = quoteName(c)
	}
	kind := "KEY"
	if ix.Unique {
		kind = "UNIQUE KEY"
	}
	return kind + " " + quoteName(ix.Name) + " (" + strings.Join(cols, ",") + ")"
}

// quoteName quotes an identifier for MySQL.
func quoteName(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// quoteTable quotes database.table for MySQL.
func quoteTable(t *chain.Table) string { return quoteName(t.Schema) + "." + quoteName(t.Name) }

var (
	bitWidth  = regexp.MustCompile(`^bit\((\d+)\)`)
	enumItems = regexp.MustCompile(`'((?:[^'\\]|''|\\.)*)'`)
)

// kindOf is the neutral kind of a column by its DATA_TYPE and COLUMN_TYPE
// (docs/mysql-source.md lists the mapping). A type no kind holds is Other,
// which the schema read refuses.
func kindOf(dataType, colType string, prec, scale int) value.Kind {
	unsigned := strings.Contains(colType, "unsigned")
	switch dataType {
	case "tinyint":
		return value.Kind{Name: value.Int, Width: 8, Unsigned: unsigned}
	case "smallint":
		return value.Kind{Name: value.Int, Width: 16, Unsigned: unsigned}
	case "mediumint":
		return value.Kind{Name: value.Int, Width: 24, Unsigned: unsigned}
	case "int", "integer":
		return value.Kind{Name: value.Int, Width: 32, Unsigned: unsigned}
	case "bigint":
		return value.Kind{Name: value.Int, Width: 64, Unsigned: unsigned}
	case "year":
		return value.Kind{Name: value.Int, Width: 16}
	case "decimal", "numeric":
		return value.Kind{Name: value.Decimal, Precision: prec, Scale: scale}
	case "float":
		return value.Kind{Name: value.Float, Width: 32}
	case "double", "real":
		return value.Kind{Name: value.Float, Width: 64}
	case "bit":
		return value.Kind{Name: value.Bytes}
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext", "inet4", "inet6", "set":
		return value.Kind{Name: value.Text}
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		return value.Kind{Name: value.Bytes}
	case "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection", "geomcollection":
		return value.Kind{Name: value.Bytes}
	case "enum":
		return value.Kind{Name: value.Enum, Labels: enumLabels(colType)}
	case "json":
		return value.Kind{Name: value.JSON}
	case "date":
		return value.Kind{Name: value.Date}
	case "datetime":
		return value.Kind{Name: value.Timestamp}
	case "timestamp":
		return value.Kind{Name: value.TimestampTZ}
	case "time":
		return value.Kind{Name: value.Interval}
	case "uuid":
		return value.Kind{Name: value.UUID}
	}
	return value.Kind{Name: value.Other}
}

// enumLabels reads the labels of an enum('a','b') or set('a','b') type.
func enumLabels(colType string) []string {
	open := strings.IndexByte(colType, '(')
	if open < 0 {
		return nil
	}
	var out []string
	for _, m := range enumItems.FindAllStringSubmatch(colType[open:], -1) {
		out = append(out, unquoteLabel(m[1]))
	}
	return out
}

// unquoteLabel is a label as a COLUMN_TYPE quotes it: a quote doubled, a
// backslash escaped.
func unquoteLabel(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if (s[i] == '\\' || s[i] == '\'') && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// bitBytes is how many bytes a bit(n) column's values take.
func bitBytes(colType string) int {
	m := bitWidth.FindStringSubmatch(colType)
	if m == nil {
		return 1
	}
	n, _ := strconv.Atoi(m[1])
	return (n + 7) / 8
}

package mysql

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/ddlcheck"
	"github.com/sluicehq/sluice/internal/target/sqlkit"
	"github.com/sluicehq/sluice/internal/value"
)

// kindOf is a recorded column's neutral kind. Every value the target
// writes is decoded and rendered by it.
func kindOf(c chain.Column) value.Kind { return c.NeutralKind() }

// Limits of MySQL's types the mapping works within.
const (
	// maxDecimalPrecision and maxDecimalScale bound DECIMAL(p,s).
	maxDecimalPrecision = 65
	maxDecimalScale     = 30
	// maxKeyBytes is InnoDB's limit on the bytes of one index key.
	maxKeyBytes = 3072
	// maxVarchar is the longest bounded text kept as VARCHAR(n) outside
	// keys; longer or unbounded text is LONGTEXT, which keeps a table of
	// many text columns inside MySQL's 65,535-byte row definition limit.
	maxVarchar = 255
)

// column is one stored column of a target table: a supplied column of the
// recorded table (generated columns are not stored).
type column struct {
	// Column decodes and renders the column's values.
	sqlkit.Column
	name    string
	quoted  string
	notNull bool
	decl    string
	// unconstrained is set on a decimal stored as DECIMAL(65,30) because
	// the source bounded it by nothing MySQL has: its values are checked
	// to fit, and read back without the padding zeros.
	unconstrained bool
	// autoIncrement is set on the AUTO_INCREMENT column of a table
	// recorded from a MySQL-family source (autoIncrementColumn).
	autoIncrement bool
}

var boundedText = regexp.MustCompile(`^(?i)(?:character varying|varchar|character|char|bpchar|nvarchar|nchar)\s*\(\s*([0-9]+)\s*\)$`)

// textLength is the bound of a text column's native type (varchar(n),
// char(n)), or 0 when unbounded.
func textLength(native string) int {
	m := boundedText.FindStringSubmatch(strings.TrimSpace(native))
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return 0
	}
	return n
}

// indexable reports whether MySQL can index a column of kind k (as the
// target stores it).
func indexable(k value.Kind) bool {
	switch k.Name {
	case value.JSON, value.Array:
		return false
	}
	return true
}

// variableKey reports whether a column of kind k is stored as variable
// text or bytes, which a key must bound.
func variableKey(k value.Kind) bool {
	switch k.Name {
	case value.Text, value.Enum, value.Other, value.Bytes:
		return true
	case value.Time:
		return false
	}
	return false
}

// keyBounds computes, for each variable-length column of t that a kept
// index covers, the length the target gives it so that every index stays
// within InnoDB's key limit: the bytes left after the fixed-size columns,
// shared among the variable ones (four bytes a character for utf8mb4).
func keyBounds(t *chain.Table) map[string]int {
	bounds := map[string]int{}
	kinds := map[string]value.Kind{}
	natives := map[string]string{}
	for _, c := range t.Columns {
		kinds[c.Name], natives[c.Name] = kindOf(c), c.Type
	}
	consider := func(cols []string) {
		var vars []string
		fixed := 0
		for _, c := range cols {
			if variableKey(kinds[c]) {
				vars = append(vars, c)
			} else {
				fixed += 16
			}
		}
		if len(vars) == 0 {
			return
		}
		per := (maxKeyBytes - fixed) / (4 * len(vars))
		for _, c := range vars {
			n := per
			if l := textLength(natives[c]); l > 0 && l < n {
				n = l
			}
			if b, ok := bounds[c]; !ok || n < b {
				bounds[c] = n
			}
		}
	}
	if len(t.PrimaryKey) > 0 {
		consider(t.PrimaryKey)
	}
	for _, ix := range t.Indexes {
		if indexSkipped(t, ix) == "" && keptIndex(t, ix) {
			consider(ix.Columns)
		}
	}
	return bounds
}

// keptIndex reports whether every column of ix can be indexed in MySQL.
func keptIndex(t *chain.Table, ix chain.Index) bool {
	for _, name := range ix.Columns {
		for _, c := range t.Columns {
			if c.Name == name && !indexable(kindOf(c)) {
				return false
			}
		}
	}
	return true
}

// declType is the MySQL column type of a column of kind k whose native
// type is native; keyLen, when not 0, bounds a variable-length column an
// index covers. docs/mysql-target.md tabulates the mapping.
func declType(k value.Kind, native string, keyLen int, f flavor) (decl string, unconstrained bool) {
	switch k.Name {
	case value.Int:
		var d string
		switch {
		case k.Width == 8:
			d = "TINYINT"
		case k.Width == 16:
			d = "SMALLINT"
		case k.Width == 24:
			d = "MEDIUMINT"
		case k.Width == 32:
			d = "INT"
		default:
			d = "BIGINT"
		}
		if k.Unsigned {
			d += " UNSIGNED"
		}
		return d, false
	case value.Decimal:
		if k.Precision > 0 && k.Precision <= maxDecimalPrecision && k.Scale >= 0 && k.Scale <= maxDecimalScale {
			return "DECIMAL(" + strconv.Itoa(k.Precision) + "," + strconv.Itoa(k.Scale) + ")", false
		}
		return "DECIMAL(" + strconv.Itoa(maxDecimalPrecision) + "," + strconv.Itoa(maxDecimalScale) + ")", true
	case value.Float:
		if k.Width == 32 {
			return "FLOAT", false
		}
		return "DOUBLE", false
	case value.Bool:
		return "TINYINT(1)", false
	case value.Bytes:
		if keyLen > 0 {
			return "VARBINARY(" + strconv.Itoa(keyLen*4) + ")", false
		}
		return "LONGBLOB", false
	case value.Date:
		return "DATE", false
	case value.Time:
		if k.Zoned {
			return "VARCHAR(32)", false
		}
		return "TIME(6)", false
	case value.Timestamp, value.TimestampTZ:
		return "DATETIME(6)", false
	case value.Interval:
		return "VARCHAR(64)", false
	case value.UUID:
		// Not MariaDB's UUID type: MariaDB 10.11 refuses 128-bit values
		// PostgreSQL takes (a version nibble above 5 with the oldest
		// variant bits, as md5(…)::uuid gives).
		return "CHAR(36) CHARACTER SET ascii COLLATE ascii_bin", false
	case value.JSON, value.Array:
		return "JSON", false
	case value.Enum:
		if keyLen > 0 && keyLen < 255 {
			return "VARCHAR(" + strconv.Itoa(keyLen) + ")", false
		}
		return "VARCHAR(255)", false
	}
	// Text and every other kind are stored as their text.
	n := textLength(native)
	switch {
	case keyLen > 0:
		return "VARCHAR(" + strconv.Itoa(keyLen) + ")", false
	case n > 0 && n <= maxVarchar:
		return "VARCHAR(" + strconv.Itoa(n) + ")", false
	}
	return "LONGTEXT", false
}

// verbatimKinds are the kinds whose PostgreSQL text the target stores as
// it is.
var verbatimKinds = []value.Name{value.Text, value.Enum, value.Other, value.JSON}

// storedColumns are the columns the target stores for t: its supplied
// columns, in table order, the order row images carry them in.
func storedColumns(t *chain.Table, f flavor) []column {
	sup := t.SuppliedColumns()
	bounds := keyBounds(t)
	cols := make([]column, len(sup))
	for i, c := range sup {
		k := kindOf(c)
		decl, unconstrained := declType(k, c.Type, bounds[c.Name], f)
		native := false
		if t.Dialect == chain.DialectMySQL {
			if d, ok := nativeDecl(k, c.Type); ok {
				decl, unconstrained, native = d, false, true
			}
		}
		cols[i] = column{Column: sqlkit.Column{Kind: k, OID: c.TypeOID, Encoding: c.Encoding, Verbatim: verbatimKinds,
			Render: func(v value.Value) (any, error) { return render(k, unconstrained, v) }},
			name: c.Name, quoted: quoteIdent(c.Name), notNull: c.NotNull, decl: decl, unconstrained: unconstrained,
			autoIncrement: native && autoIncrementColumn(t, c)}
	}
	return cols
}

// autoIncrementColumn reports whether c, a column of t stored under its
// native type, is created AUTO_INCREMENT: t was recorded from a
// MySQL-family source, where c was its AUTO_INCREMENT column (identity d),
// an integer leading the primary key, which the CREATE TABLE holds (the
// server takes an AUTO_INCREMENT column only as the first of a key). The
// column still takes the source's values as they are (the sessions run
// with NO_AUTO_VALUE_ON_ZERO, so even 0 stays 0); it is what lets an
// application insert on the target after a cutover, from the counter
// RaiseSequences moves. A PostgreSQL source's identity or serial column is
// created plain: its sequence's options have no MySQL counterpart.
func autoIncrementColumn(t *chain.Table, c chain.Column) bool {
	return t.Dialect == chain.DialectMySQL && c.Identity == chain.IdentityByDefault &&
		kindOf(c).Name == value.Int && len(t.PrimaryKey) > 0 && t.PrimaryKey[0] == c.Name
}

// withKinds returns a copy of t whose every column carries its kind,
// resolved against the enums s records (chain.Schema.FillKinds). s and t
// stay as they are.
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

// columnDef is a column's definition in CREATE or ALTER TABLE.
func (c column) columnDef() string {
	d := c.quoted + " " + c.decl
	if c.notNull {
		d += " NOT NULL"
	} else {
		d += " NULL"
	}
	if c.autoIncrement {
		d += " AUTO_INCREMENT"
	}
	return d
}

// tableOptions end every CREATE TABLE: InnoDB, utf8mb4 with the binary
// NO PAD collation.
func tableOptions(f flavor) string {
	return " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=" + f.collation()
}

// createTableSQL creates t with its stored columns, their types and NOT
// NULL, and its primary key: InnoDB clusters rows on the primary key, so
// one added after the data would rebuild the whole table. Secondary
// indexes and foreign keys come after the data (indexSQL, foreignKeySQL).
func createTableSQL(t *chain.Table, f flavor, ifMissing bool) string {
	cols := storedColumns(t, f)
	defs := make([]string, 0, len(cols)+1)
	for _, c := range cols {
		defs = append(defs, c.columnDef())
	}
	if len(t.PrimaryKey) > 0 {
		defs = append(defs, "PRIMARY KEY ("+quoteList(t.PrimaryKey)+")")
	}
	create := "CREATE TABLE "
	if ifMissing {
		create += "IF NOT EXISTS "
	}
	return create + quoteIdent(tableName(t)) + " (" + strings.Join(defs, ", ") + ")" + tableOptions(f)
}

// quoteList quotes names and joins them with commas.
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = quoteIdent(n)
	}
	return strings.Join(q, ", ")
}

// indexClauses are the ADD INDEX clauses of the indexes of t the target
// keeps (see indexSkipped and keptIndex): UNIQUE ones, which inserts
// arbitrate on, and plain ones, for the target's readers.
func indexClauses(t *chain.Table) []string {
	var out []string
	for _, ix := range t.Indexes {
		if indexSkipped(t, ix) != "" || !keptIndex(t, ix) {
			continue
		}
		kind := "ADD INDEX "
		if ix.Unique {
			kind = "ADD UNIQUE INDEX "
		}
		out = append(out, kind+quoteIdent(indexName(ix))+" ("+quoteList(ix.Columns)+")")
	}
	return out
}

var (
	nativeInt     = regexp.MustCompile(`^(tinyint|smallint|mediumint|int|bigint)(?:\s*\(\s*[0-9]+\s*\))?((?:\s+(?:unsigned|zerofill))*)$`)
	nativeMembers = regexp.MustCompile(`^(enum|set)\s*\('(?:[^'\\]|''|\\.)*'(?:\s*,\s*'(?:[^'\\]|''|\\.)*')*\)$`)
	intWidths     = map[string]int{"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "bigint": 64}
)

// nativeDecl is the column type a column of a table recorded from a
// MySQL-family source keeps on this target: its recorded native type,
// where that type holds exactly the values its kind says and renders and
// reads back as the kind's own mapping does: the integers (display width
// and ZEROFILL dropped), YEAR, DECIMAL, ENUM and SET with their members.
// ok is false for every other type, which maps by kind (declType): CHAR
// and VARCHAR as VARCHAR of their length (CHAR would strip trailing
// spaces a value may carry), TIME as its interval text, TIMESTAMP as
// DATETIME(6), the text and blob types as LONGTEXT and LONGBLOB, BIT as
// bytes (docs/cross-engine-types.md).
func nativeDecl(k value.Kind, native string) (string, bool) {
	n := strings.ToLower(strings.TrimSpace(native))
	switch k.Name {
	case value.Int:
		if n == "year" || strings.HasPrefix(n, "year(") {
			return "YEAR", k.Width == 16 && !k.Unsigned
		}
		m := nativeInt.FindStringSubmatch(n)
		if m == nil || intWidths[m[1]] != value.IntBits(k) {
			return "", false
		}
		unsigned := strings.Contains(m[2], "unsigned") || strings.Contains(m[2], "zerofill")
		if unsigned != k.Unsigned {
			return "", false
		}
		d := strings.ToUpper(m[1])
		if unsigned {
			d += " UNSIGNED"
		}
		return d, true
	case value.Decimal:
		if k.Precision < 1 || k.Precision > maxDecimalPrecision || k.Scale < 0 || k.Scale > maxDecimalScale || k.Special {
			return "", false
		}
		return "DECIMAL(" + strconv.Itoa(k.Precision) + "," + strconv.Itoa(k.Scale) + ")", true
	case value.Text:
		if strings.HasPrefix(n, "set") && nativeMembers.MatchString(native) {
			return membersDecl("set", native)
		}
	case value.Enum:
		if strings.HasPrefix(n, "enum") && nativeMembers.MatchString(strings.TrimSpace(native)) {
			return membersDecl("enum", native)
		}
	}
	return "", false
}

// membersDecl renders an ENUM or SET type again from the members of its
// recorded text (ddlcheck.MySQLMembers), never from the text itself: each
// member a string literal with its quotes doubled, which reads the same
// whether or not the session has NO_BACKSLASH_ESCAPES. ok is false (the
// column maps by its kind instead) when the text does not read as members
// or a member holds a backslash, which the two modes read differently.
func membersDecl(kind, native string) (string, bool) {
	members, err := ddlcheck.MySQLMembers(native)
	if err != nil {
		return "", false
	}
	quoted := make([]string, len(members))
	for i, m := range members {
		if strings.ContainsRune(m, '\\') {
			return "", false
		}
		quoted[i] = "'" + strings.ReplaceAll(m, "'", "''") + "'"
	}
	return kind + "(" + strings.Join(quoted, ",") + ")", true
}

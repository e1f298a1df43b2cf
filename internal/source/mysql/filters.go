package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/filter"
	"github.com/sluicehq/sluice/internal/value"
)

// readShapedSchema reads every base table of database and shapes it
// through f (which must not be nil): the schema the chain records (the
// tables f leaves out, and their excluded columns, gone), each recorded
// table's shape by qualified name, and the facts of every table of the
// source (all its columns). f's refusals come back unchanged. Columns a
// chain cannot carry are refused only where they cross: an excluded table
// or column of an unsupported type is no obstacle.
func readShapedSchema(ctx context.Context, q querier, database string, f *filter.Filter, enc filter.FixedEncoder) (*chain.Schema, map[string]*filter.Shape, map[string]*tableFacts, error) {
	facts, err := readTables(ctx, q, database, "")
	if err != nil {
		return nil, nil, nil, err
	}
	s := &chain.Schema{Schemas: []string{database}}
	for _, name := range sortedNames(facts) {
		s.Tables = append(s.Tables, facts[name].table)
	}
	shaped, shapes, err := f.ShapeSchema(s, enc)
	if err != nil {
		return nil, nil, nil, err
	}
	var problems []string
	for i := range shaped.Tables {
		t := &shaped.Tables[i]
		problems = append(problems, unsupportedKept(facts[t.Name], shapes[t.QualifiedName()].Keep)...)
	}
	if len(problems) > 0 {
		return nil, nil, nil, errcode.New(errcode.SourceSchemaUnsupported, "the source has columns a chain cannot carry: %s", strings.Join(problems, "; "))
	}
	return shaped, shapes, facts, nil
}

// unsupportedKept lists the columns of a table the chain cannot carry,
// among those at the indexes keep (the columns that cross).
func unsupportedKept(tf *tableFacts, keep []int) []string {
	var out []string
	for _, i := range keep {
		out = append(out, unsupportedColumn(tf, i)...)
	}
	return out
}

// keptCodecs are the codecs of the columns a shape keeps, in its order
// (all of them for a nil shape).
func keptCodecs(all []codec, sh *filter.Shape) []codec {
	if sh == nil {
		return all
	}
	out := make([]codec, len(sh.Keep))
	for i, from := range sh.Keep {
		out[i] = all[from]
	}
	return out
}

// maskedColumns lists the recorded columns a shape masks (none for nil).
func maskedColumns(sh *filter.Shape) []int {
	if !sh.HasMasks() {
		return nil
	}
	var out []int
	for i := range sh.Table.Columns {
		if sh.Masked(i) {
			out = append(out, i)
		}
	}
	return out
}

// connector is what the fixed-value encoder needs of a pool: one
// connection for a cast and the warnings it raised.
type connector interface {
	Conn(ctx context.Context) (*sql.Conn, error)
}

// fixedValues encodes the fixed:VALUE masks of a MySQL-family source and
// remembers what it encoded, so a capture re-shaping a table asks the
// server once.
type fixedValues struct {
	db    connector
	mu    sync.Mutex
	cache map[[2]string]string
}

func newFixedValues(db connector) *fixedValues {
	return &fixedValues{db: db, cache: map[[2]string]string{}}
}

// encoder is the filter.FixedEncoder of a MySQL-family source, asking the
// server under ctx: it checks a fixed:VALUE mask's value against the
// column's type and returns the text the chain carries for it (the
// PostgreSQL text form of the column's kind, exactly as a full encodes a
// value the server returns). Numbers, dates, times and MariaDB's uuid and
// inet types are cast by the server, through CAST(? AS <type>) with the
// type re-rendered from the recorded kind (never the recorded text), and
// refused when the server warns (it truncates or zeroes what does not fit
// rather than failing) or gives NULL; integers are also checked against
// their column's width, and decimals must come back exactly (the server
// rounds extra fraction digits silently). Text, enum, set, JSON and byte
// columns are checked here (labels, members, JSON syntax, lengths). BIT
// and spatial columns are refused.
func (fv *fixedValues) encoder(ctx context.Context) filter.FixedEncoder {
	return func(col chain.Column, text string) (string, []byte, error) {
		key := [2]string{col.Type + "\x00" + col.NeutralKind().String(), text}
		fv.mu.Lock()
		got, ok := fv.cache[key]
		fv.mu.Unlock()
		if ok {
			return got, nil, nil
		}
		out, err := encodeFixed(ctx, fv.db, col, text)
		if err != nil {
			return "", nil, err
		}
		fv.mu.Lock()
		fv.cache[key] = out
		fv.mu.Unlock()
		return out, nil, nil
	}
}

// fixedEncoder is a one-off fixedValues' encoder.
func fixedEncoder(ctx context.Context, db connector) filter.FixedEncoder {
	return newFixedValues(db).encoder(ctx)
}

var fracDigits = regexp.MustCompile(`^[a-z]+\(([0-6])\)`)

// fsp is the fractional-seconds precision a datetime, timestamp or time
// type declares (0 when none).
func fsp(colType string) int {
	if m := fracDigits.FindStringSubmatch(strings.ToLower(colType)); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// textBytes is the byte capacity of the text and blob types without a
// declared length.
var textBytes = map[string]int{
	"tinytext": 255, "text": 65535, "mediumtext": 1<<24 - 1,
	"tinyblob": 255, "blob": 65535, "mediumblob": 1<<24 - 1,
}

var declaredLength = regexp.MustCompile(`^[a-z]+\((\d+)\)`)

// encodeFixed checks and encodes one fixed value for column col.
func encodeFixed(ctx context.Context, db connector, col chain.Column, text string) (string, error) {
	dt := dataTypeOf(col.Type)
	k := col.NeutralKind()
	cd := codec{kind: k, dataType: dt, where: col.Name}
	switch dt {
	case "binary":
		cd.bytes = fixedWidth(strings.ToLower(col.Type))
	case "set":
		cd.labels = enumLabels(col.Type)
	}
	var target string
	switch k.Name {
	case value.Int:
		target = "SIGNED"
		if k.Unsigned {
			target = "UNSIGNED"
		}
	case value.Decimal:
		if k.Precision < 1 || k.Precision > 65 || k.Scale < 0 || k.Scale > 38 || k.Scale > k.Precision {
			return "", fmt.Errorf("decimal(%d,%d) is not a decimal type the server has", k.Precision, k.Scale)
		}
		target = fmt.Sprintf("DECIMAL(%d,%d)", k.Precision, k.Scale)
	case value.Float:
		target = "DOUBLE"
		if k.Width == 32 {
			target = "FLOAT"
		}
	case value.Date:
		target = "DATE"
	case value.Timestamp, value.TimestampTZ:
		target = fmt.Sprintf("DATETIME(%d)", fsp(col.Type))
	case value.Interval:
		target = fmt.Sprintf("TIME(%d)", fsp(col.Type))
	case value.UUID:
		target = "UUID"
	case value.Text:
		switch dt {
		case "inet4":
			target = "INET4"
		case "inet6":
			target = "INET6"
		case "set":
			return fixedSet(cd.labels, text)
		default:
			return fixedText(dt, col.Type, text)
		}
	case value.Enum:
		for _, l := range k.Labels {
			if strings.EqualFold(l, text) {
				return l, nil
			}
		}
		return "", fmt.Errorf("%q is not one of the enum's labels %q", text, k.Labels)
	case value.JSON:
		if !json.Valid([]byte(text)) {
			return "", fmt.Errorf("%q is not JSON", text)
		}
		return text, nil
	case value.Bytes:
		if !slices.Contains([]string{"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}, dt) {
			return "", fmt.Errorf("fixed values of %s columns are not supported; use null, or exclude the column", dt)
		}
		if err := checkBytes(dt, col.Type, len(text)); err != nil {
			return "", err
		}
		out, err := cd.fromText([]byte(text))
		return string(out), err
	default:
		return "", fmt.Errorf("fixed values of %s columns are not supported", k.Name)
	}
	v, err := castOnServer(ctx, db, target, text)
	if err != nil {
		return "", err
	}
	if k.Name == value.Int && dt == "year" {
		if n, ok := v.(int64); !ok || n != 0 && (n < 1901 || n > 2155) {
			return "", fmt.Errorf("%q is not a year (1901 to 2155, or 0)", text)
		}
	}
	if k.Name == value.Decimal {
		// The server rounds extra fraction digits without a warning.
		if err := checkExact(v, text); err != nil {
			return "", err
		}
	}
	if k.Name == value.TimestampTZ {
		if err := checkTimestampRange(v, text); err != nil {
			return "", err
		}
	}
	out, err := cd.fromSQL(v)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// castOnServer asks the server to cast text to target (a type rendered by
// encodeFixed, never recorded text) and returns what it gave, refusing a
// NULL and a cast that raised warnings. The cast reads a derived table so
// that it clears the session's earlier warnings (a statement without a
// table leaves them in place).
func castOnServer(ctx context.Context, db connector, target, text string) (any, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, classify(err, "connect to the source")
	}
	defer conn.Close()
	var v any
	if err := conn.QueryRowContext(ctx, "SELECT CAST(? AS "+target+") FROM (SELECT 1) AS one", text).Scan(&v); err != nil {
		return nil, classify(err, "cast the value on the source")
	}
	rows, err := conn.QueryContext(ctx, "SHOW WARNINGS")
	if err != nil {
		return nil, classify(err, "read the cast's warnings")
	}
	defer rows.Close()
	var warnings []string
	for rows.Next() {
		var level, msg string
		var code int
		if err := rows.Scan(&level, &code, &msg); err != nil {
			return nil, classify(err, "read the cast's warnings")
		}
		warnings = append(warnings, msg)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err, "read the cast's warnings")
	}
	if len(warnings) > 0 {
		return nil, fmt.Errorf("the source's CAST(%q AS %s) warns: %s", text, target, strings.Join(warnings, "; "))
	}
	if v == nil {
		return nil, fmt.Errorf("the source's CAST(%q AS %s) is NULL", text, target)
	}
	return v, nil
}

// checkExact refuses a decimal value the cast did not keep exactly.
func checkExact(v any, text string) error {
	in, ok := new(big.Rat).SetString(text)
	if !ok {
		return fmt.Errorf("%q is not a decimal number", text)
	}
	var s string
	switch x := v.(type) {
	case []byte:
		s = string(x)
	case string:
		s = x
	default:
		return fmt.Errorf("the source's cast of %q gave a %T", text, v)
	}
	out, ok := new(big.Rat).SetString(s)
	if !ok || in.Cmp(out) != 0 {
		return fmt.Errorf("%q would be stored as %s", text, s)
	}
	return nil
}

// checkTimestampRange refuses a value a TIMESTAMP column cannot hold
// (1970-01-01 00:00:01 to 2038-01-19 03:14:07 UTC).
func checkTimestampRange(v any, text string) error {
	var s string
	switch x := v.(type) {
	case []byte:
		s = string(x)
	case string:
		s = x
	default:
		return nil
	}
	if s < "1970-01-01 00:00:01" || s > "2038-01-19 03:14:07.999999" {
		return fmt.Errorf("%q is outside what a TIMESTAMP holds (1970-01-01 00:00:01 to 2038-01-19 03:14:07 UTC)", text)
	}
	return nil
}

// fixedText checks a value for a character column: its length in
// characters (declared lengths are checked by the filter too) or, for the
// text types, in bytes.
func fixedText(dt, colType, text string) (string, error) {
	if !utf8.ValidString(text) {
		return "", errors.New("the value is not UTF-8")
	}
	if m := declaredLength.FindStringSubmatch(strings.ToLower(colType)); m != nil {
		n, _ := strconv.Atoi(m[1])
		if utf8.RuneCountInString(text) > n {
			return "", fmt.Errorf("the value is longer than the column's %d characters", n)
		}
	}
	if n, ok := textBytes[dt]; ok && len(text) > n {
		return "", fmt.Errorf("the value is %d bytes, and a %s holds at most %d", len(text), dt, n)
	}
	return text, nil
}

// fixedSet checks a set value's members and gives them in the set's
// order, each once, as the server stores them.
func fixedSet(labels []string, text string) (string, error) {
	if text == "" {
		return "", nil
	}
	have := map[string]bool{}
	for _, m := range strings.Split(text, ",") {
		found := false
		for _, l := range labels {
			if strings.EqualFold(l, m) {
				have[l], found = true, true
			}
		}
		if !found {
			return "", fmt.Errorf("%q is not a member of the set %q", m, labels)
		}
	}
	var out []string
	for _, l := range labels {
		if have[l] {
			out = append(out, l)
		}
	}
	return strings.Join(out, ","), nil
}

// checkBytes refuses a value longer than a byte column holds.
func checkBytes(dt, colType string, n int) error {
	if m := declaredLength.FindStringSubmatch(strings.ToLower(colType)); m != nil {
		limit, _ := strconv.Atoi(m[1])
		if n > limit {
			return fmt.Errorf("the value is %d bytes, and the column holds at most %d", n, limit)
		}
	}
	if limit, ok := textBytes[dt]; ok && n > limit {
		return fmt.Errorf("the value is %d bytes, and a %s holds at most %d", n, dt, limit)
	}
	return nil
}

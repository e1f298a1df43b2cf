package mysql

import (
	"context"
	"fmt"
	"slices"
	"strings"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/filter"
	"github.com/sluicehq/sluice/internal/value"
)

// tracked is a table as the capture decodes it: its definition as the
// binlog logs it (every column), its columns' codecs and how it crosses.
// stale is set by a schema change statement in the binlog, so the next
// table map re-reads the definition.
type tracked struct {
	// tf is nil for a table of the recorded schema a filtered capture has
	// not met yet: its first table map reads it.
	tf     *tableFacts
	codecs []codec
	// recorded is the table as the chain records it: tf's table, or its
	// shape's.
	recorded *chain.Table
	// shape projects and masks the table's row images; nil when they
	// cross as they are.
	shape *filter.Shape
	// excluded is set for a table the filter leaves out: its rows are
	// skipped.
	excluded bool
	stale    bool
	// name is the table's name in the table maps that point to it: a
	// table ID means that table only while a map of that name says so.
	name string
}

// newTracked tracks tf, crossing through sh (nil: as it is).
func newTracked(tf *tableFacts, sh *filter.Shape) *tracked {
	tr := &tracked{tf: tf, codecs: codecsOf(tf), recorded: &tf.table, name: tf.table.Name}
	if sh != nil {
		tr.recorded = sh.Table
		if !sh.Trivial() {
			tr.shape = sh
		}
	}
	return tr
}

// tracker follows the schema of the captured database through the binlog.
// Rows are always decoded by the table map logged with them (binlog row
// metadata FULL gives column names, signedness and enum and set members),
// checked against the recorded definition: when they differ, the
// definition is read again from information_schema, or, when the server
// has moved on past a later change already, built from the table map.
// With a filter, a table it leaves out is never read nor recorded, and an
// included one is shaped before it is compared with the recorded one.
type tracker struct {
	database string
	q        querier
	filter   *filter.Filter
	fixed    *fixedValues
	tables   map[string]*tracked
	byID     map[uint64]*tracked
	changed  bool
	// objects are the schema objects as last recorded (objects.go);
	// objectsChanged is set when a statement changed them, until a
	// window that commits carries them.
	objects        []chain.Object
	objectsChanged bool
}

// newTracker tracks the tables of s, the recorded schema (already shaped
// by f when f is not nil); fixed encodes f's fixed values.
func newTracker(q querier, database string, s *chain.Schema, f *filter.Filter, fixed *fixedValues) *tracker {
	t := &tracker{database: database, q: q, filter: f, fixed: fixed, tables: map[string]*tracked{}, byID: map[uint64]*tracked{}, objects: s.Objects}
	for i := range s.Tables {
		tb := s.Tables[i]
		if f != nil {
			// What the source logs of the table (its excluded columns
			// too) is learnt from its first table map.
			t.tables[tb.Name] = &tracked{recorded: &tb, name: tb.Name}
			continue
		}
		tf := &tableFacts{table: tb, cols: make([]columnFacts, len(tb.Columns))}
		for j, c := range tb.Columns {
			tf.cols[j] = columnFacts{dataType: dataTypeOf(c.Type)}
		}
		t.tables[tb.Name] = newTracked(tf, nil)
	}
	return t
}

// dataTypeOf reads DATA_TYPE back from a recorded COLUMN_TYPE.
func dataTypeOf(colType string) string {
	dt := strings.ToLower(colType)
	if i := strings.IndexAny(dt, "( "); i >= 0 {
		dt = dt[:i]
	}
	return dt
}

// schemaChanged marks every table stale after a schema change statement.
func (t *tracker) schemaChanged() {
	for _, tr := range t.tables {
		tr.stale = true
	}
	clear(t.byID)
}

// newLog forgets which table each table ID names, at the start of a
// binlog file: a server numbers its tables anew each time it starts, so
// the IDs of the file before (a server that crashed and came back, say)
// may name other tables now.
func (t *tracker) newLog() {
	clear(t.byID)
}

// resolve returns the table a table map names, and its new recorded
// definition when it differs from the recorded one (a schema change record
// to emit). A table the filter leaves out comes back excluded, never with
// a definition. A table ID is taken as known only while the map names the
// same table: the server may give a table's ID to another table once the
// first leaves its table cache, and does after a restart.
func (t *tracker) resolve(ctx context.Context, ev *replication.TableMapEvent) (*tracked, *chain.Table, error) {
	name := string(ev.Table)
	if tr := t.byID[ev.TableID]; tr != nil && !tr.stale && tr.name == name {
		return tr, nil, nil
	}
	if !t.filter.Includes(t.database, name) {
		tr := &tracked{excluded: true, name: name}
		t.byID[ev.TableID] = tr
		return tr, nil, nil
	}
	names := ev.ColumnNameString()
	if len(names) != int(ev.ColumnCount) {
		return nil, nil, &errcode.Error{Code: errcode.SourceLogConfig,
			Message: fmt.Sprintf("the binlog's table map of %s.%s carries no column names: the source runs with binlog_row_metadata below FULL", t.database, name),
			Hint:    settingHint(setting{name: "binlog_row_metadata", want: "FULL"}, server{mariadb: true})}
	}
	old := t.tables[name]
	if old != nil && !old.stale && old.tf != nil && matches(old.tf, ev) {
		t.byID[ev.TableID] = old
		return old, nil, nil
	}
	fresh, err := readTables(ctx, t.q, t.database, name)
	if err != nil {
		return nil, nil, err
	}
	tf := fresh[name]
	if tf == nil || !matches(tf, ev) {
		tf = tableFromMap(t.database, ev)
	}
	var sh *filter.Shape
	problems := unsupported(tf)
	if t.filter != nil {
		// Shaped before it is compared: an excluded column is never a
		// schema change, nor part of one.
		if sh, err = t.filter.Shape(&tf.table, t.fixed.encoder(ctx)); err != nil {
			return nil, nil, err
		}
		problems = unsupportedKept(tf, sh.Keep)
	}
	if len(problems) > 0 {
		return nil, nil, errcode.New(errcode.SourceSchemaUnsupported, "a table the capture met has columns a chain cannot carry: %s", strings.Join(problems, "; "))
	}
	tr := newTracked(tf, sh)
	t.tables[name] = tr
	t.byID[ev.TableID] = tr
	if old != nil && sameDefinition(old.recorded, tr.recorded) {
		return tr, nil, nil
	}
	t.changed = true
	def := *tr.recorded
	return tr, &def, nil
}

// schema is the whole recorded schema as the capture now knows it.
func (t *tracker) schema() *chain.Schema {
	s := &chain.Schema{Schemas: []string{t.database}, Objects: t.objects}
	names := make([]string, 0, len(t.tables))
	for n := range t.tables {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		s.Tables = append(s.Tables, *t.tables[n].recorded)
	}
	return s
}

// sameDefinition reports whether two definitions of a table record the same
// columns, kinds and keys.
func sameDefinition(a, b *chain.Table) bool {
	if len(a.Columns) != len(b.Columns) || !slices.Equal(a.PrimaryKey, b.PrimaryKey) || len(a.Indexes) != len(b.Indexes) {
		return false
	}
	for i := range a.Columns {
		ca, cb := a.Columns[i], b.Columns[i]
		if ca.Name != cb.Name || ca.Type != cb.Type || ca.NotNull != cb.NotNull || !sameKind(ca.Kind, cb.Kind) {
			return false
		}
	}
	for i := range a.Indexes {
		if a.Indexes[i].Name != b.Indexes[i].Name || a.Indexes[i].Unique != b.Indexes[i].Unique || !slices.Equal(a.Indexes[i].Columns, b.Indexes[i].Columns) {
			return false
		}
	}
	return true
}

func sameKind(a, b *value.Kind) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Name == b.Name && a.Width == b.Width && a.Unsigned == b.Unsigned && a.Precision == b.Precision &&
		a.Scale == b.Scale && slices.Equal(a.Labels, b.Labels)
}

// binlogTypes are the binlog column types a DATA_TYPE is logged as.
func binlogTypes(dataType string) []byte {
	switch dataType {
	case "tinyint":
		return []byte{gomysql.MYSQL_TYPE_TINY}
	case "smallint":
		return []byte{gomysql.MYSQL_TYPE_SHORT}
	case "mediumint":
		return []byte{gomysql.MYSQL_TYPE_INT24}
	case "int", "integer":
		return []byte{gomysql.MYSQL_TYPE_LONG}
	case "bigint":
		return []byte{gomysql.MYSQL_TYPE_LONGLONG}
	case "year":
		return []byte{gomysql.MYSQL_TYPE_YEAR}
	case "decimal", "numeric":
		return []byte{gomysql.MYSQL_TYPE_NEWDECIMAL}
	case "float":
		return []byte{gomysql.MYSQL_TYPE_FLOAT}
	case "double", "real":
		return []byte{gomysql.MYSQL_TYPE_DOUBLE}
	case "bit":
		return []byte{gomysql.MYSQL_TYPE_BIT}
	case "char", "binary", "enum", "set", "uuid", "inet4", "inet6":
		return []byte{gomysql.MYSQL_TYPE_STRING}
	case "varchar", "varbinary":
		return []byte{gomysql.MYSQL_TYPE_VARCHAR, gomysql.MYSQL_TYPE_VAR_STRING}
	case "tinytext", "text", "mediumtext", "longtext", "tinyblob", "blob", "mediumblob", "longblob":
		return []byte{gomysql.MYSQL_TYPE_BLOB}
	case "json":
		return []byte{gomysql.MYSQL_TYPE_JSON, gomysql.MYSQL_TYPE_BLOB}
	case "date":
		return []byte{gomysql.MYSQL_TYPE_DATE, gomysql.MYSQL_TYPE_NEWDATE}
	case "datetime":
		return []byte{gomysql.MYSQL_TYPE_DATETIME2, gomysql.MYSQL_TYPE_DATETIME}
	case "timestamp":
		return []byte{gomysql.MYSQL_TYPE_TIMESTAMP2, gomysql.MYSQL_TYPE_TIMESTAMP}
	case "time":
		return []byte{gomysql.MYSQL_TYPE_TIME2, gomysql.MYSQL_TYPE_TIME}
	case "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection", "geomcollection":
		return []byte{gomysql.MYSQL_TYPE_GEOMETRY}
	}
	return nil
}

// matches reports whether a table map logs the columns of tf: the same
// names in the same order, each of a binlog type its DATA_TYPE is logged
// as, with the same signedness. An enum or set whose recorded labels show
// a '?' where the map's exact labels differ does not match, so a chain
// that recorded the catalog's '?' for a four-byte character (sluice did,
// before it read labels exactly) is given the exact labels again.
func matches(tf *tableFacts, ev *replication.TableMapEvent) bool {
	names := ev.ColumnNameString()
	if len(names) != len(tf.table.Columns) {
		return false
	}
	unsigned := ev.UnsignedMap()
	enums, sets := ev.EnumStrValueMap(), ev.SetStrValueMap()
	for i, c := range tf.table.Columns {
		if logged := labelsIn(enums, sets, i); logged != nil {
			recorded := enumLabels(c.Type)
			if slices.ContainsFunc(recorded, func(l string) bool { return strings.Contains(l, "?") }) && !slices.Equal(recorded, logged) {
				return false
			}
		}
		if names[i] != c.Name || !slices.Contains(binlogTypes(tf.cols[i].dataType), ev.ColumnType[i]) {
			return false
		}
		if ev.IsEnumColumn(i) != (tf.cols[i].dataType == "enum") || ev.IsSetColumn(i) != (tf.cols[i].dataType == "set") {
			return false
		}
		// YEAR is logged as unsigned; the chain records it as a plain int.
		if u, ok := unsigned[i]; ok && tf.cols[i].dataType != "year" && u != (c.Kind != nil && c.Kind.Unsigned) {
			return false
		}
	}
	return true
}

// labelsIn are the labels a table map logs for column i, if it is an enum
// or a set.
func labelsIn(enums, sets map[int][]string, i int) []string {
	if l, ok := enums[i]; ok {
		return l
	}
	return sets[i]
}

// tableFromMap builds a table's definition from its table map alone, for
// rows logged before a schema change the server has already moved past:
// the map tells every column's name, binlog type, signedness, nullability,
// enum and set members and the primary key, though not MariaDB's own
// types (uuid, inet6 and JSON are recorded as the bytes and text they are
// logged as) nor the other indexes. The next table map after that later
// change records the definition information_schema gives.
func tableFromMap(database string, ev *replication.TableMapEvent) *tableFacts {
	tf := &tableFacts{table: chain.Table{Schema: database, Name: string(ev.Table), Dialect: chain.DialectMySQL}}
	names := ev.ColumnNameString()
	unsigned := ev.UnsignedMap()
	enums, sets := ev.EnumStrValueMap(), ev.SetStrValueMap()
	collations := ev.CollationMap()
	for i, name := range names {
		dt, ct := mapType(ev, i, collations)
		switch {
		case enums[i] != nil:
			dt, ct = "enum", "enum("+quotedLabels(enums[i])+")"
		case sets[i] != nil:
			dt, ct = "set", "set("+quotedLabels(sets[i])+")"
		}
		if unsigned[i] && dt != "year" {
			ct += " unsigned"
		}
		prec, scale := 0, 0
		if dt == "decimal" {
			prec, scale = int(ev.ColumnMeta[i]>>8), int(ev.ColumnMeta[i]&0xff)
		}
		k := kindOf(dt, ct, prec, scale)
		_, nullable := ev.Nullable(i)
		tf.table.Columns = append(tf.table.Columns, chain.Column{Name: name, Type: ct, NotNull: !nullable, Encoding: chain.EncodingText, Kind: &k})
		tf.cols = append(tf.cols, columnFacts{dataType: dt})
	}
	for _, p := range ev.PrimaryKey {
		if int(p) < len(names) {
			tf.table.PrimaryKey = append(tf.table.PrimaryKey, names[p])
		}
	}
	if len(tf.table.PrimaryKey) > 0 {
		tf.table.PrimaryKeyName = "PRIMARY"
	}
	return tf
}

// quotedLabels lists labels as a COLUMN_TYPE does: each quoted, a quote
// doubled and a backslash escaped.
func quotedLabels(labels []string) string {
	q := make([]string, len(labels))
	for i, l := range labels {
		q[i] = "'" + strings.NewReplacer(`\`, `\\`, "'", "''").Replace(l) + "'"
	}
	return strings.Join(q, ",")
}

// binaryCollation is the collation ID of the binary character set.
const binaryCollation = 63

// mapType is a column's DATA_TYPE and a COLUMN_TYPE for it, from its
// binlog type and metadata.
func mapType(ev *replication.TableMapEvent, i int, collations map[int]uint64) (string, string) {
	meta := ev.ColumnMeta[i]
	binary := collations[i] == binaryCollation
	switch ev.ColumnType[i] {
	case gomysql.MYSQL_TYPE_TINY:
		return "tinyint", "tinyint"
	case gomysql.MYSQL_TYPE_SHORT:
		return "smallint", "smallint"
	case gomysql.MYSQL_TYPE_INT24:
		return "mediumint", "mediumint"
	case gomysql.MYSQL_TYPE_LONG:
		return "int", "int"
	case gomysql.MYSQL_TYPE_LONGLONG:
		return "bigint", "bigint"
	case gomysql.MYSQL_TYPE_YEAR:
		return "year", "year"
	case gomysql.MYSQL_TYPE_NEWDECIMAL:
		return "decimal", fmt.Sprintf("decimal(%d,%d)", meta>>8, meta&0xff)
	case gomysql.MYSQL_TYPE_FLOAT:
		return "float", "float"
	case gomysql.MYSQL_TYPE_DOUBLE:
		return "double", "double"
	case gomysql.MYSQL_TYPE_BIT:
		return "bit", fmt.Sprintf("bit(%d)", (meta>>8)*8+meta&0xff)
	case gomysql.MYSQL_TYPE_STRING:
		if binary {
			return "binary", "binary"
		}
		return "char", "char"
	case gomysql.MYSQL_TYPE_VARCHAR, gomysql.MYSQL_TYPE_VAR_STRING:
		if binary {
			return "varbinary", fmt.Sprintf("varbinary(%d)", meta)
		}
		return "varchar", "varchar"
	case gomysql.MYSQL_TYPE_BLOB:
		if binary {
			return "longblob", "longblob"
		}
		return "longtext", "longtext"
	case gomysql.MYSQL_TYPE_JSON:
		return "json", "json"
	case gomysql.MYSQL_TYPE_DATE, gomysql.MYSQL_TYPE_NEWDATE:
		return "date", "date"
	case gomysql.MYSQL_TYPE_DATETIME, gomysql.MYSQL_TYPE_DATETIME2:
		return "datetime", fmt.Sprintf("datetime(%d)", meta)
	case gomysql.MYSQL_TYPE_TIMESTAMP, gomysql.MYSQL_TYPE_TIMESTAMP2:
		return "timestamp", fmt.Sprintf("timestamp(%d)", meta)
	case gomysql.MYSQL_TYPE_TIME, gomysql.MYSQL_TYPE_TIME2:
		return "time", fmt.Sprintf("time(%d)", meta)
	case gomysql.MYSQL_TYPE_GEOMETRY:
		return "geometry", "geometry"
	}
	return "unknown", fmt.Sprintf("binlog type %d", ev.ColumnType[i])
}

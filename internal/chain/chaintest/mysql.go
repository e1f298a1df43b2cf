package chaintest

import (
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/value"
)

// This file builds chains as a MySQL-family source records them: tables
// of dialect mysql whose columns carry MySQL's COLUMN_TYPE text and a
// neutral kind, every value in the text form value.EncodePGText writes,
// and transactions named by a GTID.

// MySQLColumn is a column of a table recorded from a MySQL-family source:
// its native type text, its kind, text encoding, no OID.
func MySQLColumn(name, native string, k value.Kind) chain.Column {
	return chain.Column{Name: name, Type: native, Encoding: chain.EncodingText, Kind: &k}
}

// GTIDTxn frames row changes as one source transaction of a MySQL-family
// source, identified by its GTID ("0-1-57", or "uuid:n"), numbering their
// ordinals from 0; XID and commit LSN stay 0.
func GTIDTxn(gtid string, changes ...chain.Change) []chain.Change {
	out := []chain.Change{{Op: chain.OpBegin, Tx: gtid, Identified: true, CommitTime: 1}}
	for i, c := range changes {
		c.Tx, c.XID, c.CommitLSN, c.Ordinal, c.Identified = gtid, 0, 0, uint32(i), true
		out = append(out, c)
	}
	return append(out, chain.Change{Op: chain.OpCommit, Tx: gtid, Identified: true, CommitTime: 1})
}

// The int kinds of MySQL's integer types.
var (
	KindTinyint    = value.Kind{Name: value.Int, Width: 8}
	KindUTinyint   = value.Kind{Name: value.Int, Width: 8, Unsigned: true}
	KindSmallint   = value.Kind{Name: value.Int, Width: 16}
	KindUSmallint  = value.Kind{Name: value.Int, Width: 16, Unsigned: true}
	KindMediumint  = value.Kind{Name: value.Int, Width: 24}
	KindUMediumint = value.Kind{Name: value.Int, Width: 24, Unsigned: true}
	KindInt        = value.Kind{Name: value.Int, Width: 32}
	KindUInt       = value.Kind{Name: value.Int, Width: 32, Unsigned: true}
	KindBigint     = value.Kind{Name: value.Int, Width: 64}
	KindUBigint    = value.Kind{Name: value.Int, Width: 64, Unsigned: true}
)

// MySQLKindsTable is shop.kinds, a table of dialect mysql with one column
// of every kind a MySQL-family source records, keyed by id, with a unique
// index on (c) and a plain one on (e, yr) and a prefix index (an
// expression to the chain).
func MySQLKindsTable() chain.Table {
	id := MySQLColumn("id", "int(10) unsigned", KindUInt)
	id.NotNull = true
	k := func(n value.Name) value.Kind { return value.Kind{Name: n} }
	return chain.Table{Schema: "shop", Name: "kinds", Dialect: chain.DialectMySQL, PrimaryKey: []string{"id"}, PrimaryKeyName: "PRIMARY",
		Columns: []chain.Column{
			id,
			MySQLColumn("ti", "tinyint(4)", KindTinyint),
			MySQLColumn("tiu", "tinyint(3) unsigned", KindUTinyint),
			MySQLColumn("si", "smallint(6)", KindSmallint),
			MySQLColumn("siu", "smallint(5) unsigned", KindUSmallint),
			MySQLColumn("mi", "mediumint(9)", KindMediumint),
			MySQLColumn("miu", "mediumint(8) unsigned", KindUMediumint),
			MySQLColumn("i", "int(11)", KindInt),
			MySQLColumn("bi", "bigint(20)", KindBigint),
			MySQLColumn("biu", "bigint(20) unsigned", KindUBigint),
			MySQLColumn("flag", "tinyint(1)", KindTinyint),
			MySQLColumn("dec", "decimal(65,30)", value.Kind{Name: value.Decimal, Precision: 65, Scale: 30}),
			MySQLColumn("dec2", "decimal(12,3)", value.Kind{Name: value.Decimal, Precision: 12, Scale: 3}),
			MySQLColumn("f", "float", value.Kind{Name: value.Float, Width: 32}),
			MySQLColumn("d", "double", value.Kind{Name: value.Float, Width: 64}),
			MySQLColumn("bits", "bit(10)", k(value.Bytes)),
			MySQLColumn("c", "varchar(40)", k(value.Text)),
			MySQLColumn("ch", "char(3)", k(value.Text)),
			MySQLColumn("tx", "longtext", k(value.Text)),
			MySQLColumn("vb", "varbinary(16)", k(value.Bytes)),
			MySQLColumn("blb", "blob", k(value.Bytes)),
			MySQLColumn("e", "enum('small','medium','large')", value.Kind{Name: value.Enum, Labels: []string{"small", "medium", "large"}}),
			MySQLColumn("st", "set('a','b','c')", k(value.Text)),
			MySQLColumn("j", "longtext", k(value.JSON)),
			MySQLColumn("dt", "date", k(value.Date)),
			MySQLColumn("dtm", "datetime(6)", k(value.Timestamp)),
			MySQLColumn("ts", "timestamp(6)", k(value.TimestampTZ)),
			MySQLColumn("tm", "time(6)", k(value.Interval)),
			MySQLColumn("yr", "year(4)", KindSmallint),
			MySQLColumn("u", "uuid", k(value.UUID)),
			MySQLColumn("ip", "inet6", k(value.Text)),
			MySQLColumn("g", "point", k(value.Bytes)),
		},
		Indexes: []chain.Index{
			{Name: "c", Columns: []string{"c"}, Unique: true, Definition: "UNIQUE KEY `c` (`c`)"},
			{Name: "e_yr", Columns: []string{"e", "yr"}, Definition: "KEY `e_yr` (`e`,`yr`)"},
			{Name: "tx_prefix", Columns: []string{"tx"}, Expression: true, Definition: "KEY `tx_prefix` (`tx`(10))"},
		},
	}
}

// MySQLKindsRows are rows of MySQLKindsTable in the text form a
// MySQL-family source records (value.EncodePGText's); "\x00" is NULL.
// Every target holds all of them: the unsigned 64-bit maximum, which
// SQLite refuses, is MySQLUint64Max, kept apart.
var MySQLKindsRows = [][]string{
	{"1", "-128", "255", "-32768", "65535", "-8388608", "16777215", "-2147483648", "-9223372036854775808", "9223372036854775807", "1",
		"99999999999999999999999999999999999.999999999999999999999999999999", "123456789.125", "1.5", "-2.25e+100",
		`\x03ff`, `héllo, "world" \ 日本`, "abc", "a longer text", `\x00ff10`, `\xdeadbeef`, "large", "a,c", `{"a": [1, 2], "b": null}`,
		"9999-12-31", "2024-01-02 03:04:05.123456", "2038-01-19 03:14:07.999999+00", "PT-838H-59M-59S", "2155",
		"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "2001:db8::1", `\x00000000010100000000000000000000f03f0000000000000040`},
	{"2", "127", "0", "32767", "0", "8388607", "0", "2147483647", "9223372036854775807", "0", "0",
		"-0.000000000000000000000000000001", "0.000", "-3.4028235e+38", "2.2250738585072014e-308",
		`\x0000`, "", "", "", `\x`, `\x`, "small", "", "null",
		"1000-01-01", "1000-01-01 00:00:00", "1970-01-01 00:00:01+00", "PT838H59M59S", "1901",
		"00000000-0000-0000-0000-000000000000", "0.0.0.0", `\x`},
	{"3", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00",
		"\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00"},
}

// MySQLUint64Max is the largest BIGINT UNSIGNED, which a target either
// holds or refuses.
const MySQLUint64Max = "18446744073709551615"

// TextRow turns a row of text values ("\x00" for NULL) into a row chunk's
// fields (nil for NULL), for WriteFull.
func TextRow(values ...string) [][]byte {
	out := make([][]byte, len(values))
	for i, v := range values {
		if v != "\x00" {
			out[i] = []byte(v)
		}
	}
	return out
}

// WriteFullText stores text rows ("\x00" for NULL) of a table whose
// columns are all text-encoded as WriteFull does.
func WriteFullText(t testing.TB, ch *chain.Chain, tb *chain.Table, perChunk int, rows [][]string) chain.TableData {
	t.Helper()
	data := make([][][]byte, len(rows))
	for i, r := range rows {
		data[i] = TextRow(r...)
	}
	return WriteFull(t, ch, tb, perChunk, data)
}

package mysql

import (
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/value"
)

// codec turns one column's values, as the SQL driver scans them (a full)
// and as the binlog reader decodes them (an incremental), into the text a
// chain carries: the neutral value's PostgreSQL text form for the column's
// kind (value.EncodePGText), so every target decodes it by kind.
type codec struct {
	kind     value.Kind
	dataType string
	// bytes is the width of a bit(n) value, or of a binary(n) value the
	// binlog stores without its trailing zero bytes.
	bytes int
	// labels are a set's members, by bit.
	labels []string
	// where names the column in errors.
	where string
}

// codecsOf returns the codecs of a table's columns.
func codecsOf(tf *tableFacts) []codec {
	out := make([]codec, len(tf.table.Columns))
	for i, c := range tf.table.Columns {
		cd := codec{kind: *c.Kind, dataType: tf.cols[i].dataType, where: tf.table.QualifiedName() + "." + c.Name}
		switch cd.dataType {
		case "bit":
			cd.bytes = bitBytes(c.Type)
		case "binary":
			cd.bytes = fixedWidth(c.Type)
		case "set":
			cd.labels = enumLabels(c.Type)
		}
		out[i] = cd
	}
	return out
}

var fixedBinary = regexp.MustCompile(`^binary\((\d+)\)`)

func fixedWidth(colType string) int {
	m := fixedBinary.FindStringSubmatch(colType)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// zeroText is what a chain carries for MySQL's zero dates and times
// ('0000-00-00'), which no neutral value holds: the literal text, which a
// target refuses by name when it decodes the column rather than taking a
// date that was never there.
func zeroText(s string) bool { return strings.HasPrefix(s, "0000-00-00") }

// fromSQL encodes a value the SQL driver scanned (binary protocol: integers
// as int64 or uint64, FLOAT as float32, DOUBLE as float64, everything else
// as its text or bytes). nil is NULL.
func (c *codec) fromSQL(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	switch x := v.(type) {
	case int64:
		return c.fromInt(x)
	case uint64:
		return c.encode(value.Value{Uint: x})
	case float32:
		return c.encode(value.Value{Float: float64(x)})
	case float64:
		return c.encode(value.Value{Float: x})
	case []byte:
		return c.fromText(x)
	case string:
		return c.fromText([]byte(x))
	case time.Time:
		return c.encode(value.Value{Time: x})
	}
	return nil, fmt.Errorf("column %s: the driver returned a %T", c.where, v)
}

// fromInt encodes an integer of an int column (or a year).
func (c *codec) fromInt(x int64) ([]byte, error) {
	if c.kind.Name == value.Int && c.kind.Unsigned {
		if x < 0 {
			return nil, fmt.Errorf("column %s: unsigned value %d", c.where, x)
		}
		return c.encode(value.Value{Uint: uint64(x)})
	}
	if c.kind.Name == value.Bytes && c.dataType == "bit" {
		return c.bitValue(uint64(x))
	}
	return c.encode(value.Value{Int: x})
}

// fromText encodes a value the server gave as text (or bytes).
func (c *codec) fromText(b []byte) ([]byte, error) {
	switch c.kind.Name {
	case value.Int:
		if c.kind.Unsigned {
			u, err := strconv.ParseUint(string(b), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("column %s: %q is not an unsigned integer", c.where, b)
			}
			return c.encode(value.Value{Uint: u})
		}
		i, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("column %s: %q is not an integer", c.where, b)
		}
		return c.encode(value.Value{Int: i})
	case value.Decimal:
		return c.encode(value.Value{Text: string(b)})
	case value.Float:
		f, err := strconv.ParseFloat(string(b), c.kind.Width)
		if err != nil {
			return nil, fmt.Errorf("column %s: %q is not a number", c.where, b)
		}
		return c.encode(value.Value{Float: f})
	case value.Text, value.Enum, value.JSON:
		return c.encode(value.Value{Text: string(b)})
	case value.Bytes:
		return c.encode(value.Value{Bytes: c.padded(b)})
	case value.UUID:
		return c.encode(value.Value{Text: strings.ToLower(string(b))})
	case value.Date:
		if zeroText(string(b)) {
			return append([]byte(nil), b...), nil
		}
		t, err := time.Parse("2006-01-02", string(b))
		if err != nil {
			return nil, fmt.Errorf("column %s: %q is not a date", c.where, b)
		}
		return c.encode(value.Value{Time: t})
	case value.Timestamp, value.TimestampTZ:
		if zeroText(string(b)) {
			return append([]byte(nil), b...), nil
		}
		t, err := time.ParseInLocation("2006-01-02 15:04:05.999999", string(b), time.UTC)
		if err != nil {
			return nil, fmt.Errorf("column %s: %q is not a date and time", c.where, b)
		}
		return c.encode(value.Value{Time: t})
	case value.Interval:
		us, err := parseDuration(string(b))
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", c.where, err)
		}
		return c.encode(value.Value{Micros: us})
	}
	return nil, fmt.Errorf("column %s: no decoding for kind %s", c.where, c.kind.Name)
}

// fromBinlog encodes a value the binlog reader decoded from a row image
// (go-mysql's RowsEvent with ParseTime off, decimals as text and
// timestamps in UTC). nil is NULL.
func (c *codec) fromBinlog(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	switch x := v.(type) {
	case int8:
		return c.fromInt(int64(x))
	case int16:
		return c.fromInt(int64(x))
	case int32:
		return c.fromInt(int64(x))
	case int:
		return c.fromInt(int64(x))
	case int64:
		switch c.dataType {
		case "enum":
			return c.enumValue(x)
		case "set":
			return c.setValue(uint64(x))
		}
		return c.fromInt(x)
	case uint8:
		return c.encode(value.Value{Uint: uint64(x)})
	case uint16:
		return c.encode(value.Value{Uint: uint64(x)})
	case uint32:
		return c.encode(value.Value{Uint: uint64(x)})
	case uint64:
		return c.encode(value.Value{Uint: x})
	case float32:
		return c.encode(value.Value{Float: float64(x)})
	case float64:
		return c.encode(value.Value{Float: x})
	case string:
		return c.fromBinlogBytes([]byte(x))
	case []byte:
		return c.fromBinlogBytes(x)
	}
	return nil, fmt.Errorf("column %s: the binlog reader returned a %T", c.where, v)
}

// fromBinlogBytes encodes a string or byte value of a row image, where
// MariaDB's own types arrive in their stored binary forms.
func (c *codec) fromBinlogBytes(b []byte) ([]byte, error) {
	// Fixed-width binary values are logged without their trailing zero
	// bytes.
	switch c.dataType {
	case "uuid", "inet6":
		b = padTo(b, 16)
	case "inet4":
		b = padTo(b, 4)
	}
	switch c.dataType {
	case "uuid":
		if len(b) != 16 {
			return nil, fmt.Errorf("column %s: a uuid of %d bytes", c.where, len(b))
		}
		var u [16]byte
		copy(u[:], b)
		return c.encode(value.Value{Text: formatUUID(u)})
	case "inet6":
		if len(b) != 16 {
			return nil, fmt.Errorf("column %s: an inet6 of %d bytes", c.where, len(b))
		}
		return c.encode(value.Value{Text: netip.AddrFrom16([16]byte(b)).String()})
	case "inet4":
		if len(b) != 4 {
			return nil, fmt.Errorf("column %s: an inet4 of %d bytes", c.where, len(b))
		}
		return c.encode(value.Value{Text: netip.AddrFrom4([4]byte(b)).String()})
	}
	return c.fromText(b)
}

func formatUUID(u [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

func (c *codec) enumValue(i int64) ([]byte, error) {
	if i == 0 {
		return c.encode(value.Value{Text: ""}) // the error value non-strict modes store
	}
	if i < 0 || int(i) > len(c.kind.Labels) {
		return nil, fmt.Errorf("column %s: enum index %d of %d labels", c.where, i, len(c.kind.Labels))
	}
	return c.encode(value.Value{Text: c.kind.Labels[i-1]})
}

func (c *codec) setValue(bits uint64) ([]byte, error) {
	var members []string
	for i, l := range c.labels {
		if bits&(1<<uint(i)) != 0 {
			members = append(members, l)
		}
	}
	if bits>>uint(len(c.labels)) != 0 {
		return nil, fmt.Errorf("column %s: set bits %b beyond its %d members", c.where, bits, len(c.labels))
	}
	return c.encode(value.Value{Text: strings.Join(members, ",")})
}

// bitValue is a bit(n) value as its ceil(n/8) big-endian bytes.
func (c *codec) bitValue(x uint64) ([]byte, error) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], x)
	n := max(c.bytes, 1)
	return c.encode(value.Value{Bytes: b[8-n:]})
}

// padded gives a binary(n) value its trailing zero bytes back: the binlog
// stores it without them, the server returns it with them.
func (c *codec) padded(b []byte) []byte {
	if c.dataType != "binary" {
		return b
	}
	return padTo(b, c.bytes)
}

func (c *codec) encode(v value.Value) ([]byte, error) {
	out, err := value.EncodePGText(c.kind, v)
	if err != nil {
		return nil, fmt.Errorf("column %s: %w", c.where, err)
	}
	return out, nil
}

// parseDuration reads a MySQL TIME, "[-]H:MM:SS[.ffffff]" with up to three
// hour digits, as microseconds.
func parseDuration(s string) (int64, error) {
	neg := strings.HasPrefix(s, "-")
	body := strings.TrimPrefix(s, "-")
	parts := strings.Split(body, ":")
	if len(parts) != 3 {
		return 0, fmt.Errorf("%q is not a time", s)
	}
	h, err1 := strconv.ParseInt(parts[0], 10, 64)
	m, err2 := strconv.ParseInt(parts[1], 10, 64)
	secText, frac, _ := strings.Cut(parts[2], ".")
	sec, err3 := strconv.ParseInt(secText, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || m > 59 || sec > 59 || len(frac) > 6 {
		return 0, fmt.Errorf("%q is not a time", s)
	}
	var us int64
	if frac != "" {
		f, err := strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a time", s)
		}
		us = f
	}
	total := ((h*60+m)*60+sec)*1_000_000 + us
	if total > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	if neg {
		total = -total
	}
	return total, nil
}

// rowValues encodes a row image into dst (reused), one chain value per
// column; nil (NULL) values become chain NULLs.
func rowValues(dst []chain.Value, codecs []codec, row []any, fromBinlog bool) ([]chain.Value, error) {
	dst = dst[:0]
	for i := range codecs {
		var v any
		if i < len(row) {
			v = row[i]
		}
		var b []byte
		var err error
		if fromBinlog {
			b, err = codecs[i].fromBinlog(v)
		} else {
			b, err = codecs[i].fromSQL(v)
		}
		if err != nil {
			return nil, err
		}
		if b == nil && v == nil {
			dst = append(dst, chain.Value{Kind: chain.ValueNull})
			continue
		}
		if b == nil {
			b = []byte{}
		}
		dst = append(dst, chain.Value{Kind: chain.ValueText, Data: b})
	}
	return dst, nil
}

// padTo gives a fixed-width binary value its trailing zero bytes back.
func padTo(b []byte, n int) []byte {
	if len(b) >= n {
		return b
	}
	out := make([]byte, n)
	copy(out, b)
	return out
}

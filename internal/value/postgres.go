package value

import (
	"math"
	"strconv"
	"strings"
)

// PostgreSQL type OIDs of the built-in types this package knows. Built-in
// types have the same OID on every cluster.
const (
	oidBool        = 16
	oidBytea       = 17
	oidName        = 19
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidText        = 25
	oidJSON        = 114
	oidXML         = 142
	oidFloat4      = 700
	oidFloat8      = 701
	oidBpchar      = 1042
	oidVarchar     = 1043
	oidDate        = 1082
	oidTime        = 1083
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidInterval    = 1186
	oidTimetz      = 1266
	oidNumeric     = 1700
	oidUUID        = 2950
	oidJSONB       = 3802
)

// firstUserOID is the first OID PostgreSQL gives a user's object; built-in
// types have smaller OIDs.
const firstUserOID = 16384

// scalarByOID maps a built-in scalar type's OID to its kind.
var scalarByOID = map[uint32]Kind{
	oidBool:        {Name: Bool},
	oidBytea:       {Name: Bytes},
	oidName:        {Name: Text},
	oidInt8:        {Name: Int, Width: 64},
	oidInt2:        {Name: Int, Width: 16},
	oidInt4:        {Name: Int, Width: 32},
	oidText:        {Name: Text},
	oidJSON:        {Name: JSON},
	oidFloat4:      {Name: Float, Width: 32},
	oidFloat8:      {Name: Float, Width: 64},
	oidBpchar:      {Name: Text},
	oidVarchar:     {Name: Text},
	oidDate:        {Name: Date},
	oidTime:        {Name: Time},
	oidTimestamp:   {Name: Timestamp},
	oidTimestamptz: {Name: TimestampTZ},
	oidInterval:    {Name: Interval},
	oidTimetz:      {Name: Time, Zoned: true},
	oidNumeric:     {Name: Decimal, Special: true},
	oidUUID:        {Name: UUID},
	oidJSONB:       {Name: JSON},
}

// arrayElemOID maps a built-in array type's OID to its element type's OID.
var arrayElemOID = map[uint32]uint32{
	1000: oidBool,
	1001: oidBytea,
	1003: oidName,
	1005: oidInt2,
	1007: oidInt4,
	1009: oidText,
	1014: oidBpchar,
	1015: oidVarchar,
	1016: oidInt8,
	1021: oidFloat4,
	1022: oidFloat8,
	1115: oidTimestamp,
	1182: oidDate,
	1183: oidTime,
	1185: oidTimestamptz,
	1187: oidInterval,
	1231: oidNumeric,
	1270: oidTimetz,
	2951: oidUUID,
	199:  oidJSON,
	3807: oidJSONB,
}

// scalarByName maps format_type's spelling of a built-in scalar type, with
// any type modifier removed, to its kind.
var scalarByName = map[string]Kind{
	"boolean":                     {Name: Bool},
	"bytea":                       {Name: Bytes},
	"name":                        {Name: Text},
	"smallint":                    {Name: Int, Width: 16},
	"integer":                     {Name: Int, Width: 32},
	"bigint":                      {Name: Int, Width: 64},
	"text":                        {Name: Text},
	"character varying":           {Name: Text},
	"character":                   {Name: Text},
	"bpchar":                      {Name: Text},
	"json":                        {Name: JSON},
	"jsonb":                       {Name: JSON},
	"real":                        {Name: Float, Width: 32},
	"double precision":            {Name: Float, Width: 64},
	"date":                        {Name: Date},
	"time without time zone":      {Name: Time},
	"time with time zone":         {Name: Time, Zoned: true},
	"timestamp without time zone": {Name: Timestamp},
	"timestamp with time zone":    {Name: TimestampTZ},
	"interval":                    {Name: Interval},
	"numeric":                     {Name: Decimal, Special: true},
	"uuid":                        {Name: UUID},
}

// FromPostgres derives the neutral kind of a PostgreSQL column from its type
// text (format_type output, e.g. "numeric(40,20)", "public.mood[]") and type
// OID. Chains written before kinds were recorded derive them this way when
// read.
//
// A built-in OID decides the kind, the text adding the parameters only it
// holds (a numeric's precision and scale); with an OID of 0 or one this
// package does not know, the text alone decides. A schema-qualified name
// that is no built-in type (and has no built-in OID) is taken for an enum
// with its labels unknown:
// the text cannot tell an enum from a domain or a composite type, so a
// caller that knows the schema's enums fills the labels, or corrects the
// kind to Other for a type that is no enum. Every other type (inet, money,
// xml, geometric types, ranges, bit strings…) is Other.
func FromPostgres(typeText string, oid uint32) Kind {
	text := strings.TrimSpace(typeText)
	if elemOID, ok := arrayElemOID[oid]; ok {
		elem := FromPostgres(strings.TrimSuffix(text, "[]"), elemOID)
		return Kind{Name: Array, Elem: &elem}
	}
	if k, ok := scalarByOID[oid]; ok {
		if t := kindFromText(text); t.Name == k.Name && t.Zoned == k.Zoned && t.Width == k.Width {
			return t
		}
		return cloneKind(k)
	}
	k := kindFromText(text)
	if oid != 0 && oid < firstUserOID {
		// A built-in type this package does not know (an
		// information_schema domain, say): no user's enum.
		if k.Name == Enum {
			k.Name = Other
		}
		if k.Elem != nil && k.Elem.Name == Enum {
			k.Elem.Name = Other
		}
	}
	return k
}

// kindFromText derives a kind from format_type text alone.
func kindFromText(text string) Kind {
	if base, ok := strings.CutSuffix(text, "[]"); ok {
		base = strings.TrimSpace(base)
		if strings.TrimPrefix(base, "pg_catalog.") == "box" {
			return Kind{Name: Other} // box[] is delimited by ';', not ','
		}
		elem := kindFromText(base)
		return Kind{Name: Array, Elem: &elem}
	}
	text = strings.TrimPrefix(text, "pg_catalog.")
	base, mods := splitModifiers(text)
	if base == "interval" || strings.HasPrefix(base, "interval ") {
		return Kind{Name: Interval} // "interval day to second(3)"
	}
	k, ok := scalarByName[base]
	if !ok {
		if qualified(text) {
			return Kind{Name: Enum}
		}
		return Kind{Name: Other}
	}
	k = cloneKind(k)
	if k.Name == Decimal && len(mods) > 0 {
		if p, err := strconv.Atoi(strings.TrimSpace(mods[0])); err == nil && p > 0 {
			k.Precision = p
			if len(mods) > 1 {
				if s, err := strconv.Atoi(strings.TrimSpace(mods[1])); err == nil {
					k.Scale = s
				}
			}
		}
	}
	return k
}

// splitModifiers removes the parenthesised type modifier from format_type
// text ("timestamp(3) with time zone" → "timestamp with time zone") and
// returns it split at its commas. Quoted identifiers are left alone.
func splitModifiers(text string) (string, []string) {
	if strings.Contains(text, `"`) {
		return text, nil
	}
	open := strings.IndexByte(text, '(')
	if open < 0 {
		return text, nil
	}
	end := strings.IndexByte(text[open:], ')')
	if end < 0 {
		return text, nil
	}
	end += open
	base := strings.TrimSpace(text[:open]) + text[end+1:]
	return strings.TrimSpace(base), strings.Split(text[open+1:end], ",")
}

// qualified reports whether a type name is schema-qualified: a dot outside
// double quotes (`public.mood`, `"my schema"."my.type"`).
func qualified(name string) bool {
	quoted := false
	for i := 0; i < len(name); i++ {
		switch name[i] {
		case '"':
			quoted = !quoted
		case '.':
			if !quoted {
				return true
			}
		}
	}
	return false
}

// cloneKind returns a copy of k that shares no slices or pointers with it.
func cloneKind(k Kind) Kind {
	if k.Labels != nil {
		k.Labels = append([]string(nil), k.Labels...)
	}
	if k.Elem != nil {
		e := cloneKind(*k.Elem)
		k.Elem = &e
	}
	return k
}

// DecodePGText decodes a PostgreSQL text-format value of kind k, as printed
// under the session settings chain.PostgresTextSettings pins (ISO dates, UTC,
// hex bytea, shortest exact floats; intervals in the iso_8601 style, the
// postgres style read too). NULL has no text form: callers handle it apart.
func DecodePGText(k Kind, text []byte) (Value, error) {
	switch k.Name {
	case Int:
		return decodeIntText(k, text)
	case Decimal:
		return decodeDecimalText(k, text)
	case Float:
		return decodeFloatText(k, text)
	case Bool:
		return decodeBoolText(k, text)
	case Text, Enum, JSON, Other:
		return Value{Text: string(text)}, nil
	case Bytes:
		return decodeByteaText(k, text)
	case Date:
		return decodeDateText(k, text)
	case Time:
		return decodeTimeText(k, text)
	case Timestamp, TimestampTZ:
		return decodeTimestampText(k, text)
	case Interval:
		return decodeIntervalText(k, text)
	case UUID:
		return decodeUUIDText(k, text)
	case Array:
		return decodeArrayText(k, text)
	}
	return Value{}, textError(k, text, "unknown kind")
}

// EncodePGText encodes v as PostgreSQL text input for kind k: the text
// PostgreSQL itself prints for the value under chain.PostgresTextSettings,
// so that DecodePGText(k, EncodePGText(k, v)) gives v back. A NULL v is
// refused; callers send NULL apart.
func EncodePGText(k Kind, v Value) ([]byte, error) {
	if v.Null {
		return nil, valueError(k, "NULL has no text form")
	}
	switch k.Name {
	case Int:
		if !IntFits(k, v) {
			if k.Unsigned {
				return nil, valueError(k, "%d is out of range", v.Uint)
			}
			return nil, valueError(k, "%d is out of range", v.Int)
		}
		if k.Unsigned {
			return strconv.AppendUint(nil, v.Uint, 10), nil
		}
		return strconv.AppendInt(nil, v.Int, 10), nil
	case Decimal:
		return encodeDecimalText(k, v)
	case Float:
		if floatBits(k) == 32 && !math.IsNaN(v.Float) && float64(float32(v.Float)) != v.Float {
			return nil, valueError(k, "%v is not a 32-bit float", v.Float)
		}
		return []byte(formatFloat(v.Float, floatBits(k))), nil
	case Bool:
		if v.Bool {
			return []byte("t"), nil
		}
		return []byte("f"), nil
	case Text, Enum, JSON, Other:
		return []byte(v.Text), nil
	case Bytes:
		return encodeByteaText(v.Bytes), nil
	case Date:
		return encodeDateText(k, v)
	case Time:
		return encodeTimeText(k, v)
	case Timestamp, TimestampTZ:
		return encodeTimestampText(k, v)
	case Interval:
		return encodeIntervalText(v), nil
	case UUID:
		return encodeUUIDText(k, v)
	case Array:
		return encodeArrayText(k, v)
	}
	return nil, valueError(k, "unknown kind")
}

// floatBits is the width a float kind parses and prints at.
func floatBits(k Kind) int {
	if k.Width == 32 {
		return 32
	}
	return 64
}

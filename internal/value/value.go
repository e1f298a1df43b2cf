// Package value is sluice's engine-neutral value model: the kind every
// recorded column carries beside its native type text, the neutral value a
// target of another engine is written from, and the codecs between each
// source engine's encodings and it. A chain keeps its source's native
// encoding (PostgreSQL binary stays PG→PG's fast path); a target of another
// engine decodes through this package by the recorded kind.
package value

import "time"

// Name is the name of a neutral kind.
type Name string

// The neutral kinds.
const (
	Int         Name = "int"
	Decimal     Name = "decimal"
	Float       Name = "float"
	Bool        Name = "bool"
	Text        Name = "text"
	Bytes       Name = "bytes"
	Date        Name = "date"
	Time        Name = "time"
	Timestamp   Name = "timestamp"
	TimestampTZ Name = "timestamptz"
	Interval    Name = "interval"
	UUID        Name = "uuid"
	JSON        Name = "json"
	Enum        Name = "enum"
	Array       Name = "array"
	Other       Name = "other"
)

// Kind is a column's neutral kind with the parameters a target needs to
// hold its values exactly.
type Kind struct {
	// Name is the kind.
	Name Name `json:"name"`
	// Width is the size in bits of an int (8, 16, 24, 32, 64: MySQL has
	// tinyint and mediumint) or a float (32, 64).
	Width int `json:"width,omitempty"`
	// Unsigned is set on an unsigned int (MySQL).
	Unsigned bool `json:"unsigned,omitempty"`
	// Precision and Scale bound a decimal; 0 precision is unconstrained.
	Precision int `json:"precision,omitempty"`
	Scale     int `json:"scale,omitempty"`
	// Special is set where the source type can hold NaN and ±Infinity
	// (PostgreSQL numeric; floats always can).
	Special bool `json:"special,omitempty"`
	// Zoned is set on a time of day with a zone offset (PostgreSQL timetz).
	Zoned bool `json:"zoned,omitempty"`
	// Labels are an enum's labels in order.
	Labels []string `json:"labels,omitempty"`
	// Elem is an array's element kind.
	Elem *Kind `json:"elem,omitempty"`
}

// Value is one neutral value. Which field holds it depends on its kind:
//
//   - int: Int (signed) or Uint (Kind.Unsigned); bool: Bool
//   - decimal: Text, the canonical decimal text ("-12.50", "NaN",
//     "Infinity", "-Infinity")
//   - float: Float (NaN and ±Inf included)
//   - text, enum, json, uuid (lowercase canonical), other (the source's
//     text output): Text
//   - bytes: Bytes
//   - date: Time at UTC midnight; timestamp: Time in UTC read as a wall
//     clock; timestamptz: Time as a UTC instant; Infinite ±1 for the
//     ±infinity of these three
//   - time: Micros since midnight, and Offset (seconds east of UTC) when
//     Kind.Zoned
//   - interval: Months, Days and Micros; Infinite ±1 (the other fields
//     zero) for PostgreSQL's ±infinity interval
//   - array: Elems (element NULLs are Null) in row-major order, Dims the
//     length of each dimension (one entry for a one-dimensional array); an
//     empty array has neither. PostgreSQL's lower bounds are not kept.
//
// A NULL column value is Null, its other fields zero; the codecs take and
// give NULL only as an array element, a column's NULL travelling apart.
type Value struct {
	Null     bool
	Bool     bool
	Int      int64
	Uint     uint64
	Float    float64
	Text     string
	Bytes    []byte
	Time     time.Time
	Infinite int8
	Micros   int64
	Offset   int32
	Months   int32
	Days     int32
	Elems    []Value
	Dims     []int
}

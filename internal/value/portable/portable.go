// Package portable is the text form that a target engine without a native
// type for a neutral kind stores that kind's values in, and reads them back
// from. Every target that stores such values as text (SQLite for most kinds;
// MySQL for intervals, zoned times and arrays) writes them through this
// package, so that one value has one spelling in every such target:
//
//   - dates as YYYY-MM-DD with the astronomical year (1 BC is 0000), a
//     year past 9999 written +YYYYY;
//   - timestamps as "YYYY-MM-DD HH:MM:SS.ffffff", timestamps with zone as
//     "YYYY-MM-DDTHH:MM:SS.ffffffZ" (the UTC instant);
//   - times as HH:MM:SS.ffffff, followed by +HH:MM (or +HH:MM:SS) when zoned;
//   - intervals in ISO 8601, as PostgreSQL prints them in its iso_8601 style;
//   - ±infinity of dates, timestamps and intervals as "infinity" and
//     "-infinity";
//   - floats in the shortest form that reads back to the same value at
//     their width, NaN, Infinity and -Infinity as PostgreSQL spells them;
//   - bytes in lowercase hex;
//   - arrays as nested JSON arrays (see AppendArray);
//   - every other kind (decimal, text, uuid, json, enum, other) as its text.
//
// ParseText reads each of these forms back into the neutral value.
package portable

import (
	"encoding/hex"
	"math"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/value"
)

// AppendText appends the text form of v, a non-NULL value of kind k, to b.
// Every kind has one, arrays excepted: an array's form is JSON, written by
// AppendArray (AppendText writes an array's Text, which is empty).
func AppendText(b []byte, k value.Kind, v value.Value) []byte {
	switch k.Name {
	case value.Date:
		if inf := infinity(v); inf != "" {
			return append(b, inf...)
		}
		return AppendDate(b, v.Time.UTC())
	case value.Timestamp:
		if inf := infinity(v); inf != "" {
			return append(b, inf...)
		}
		t := v.Time.UTC()
		b = AppendDate(b, t)
		b = append(b, ' ')
		return AppendClock(b, clockOf(t))
	case value.TimestampTZ:
		if inf := infinity(v); inf != "" {
			return append(b, inf...)
		}
		t := v.Time.UTC()
		b = AppendDate(b, t)
		b = append(b, 'T')
		b = AppendClock(b, clockOf(t))
		return append(b, 'Z')
	case value.Time:
		b = AppendClock(b, v.Micros)
		if k.Zoned {
			b = AppendOffset(b, v.Offset)
		}
		return b
	case value.Interval:
		if inf := infinity(v); inf != "" {
			return append(b, inf...)
		}
		return AppendInterval(b, v.Months, v.Days, v.Micros)
	case value.Int:
		if k.Unsigned {
			return strconv.AppendUint(b, v.Uint, 10)
		}
		return strconv.AppendInt(b, v.Int, 10)
	case value.Bool:
		return strconv.AppendBool(b, v.Bool)
	case value.Float:
		return AppendFloat(b, k, v.Float)
	case value.Bytes:
		return hex.AppendEncode(b, v.Bytes)
	}
	return append(b, v.Text...)
}

// infinity spells v's infinity, or is empty for a finite value.
func infinity(v value.Value) string {
	switch {
	case v.Infinite > 0:
		return "infinity"
	case v.Infinite < 0:
		return "-infinity"
	}
	return ""
}

// clockOf is t's time of day in microseconds since midnight.
func clockOf(t time.Time) int64 {
	h, m, s := t.Clock()
	return int64(h)*3600e6 + int64(m)*60e6 + int64(s)*1e6 + int64(t.Nanosecond()/1000)
}

// appendPadded appends n, which is not negative, in decimal with at least
// width digits.
func appendPadded(b []byte, n int64, width int) []byte {
	var tmp [20]byte
	s := strconv.AppendInt(tmp[:0], n, 10)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

// AppendDate appends t's date (in t's location) as YYYY-MM-DD, with the
// astronomical year: year 0000 is 1 BC and -0001 is 2 BC. A year past 9999
// takes a leading + (ISO 8601's expanded form, +10000-01-01).
func AppendDate(b []byte, t time.Time) []byte {
	y := int64(t.Year())
	switch {
	case y < 0:
		b = append(b, '-')
		b = appendPadded(b, -y, 4)
	case y > 9999:
		b = append(b, '+')
		b = appendPadded(b, y, 4)
	default:
		b = appendPadded(b, y, 4)
	}
	b = append(b, '-')
	b = appendPadded(b, int64(t.Month()), 2)
	b = append(b, '-')
	return appendPadded(b, int64(t.Day()), 2)
}

// AppendClock appends a time of day, micros microseconds after midnight,
// as HH:MM:SS.ffffff, always with six fraction digits. The end of the day,
// 86400e6 microseconds, is 24:00:00.000000.
func AppendClock(b []byte, micros int64) []byte {
	b = appendPadded(b, micros/3600e6, 2)
	b = append(b, ':')
	b = appendPadded(b, micros/60e6%60, 2)
	b = append(b, ':')
	b = appendPadded(b, micros/1e6%60, 2)
	b = append(b, '.')
	return appendPadded(b, micros%1e6, 6)
}

// AppendOffset appends a zone offset of east seconds east of UTC as a sign
// and HH:MM (-05:30, +00:00), with :SS added only for an offset that has
// seconds (-05:30:07).
func AppendOffset(b []byte, east int32) []byte {
	sign := byte('+')
	off := int64(east)
	if off < 0 {
		sign, off = '-', -off
	}
	b = append(b, sign)
	b = appendPadded(b, off/3600, 2)
	b = append(b, ':')
	b = appendPadded(b, off/60%60, 2)
	if off%60 != 0 {
		b = append(b, ':')
		b = appendPadded(b, off%60, 2)
	}
	return b
}

// AppendInterval appends a finite interval of months, days and micros
// microseconds in ISO 8601, spelt as PostgreSQL prints it with
// IntervalStyle iso_8601: years and months split from the months, the
// days, and hours, minutes and seconds split from the microseconds. A part
// that is zero is left out and each other part carries its own sign, so
// that mixed signs survive (P1Y-2DT-0.5S); the seconds' fraction has no
// trailing zeros, and the zero interval is PT0S.
func AppendInterval(b []byte, months, days int32, micros int64) []byte {
	if months == 0 && days == 0 && micros == 0 {
		return append(b, "PT0S"...)
	}
	b = append(b, 'P')
	part := func(n int64, unit byte) {
		if n != 0 {
			b = strconv.AppendInt(b, n, 10)
			b = append(b, unit)
		}
	}
	part(int64(months/12), 'Y')
	part(int64(months%12), 'M')
	part(int64(days), 'D')
	if micros == 0 {
		return b
	}
	b = append(b, 'T')
	part(micros/3600e6, 'H')
	part(micros/60e6%60, 'M')
	s := micros % 60e6
	if s == 0 {
		return b
	}
	if s < 0 {
		b = append(b, '-')
		s = -s
	}
	b = strconv.AppendInt(b, s/1e6, 10)
	if frac := s % 1e6; frac != 0 {
		b = append(b, '.')
		digits := appendPadded(nil, frac, 6)
		for digits[len(digits)-1] == '0' {
			digits = digits[:len(digits)-1]
		}
		b = append(b, digits...)
	}
	return append(b, 'S')
}

// AppendFloat appends f, a float of kind k, in the shortest decimal form
// that parses back to the same value at k's width (32 or 64 bits), and
// NaN, Infinity and -Infinity spelt as PostgreSQL spells them.
func AppendFloat(b []byte, k value.Kind, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "Infinity"...)
	case math.IsInf(f, -1):
		return append(b, "-Infinity"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, floatBits(k))
}

// floatBits is the width a float of kind k is written and read at.
func floatBits(k value.Kind) int {
	if k.Width == 32 {
		return 32
	}
	return 64
}

package sqlite

import (
	"encoding/hex"
	"math"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/value"
)

// refusal is a value the storage rules cannot hold exactly; the caller
// names the table and column (see refuseValue).
type refusal struct {
	shown  string // the value, as it is shown in the message
	reason string
}

func (r *refusal) Error() string { return "value " + r.shown + ": " + r.reason }

// render turns a neutral value of kind k into what the target stores (the
// rules of docs/sqlite-target.md): nil for NULL, int64 for integers and
// booleans, float64 for floats, []byte for bytes and a string for every
// other kind. A value the rules cannot hold is a *refusal, never rounded
// or stored as NULL.
func render(k value.Kind, v value.Value) (any, error) {
	if v.Null {
		return nil, nil
	}
	switch k.Name {
	case value.Int:
		if k.Unsigned {
			if v.Uint > math.MaxInt64 {
				return nil, &refusal{shown: strconv.FormatUint(v.Uint, 10), reason: "beyond SQLite INTEGER's signed 64-bit range"}
			}
			return int64(v.Uint), nil
		}
		return v.Int, nil
	case value.Bool:
		if v.Bool {
			return int64(1), nil
		}
		return int64(0), nil
	case value.Float:
		switch {
		case math.IsNaN(v.Float):
			return nil, &refusal{shown: "NaN", reason: "SQLite stores a NaN REAL as NULL"}
		case v.Float == 0 && math.Signbit(v.Float):
			return nil, &refusal{shown: "-0", reason: "SQLite stores a negative zero REAL as 0"}
		}
		return v.Float, nil
	case value.Bytes:
		if v.Bytes == nil {
			return []byte{}, nil // empty, not NULL
		}
		return v.Bytes, nil
	case value.Array:
		b, err := appendArray(nil, k, v)
		if err != nil {
			return nil, err
		}
		return string(b), nil
	}
	return string(appendScalarText(nil, k, v)), nil
}

// appendScalarText appends the TEXT rendering of a value of a kind stored
// as TEXT (and, inside arrays, of every kind): decimals in their canonical
// text, dates and times in fixed ISO forms, intervals in ISO 8601, and the
// rest as their text.
func appendScalarText(b []byte, k value.Kind, v value.Value) []byte {
	switch k.Name {
	case value.Date:
		if inf := infinity(v); inf != "" {
			return append(b, inf...)
		}
		return appendDate(b, v.Time.UTC())
	case value.Timestamp:
		if inf := infinity(v); inf != "" {
			return append(b, inf...)
		}
		t := v.Time.UTC()
		b = appendDate(b, t)
		b = append(b, ' ')
		return appendClock(b, int64(t.Hour())*3600e6+int64(t.Minute())*60e6+int64(t.Second())*1e6+int64(t.Nanosecond()/1000))
	case value.TimestampTZ:
		if inf := infinity(v); inf != "" {
			return append(b, inf...)
		}
		t := v.Time.UTC()
		b = appendDate(b, t)
		b = append(b, 'T')
		b = appendClock(b, int64(t.Hour())*3600e6+int64(t.Minute())*60e6+int64(t.Second())*1e6+int64(t.Nanosecond()/1000))
		return append(b, 'Z')
	case value.Time:
		b = appendClock(b, v.Micros)
		if k.Zoned {
			b = appendOffset(b, v.Offset)
		}
		return b
	case value.Interval:
		if inf := infinity(v); inf != "" {
			return append(b, inf...)
		}
		return appendInterval(b, v.Months, v.Days, v.Micros)
	case value.Int:
		if k.Unsigned {
			return strconv.AppendUint(b, v.Uint, 10)
		}
		return strconv.AppendInt(b, v.Int, 10)
	case value.Bool:
		return strconv.AppendBool(b, v.Bool)
	case value.Float:
		return appendFloat(b, k, v.Float)
	case value.Bytes:
		return hex.AppendEncode(b, v.Bytes)
	}
	return append(b, v.Text...)
}

func infinity(v value.Value) string {
	switch {
	case v.Infinite > 0:
		return "infinity"
	case v.Infinite < 0:
		return "-infinity"
	}
	return ""
}

// appendPadded appends n in decimal with at least width digits.
func appendPadded(b []byte, n int64, width int) []byte {
	var tmp [20]byte
	s := strconv.AppendInt(tmp[:0], n, 10)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

// appendDate appends YYYY-MM-DD with the astronomical year: 1 BC is year
// 0000, 2 BC is -0001, and a year past 9999 is written +YYYYY (ISO 8601's
// expanded form).
func appendDate(b []byte, t time.Time) []byte {
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

// appendClock appends a time of day given in microseconds since midnight as
// HH:MM:SS.ffffff (24:00:00.000000 included).
func appendClock(b []byte, micros int64) []byte {
	b = appendPadded(b, micros/3600e6, 2)
	b = append(b, ':')
	b = appendPadded(b, micros/60e6%60, 2)
	b = append(b, ':')
	b = appendPadded(b, micros/1e6%60, 2)
	b = append(b, '.')
	return appendPadded(b, micros%1e6, 6)
}

// appendOffset appends a zone offset given in seconds east of UTC as
// +HH:MM, or +HH:MM:SS when it has seconds.
func appendOffset(b []byte, east int32) []byte {
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

// appendInterval appends an interval in the ISO 8601 form PostgreSQL
// prints under IntervalStyle iso_8601 (the chain's text setting): years and
// months from the months, days, then hours, minutes and seconds from the
// microseconds, each part only when it is not zero, each with its own sign;
// PT0S for the zero interval.
func appendInterval(b []byte, months, days int32, micros int64) []byte {
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
	if micros != 0 {
		b = append(b, 'T')
		part(micros/3600e6, 'H')
		part(micros/60e6%60, 'M')
		if s := micros % 60e6; s != 0 {
			if s < 0 {
				b = append(b, '-')
				s = -s
			}
			b = strconv.AppendInt(b, s/1e6, 10)
			if frac := s % 1e6; frac != 0 {
				f := appendPadded(nil, frac, 6)
				for f[len(f)-1] == '0' {
					f = f[:len(f)-1]
				}
				b = append(b, '.')
				b = append(b, f...)
			}
			b = append(b, 'S')
		}
	}
	return b
}

// appendFloat appends a float in the shortest form that reads back to the
// same value at its width, and NaN, Infinity, -Infinity as PostgreSQL
// spells them.
func appendFloat(b []byte, k value.Kind, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "Infinity"...)
	case math.IsInf(f, -1):
		return append(b, "-Infinity"...)
	}
	bits := 64
	if k.Width == 32 {
		bits = 32
	}
	return strconv.AppendFloat(b, f, 'g', -1, bits)
}

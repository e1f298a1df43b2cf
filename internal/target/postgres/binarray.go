package postgres

import (
	"encoding/binary"
	"math"
	"strconv"
)

// Built-in type OIDs whose array a set statement sends in PostgreSQL's
// binary format: the chain's text is read once here into the value, and the
// server reads the array without parsing a literal or calling each
// element's text input function. Text-like types go as their bytes, with
// no quoting. Every other type, and any column whose values do not all read
// back exactly, goes as a text array literal as before.
const (
	oidBool        = 16
	oidBytea       = 17
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidText        = 25
	oidJSON        = 114
	oidFloat4      = 700
	oidFloat8      = 701
	oidBpchar      = 1042
	oidVarchar     = 1043
	oidDate        = 1082
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidUUID        = 2950
	oidJSONB       = 3802
)

// binaryElement reports whether arrays of the type of that OID go binary.
func binaryElement(oid uint32) bool {
	switch oid {
	case oidBool, oidBytea, oidInt8, oidInt2, oidInt4, oidText, oidJSON, oidFloat4, oidFloat8,
		oidBpchar, oidVarchar, oidDate, oidTimestamp, oidTimestamptz, oidUUID, oidJSONB:
		return true
	}
	return false
}

// appendBinaryArray appends the one-dimensional array of the values (nil:
// NULL) of element type oid in binary format, or reports false when one
// value does not read as that type (b is then garbage past its old length).
func appendBinaryArray(b []byte, oid uint32, n int, value func(i int) ([]byte, bool)) ([]byte, bool) {
	start := len(b)
	b = binary.BigEndian.AppendUint32(b, 1) // dimensions
	b = binary.BigEndian.AppendUint32(b, 0) // flags: has nulls, set below
	b = binary.BigEndian.AppendUint32(b, oid)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = binary.BigEndian.AppendUint32(b, 1) // lower bound
	nulls := false
	for i := 0; i < n; i++ {
		data, null := value(i)
		if null {
			nulls = true
			b = binary.BigEndian.AppendUint32(b, math.MaxUint32) // -1
			continue
		}
		at := len(b)
		b = append(b, 0, 0, 0, 0)
		var ok bool
		if b, ok = appendBinaryValue(b, oid, data); !ok {
			return b, false
		}
		binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	}
	if nulls {
		binary.BigEndian.PutUint32(b[start+4:], 1)
	}
	return b, true
}

// appendBinaryValue appends the binary form of one value given as the
// type's text output.
func appendBinaryValue(b []byte, oid uint32, s []byte) ([]byte, bool) {
	switch oid {
	case oidText, oidVarchar, oidBpchar, oidJSON:
		return append(b, s...), true
	case oidJSONB:
		return append(append(b, 1), s...), true // version 1, then the text
	case oidBool:
		if len(s) == 1 && (s[0] == 't' || s[0] == 'f') {
			if s[0] == 't' {
				return append(b, 1), true
			}
			return append(b, 0), true
		}
		return b, false
	case oidInt2, oidInt4, oidInt8:
		v, ok := parseInt(s)
		switch {
		case !ok:
			return b, false
		case oid == oidInt2:
			if v < math.MinInt16 || v > math.MaxInt16 {
				return b, false
			}
			return binary.BigEndian.AppendUint16(b, uint16(v)), true
		case oid == oidInt4:
			if v < math.MinInt32 || v > math.MaxInt32 {
				return b, false
			}
			return binary.BigEndian.AppendUint32(b, uint32(v)), true
		}
		return binary.BigEndian.AppendUint64(b, uint64(v)), true
	case oidFloat4, oidFloat8:
		bits := 64
		if oid == oidFloat4 {
			bits = 32
		}
		f, err := strconv.ParseFloat(string(s), bits)
		if err != nil {
			return b, false
		}
		if oid == oidFloat4 {
			return binary.BigEndian.AppendUint32(b, math.Float32bits(float32(f))), true
		}
		return binary.BigEndian.AppendUint64(b, math.Float64bits(f)), true
	case oidUUID:
		if len(s) != 36 {
			return b, false
		}
		for i := 0; i < 36; {
			if i == 8 || i == 13 || i == 18 || i == 23 {
				if s[i] != '-' {
					return b, false
				}
				i++
				continue
			}
			hi, lo := unhex(s[i]), unhex(s[i+1])
			if hi < 0 || lo < 0 {
				return b, false
			}
			b = append(b, byte(hi<<4|lo))
			i += 2
		}
		return b, true
	case oidBytea:
		if len(s) < 2 || s[0] != '\\' || s[1] != 'x' || len(s)%2 != 0 {
			return b, false
		}
		for i := 2; i < len(s); i += 2 {
			hi, lo := unhex(s[i]), unhex(s[i+1])
			if hi < 0 || lo < 0 {
				return b, false
			}
			b = append(b, byte(hi<<4|lo))
		}
		return b, true
	case oidDate:
		d, ok := parseDate(s)
		if !ok || len(s) != 10 {
			return b, false
		}
		return binary.BigEndian.AppendUint32(b, uint32(int32(d))), true
	case oidTimestamp, oidTimestamptz:
		us, ok := parseTimestamp(s, oid == oidTimestamptz)
		if !ok {
			return b, false
		}
		return binary.BigEndian.AppendUint64(b, uint64(us)), true
	}
	return b, false
}

// parseInt reads an optionally signed decimal integer that fits an int64.
func parseInt(s []byte) (int64, bool) {
	neg := false
	if len(s) > 0 && s[0] == '-' {
		neg, s = true, s[1:]
	}
	if len(s) == 0 || len(s) > 19 {
		return 0, false
	}
	var u uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	switch {
	case neg && u <= 1<<63:
		return int64(-u), true
	case !neg && u < 1<<63:
		return int64(u), true
	}
	return 0, false
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// digits reads exactly len(s) decimal digits.
func digits(s []byte) (int, bool) {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, len(s) > 0
}

// parseDate reads the ISO date at the start of s (YYYY-MM-DD, year 1 to
// 9999) as days since 2000-01-01, PostgreSQL's epoch.
func parseDate(s []byte) (int64, bool) {
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return 0, false
	}
	y, ok1 := digits(s[0:4])
	m, ok2 := digits(s[5:7])
	d, ok3 := digits(s[8:10])
	if !ok1 || !ok2 || !ok3 || y < 1 || m < 1 || m > 12 || d < 1 || d > daysIn(y, m) {
		return 0, false
	}
	return daysFromCivil(y, m, d) - daysFromCivil(2000, 1, 1), true
}

func daysIn(y, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil is the day number of a proleptic Gregorian date (days since
// 1970-01-01).
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era*146097 + doe - 719468)
}

// parseTimestamp reads PostgreSQL's ISO output of a timestamp
// (YYYY-MM-DD HH:MM:SS[.ffffff]) and, with zone, the offset after it
// (±HH[:MM[:SS]]), as microseconds since 2000-01-01 00:00 UTC. Anything
// else (infinity, BC, a year past 9999, another DateStyle) is refused.
func parseTimestamp(s []byte, zone bool) (int64, bool) {
	days, ok := parseDate(s)
	if !ok || len(s) < 19 || s[10] != ' ' || s[13] != ':' || s[16] != ':' {
		return 0, false
	}
	h, ok1 := digits(s[11:13])
	mi, ok2 := digits(s[14:16])
	se, ok3 := digits(s[17:19])
	if !ok1 || !ok2 || !ok3 || h > 23 || mi > 59 || se > 59 {
		return 0, false
	}
	us := ((days*24+int64(h))*60+int64(mi))*60 + int64(se)
	us *= 1_000_000
	rest := s[19:]
	if len(rest) > 0 && rest[0] == '.' {
		i := 1
		frac := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			if i > 6 {
				return 0, false
			}
			frac = frac*10 + int(rest[i]-'0')
			i++
		}
		if i == 1 {
			return 0, false
		}
		for j := i; j <= 6; j++ {
			frac *= 10
		}
		us += int64(frac)
		rest = rest[i:]
	}
	if !zone {
		return us, len(rest) == 0
	}
	if len(rest) < 3 || (rest[0] != '+' && rest[0] != '-') {
		return 0, false
	}
	neg := rest[0] == '-'
	oh, ok := digits(rest[1:3])
	if !ok {
		return 0, false
	}
	off := oh * 3600
	rest = rest[3:]
	for _, mul := range []int{60, 1} {
		if len(rest) == 0 {
			break
		}
		if len(rest) < 3 || rest[0] != ':' {
			return 0, false
		}
		v, ok := digits(rest[1:3])
		if !ok || v > 59 {
			return 0, false
		}
		off += v * mul
		rest = rest[3:]
	}
	if len(rest) != 0 {
		return 0, false
	}
	// Local time minus its offset east of UTC is UTC.
	if neg {
		return us + int64(off)*1_000_000, true
	}
	return us - int64(off)*1_000_000, true
}

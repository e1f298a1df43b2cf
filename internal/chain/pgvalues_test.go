package chain

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"time"
)

// Test-only encoders of PostgreSQL binary send formats, used to build
// realistic rows; the chain package itself never interprets values.

var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func pgInt2(v int16) []byte { return binary.BigEndian.AppendUint16(nil, uint16(v)) }
func pgInt4(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
func pgInt8(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// pgFloat8 encodes v; a NaN takes PostgreSQL's canonical bit pattern
// 0x7ff8000000000000 (Go's math.NaN has a different payload).
func pgFloat8(v float64) []byte {
	if math.IsNaN(v) {
		return binary.BigEndian.AppendUint64(nil, 0x7ff8000000000000)
	}
	return binary.BigEndian.AppendUint64(nil, math.Float64bits(v))
}
func pgBool(v bool) []byte {
	if v {
		return []byte{1}
	}
	return []byte{0}
}
func pgText(s string) []byte { return []byte(s) }

// pgTimestamptz is microseconds since 2000-01-01 00:00:00 UTC.
func pgTimestamptz(t time.Time) []byte {
	return pgInt8(t.Sub(pgEpoch).Microseconds())
}

// pgDate is days since 2000-01-01.
func pgDate(y int, m time.Month, d int) []byte {
	days := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Sub(pgEpoch) / (24 * time.Hour)
	return pgInt4(int32(days))
}

// pgInterval is microseconds, days, months.
func pgInterval(micros int64, days, months int32) []byte {
	b := pgInt8(micros)
	b = binary.BigEndian.AppendUint32(b, uint32(days))
	return binary.BigEndian.AppendUint32(b, uint32(months))
}

// pgJSONB is version byte 1 followed by the JSON text.
func pgJSONB(s string) []byte { return append([]byte{1}, s...) }

func pgUUID(s string) []byte {
	s = strings.ReplaceAll(s, "-", "")
	var out []byte
	for i := 0; i < 32; i += 2 {
		var b byte
		fmt.Sscanf(s[i:i+2], "%02x", &b)
		out = append(out, b)
	}
	return out
}

// pgInt4Array encodes a one-dimensional int4[] with lower bound 1; a nil
// element is NULL. An empty array has no dimensions.
func pgInt4Array(elems []*int32) []byte {
	const int4OID = 23
	var b []byte
	if len(elems) == 0 {
		b = binary.BigEndian.AppendUint32(b, 0)
		b = binary.BigEndian.AppendUint32(b, 0)
		return binary.BigEndian.AppendUint32(b, int4OID)
	}
	hasNull := uint32(0)
	for _, e := range elems {
		if e == nil {
			hasNull = 1
		}
	}
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint32(b, hasNull)
	b = binary.BigEndian.AppendUint32(b, int4OID)
	b = binary.BigEndian.AppendUint32(b, uint32(len(elems)))
	b = binary.BigEndian.AppendUint32(b, 1)
	for _, e := range elems {
		if e == nil {
			b = binary.BigEndian.AppendUint32(b, 0xffffffff)
			continue
		}
		b = binary.BigEndian.AppendUint32(b, 4)
		b = binary.BigEndian.AppendUint32(b, uint32(*e))
	}
	return b
}

// Numeric sign words.
const (
	numericPos = 0x0000
	numericNeg = 0x4000
	numericNaN = 0xC000
)

// pgNumeric encodes a decimal string ("-12.3400", "NaN") as numeric: ndigits,
// weight, sign, dscale (int16 each), then base-10000 digits.
func pgNumeric(s string) []byte {
	put := func(ndigits, weight int, sign uint16, dscale int, digits []int16) []byte {
		b := pgInt2(int16(ndigits))
		b = append(b, pgInt2(int16(weight))...)
		b = binary.BigEndian.AppendUint16(b, sign)
		b = append(b, pgInt2(int16(dscale))...)
		for _, d := range digits {
			b = append(b, pgInt2(d)...)
		}
		return b
	}
	if s == "NaN" {
		return put(0, 0, numericNaN, 0, nil)
	}
	sign := uint16(numericPos)
	if strings.HasPrefix(s, "-") {
		sign, s = numericNeg, s[1:]
	}
	ip, fp, _ := strings.Cut(s, ".")
	dscale := len(fp)
	ip = strings.TrimLeft(ip, "0")
	if r := len(ip) % 4; r != 0 {
		ip = strings.Repeat("0", 4-r) + ip
	}
	if r := len(fp) % 4; r != 0 {
		fp += strings.Repeat("0", 4-r)
	}
	all := ip + fp
	var digits []int16
	for i := 0; i < len(all); i += 4 {
		var d int16
		fmt.Sscanf(all[i:i+4], "%d", &d)
		digits = append(digits, d)
	}
	weight := len(ip)/4 - 1
	for len(digits) > 0 && digits[0] == 0 {
		digits, weight = digits[1:], weight-1
	}
	for len(digits) > 0 && digits[len(digits)-1] == 0 {
		digits = digits[:len(digits)-1]
	}
	if len(digits) == 0 {
		return put(0, 0, numericPos, dscale, nil)
	}
	return put(len(digits), weight, sign, dscale, digits)
}

// numericString decodes pgNumeric's output back to its decimal text.
func numericString(b []byte) string {
	ndigits := int(int16(binary.BigEndian.Uint16(b)))
	weight := int(int16(binary.BigEndian.Uint16(b[2:])))
	sign := binary.BigEndian.Uint16(b[4:])
	dscale := int(int16(binary.BigEndian.Uint16(b[6:])))
	if sign == numericNaN {
		return "NaN"
	}
	var sb strings.Builder
	if sign == numericNeg {
		sb.WriteByte('-')
	}
	digit := func(i int) int {
		if i < 0 || i >= ndigits {
			return 0
		}
		return int(int16(binary.BigEndian.Uint16(b[8+2*i:])))
	}
	if weight < 0 {
		sb.WriteByte('0')
	}
	for w := weight; w >= 0; w-- {
		d := digit(weight - w)
		if w == weight {
			fmt.Fprintf(&sb, "%d", d)
		} else {
			fmt.Fprintf(&sb, "%04d", d)
		}
	}
	if dscale > 0 {
		var frac strings.Builder
		for i := weight + 1; frac.Len() < dscale; i++ {
			fmt.Fprintf(&frac, "%04d", digit(i))
		}
		sb.WriteByte('.')
		sb.WriteString(frac.String()[:dscale])
	}
	return sb.String()
}

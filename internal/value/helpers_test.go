package value

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"time"
)

// sameValue compares two values field by field: floats by bit pattern
// (so NaN equals NaN and -0 differs from 0), times as instants in UTC.
func sameValue(a, b Value) bool {
	if a.Null != b.Null || a.Bool != b.Bool || a.Int != b.Int || a.Uint != b.Uint ||
		math.Float64bits(a.Float) != math.Float64bits(b.Float) || a.Text != b.Text ||
		!bytes.Equal(a.Bytes, b.Bytes) || (a.Bytes == nil) != (b.Bytes == nil) ||
		!a.Time.Equal(b.Time) || a.Time.Location() != b.Time.Location() ||
		a.Infinite != b.Infinite || a.Micros != b.Micros || a.Offset != b.Offset ||
		a.Months != b.Months || a.Days != b.Days || len(a.Elems) != len(b.Elems) || len(a.Dims) != len(b.Dims) {
		return false
	}
	for i := range a.Dims {
		if a.Dims[i] != b.Dims[i] {
			return false
		}
	}
	for i := range a.Elems {
		if !sameValue(a.Elems[i], b.Elems[i]) {
			return false
		}
	}
	return true
}

// show prints a value's set fields for a test failure.
func show(v Value) string {
	var parts []string
	add := func(name string, val any) { parts = append(parts, fmt.Sprintf("%s:%v", name, val)) }
	if v.Null {
		add("Null", true)
	}
	if v.Bool {
		add("Bool", true)
	}
	if v.Int != 0 {
		add("Int", v.Int)
	}
	if v.Uint != 0 {
		add("Uint", v.Uint)
	}
	if v.Float != 0 || math.Signbit(v.Float) || math.IsNaN(v.Float) {
		add("Float", fmt.Sprintf("%v(%016x)", v.Float, math.Float64bits(v.Float)))
	}
	if v.Text != "" {
		add("Text", fmt.Sprintf("%q", v.Text))
	}
	if v.Bytes != nil {
		add("Bytes", fmt.Sprintf("%x", v.Bytes))
	}
	if !v.Time.IsZero() {
		add("Time", v.Time.Format(time.RFC3339Nano))
	}
	if v.Infinite != 0 {
		add("Infinite", v.Infinite)
	}
	if v.Micros != 0 {
		add("Micros", v.Micros)
	}
	if v.Offset != 0 {
		add("Offset", v.Offset)
	}
	if v.Months != 0 {
		add("Months", v.Months)
	}
	if v.Days != 0 {
		add("Days", v.Days)
	}
	if v.Dims != nil {
		add("Dims", v.Dims)
	}
	if v.Elems != nil {
		var es []string
		for _, e := range v.Elems {
			es = append(es, show(e))
		}
		add("Elems", "["+strings.Join(es, " ")+"]")
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// Hand-built PostgreSQL binary send formats, written from the format's
// description (docs/chain-format.md §5).

func be16(v int16) []byte    { return binary.BigEndian.AppendUint16(nil, uint16(v)) }
func be32(v int32) []byte    { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
func be64(v int64) []byte    { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
func f4(v float32) []byte    { return binary.BigEndian.AppendUint32(nil, math.Float32bits(v)) }
func f8(v float64) []byte    { return binary.BigEndian.AppendUint64(nil, math.Float64bits(v)) }
func f8bits(b uint64) []byte { return binary.BigEndian.AppendUint64(nil, b) }
func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// numericBin builds numeric's binary form of a plain decimal string
// ("-12.3400"): base-10000 digits aligned on the decimal point, leading
// and trailing zero digits stripped, dscale the fraction's length.
func numericBin(s string) []byte {
	sign := uint16(0)
	if strings.HasPrefix(s, "-") {
		sign, s = 0x4000, s[1:]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	dscale := len(frac)
	for len(intPart)%4 != 0 {
		intPart = "0" + intPart
	}
	for len(frac)%4 != 0 {
		frac += "0"
	}
	all := intPart + frac
	var digits []int16
	for i := 0; i < len(all); i += 4 {
		var d int16
		fmt.Sscanf(all[i:i+4], "%d", &d)
		digits = append(digits, d)
	}
	weight := len(intPart)/4 - 1
	for len(digits) > 0 && digits[0] == 0 {
		digits, weight = digits[1:], weight-1
	}
	for len(digits) > 0 && digits[len(digits)-1] == 0 {
		digits = digits[:len(digits)-1]
	}
	if len(digits) == 0 {
		weight, sign = 0, 0
	}
	out := cat(be16(int16(len(digits))), be16(int16(weight)), binary.BigEndian.AppendUint16(nil, sign), be16(int16(dscale)))
	for _, d := range digits {
		out = append(out, be16(d)...)
	}
	return out
}

// numericSpecial is the binary form of NaN or an infinity (sign word only).
func numericSpecial(sign uint16) []byte {
	return cat(be16(0), be16(0), binary.BigEndian.AppendUint16(nil, sign), be16(0))
}

// dateBin is days since 2000-01-01.
func dateBin(t time.Time) []byte {
	return be32(int32(t.Unix()/86400 - 10957))
}

// tsBin is microseconds since 2000-01-01 00:00:00 (UTC).
func tsBin(t time.Time) []byte {
	return be64((t.Unix()-946684800)*1_000_000 + int64(t.Nanosecond()/1000))
}

func intervalBin(micros int64, days, months int32) []byte {
	return cat(be64(micros), be32(days), be32(months))
}

func timetzBin(micros int64, westSeconds int32) []byte {
	return cat(be64(micros), be32(westSeconds))
}

// arrayBin builds a binary array of the given element OID and dimensions
// (lower bounds 1); a nil element is NULL.
func arrayBin(elemOID uint32, dims []int, elems [][]byte) []byte {
	hasNull := int32(0)
	for _, e := range elems {
		if e == nil {
			hasNull = 1
		}
	}
	out := cat(be32(int32(len(dims))), be32(hasNull), binary.BigEndian.AppendUint32(nil, elemOID))
	for _, d := range dims {
		out = cat(out, be32(int32(d)), be32(1))
	}
	for _, e := range elems {
		if e == nil {
			out = append(out, be32(-1)...)
			continue
		}
		out = cat(out, be32(int32(len(e))), e)
	}
	return out
}

func uuidBin(s string) []byte {
	var out []byte
	h := strings.ReplaceAll(s, "-", "")
	for i := 0; i < len(h); i += 2 {
		var b byte
		fmt.Sscanf(h[i:i+2], "%02x", &b)
		out = append(out, b)
	}
	return out
}

package value

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// numeric's sign words in PostgreSQL's binary format.
const (
	numericPos  = 0x0000
	numericNeg  = 0x4000
	numericNaN  = 0xC000
	numericPInf = 0xD000
	numericNInf = 0xF000
	// numericMaxDscale bounds a numeric's display scale (NUMERIC_DSCALE_MASK).
	numericMaxDscale = 0x3FFF
)

// DecodePGBinary decodes a PostgreSQL binary-format value of kind k whose
// type has the given OID. The OID picks between forms one kind covers
// (json or jsonb, int2, int4 or int8); for a type of the user's own (an
// enum, a domain over a built-in type) it may be any OID, the kind and the
// data's length deciding. Kind Other has no binary decoding: its values
// decode from their text form only (chain.EncodingText).
func DecodePGBinary(k Kind, oid uint32, data []byte) (Value, error) {
	if known, ok := scalarByOID[oid]; ok && known.Name != k.Name {
		return Value{}, binaryError(k, data, "type OID %d is not of this kind", oid)
	}
	switch k.Name {
	case Int:
		return decodeIntBinary(k, oid, data)
	case Float:
		return decodeFloatBinary(k, oid, data)
	case Decimal:
		return decodeNumericBinary(k, data)
	case Bool:
		if len(data) != 1 {
			return Value{}, binaryError(k, data, "want 1 byte")
		}
		return Value{Bool: data[0] != 0}, nil
	case Text, Enum:
		return Value{Text: string(data)}, nil
	case JSON:
		if oid == oidJSONB || oid != oidJSON && len(data) > 0 && data[0] == 1 {
			// jsonb: a version byte, 1, then the text. JSON text cannot
			// start with byte 1, so an unknown OID is told apart by it.
			if len(data) == 0 || data[0] != 1 {
				return Value{}, binaryError(k, data, "jsonb without version byte 1")
			}
			return Value{Text: string(data[1:])}, nil
		}
		return Value{Text: string(data)}, nil
	case Bytes:
		return Value{Bytes: append(make([]byte, 0, len(data)), data...)}, nil
	case Date:
		return decodeDateBinary(k, data)
	case Time:
		return decodeTimeBinary(k, data)
	case Timestamp, TimestampTZ:
		return decodeTimestampBinary(k, data)
	case Interval:
		if len(data) != 16 {
			return Value{}, binaryError(k, data, "want 16 bytes")
		}
		us := int64(binary.BigEndian.Uint64(data))
		days := int32(binary.BigEndian.Uint32(data[8:]))
		months := int32(binary.BigEndian.Uint32(data[12:]))
		if inf := infiniteInterval(months, days, us); inf != 0 {
			return Value{Infinite: inf}, nil
		}
		return Value{Months: months, Days: days, Micros: us}, nil
	case UUID:
		if len(data) != 16 {
			return Value{}, binaryError(k, data, "want 16 bytes")
		}
		return Value{Text: formatUUID(data)}, nil
	case Array:
		return decodeArrayBinary(k, data)
	case Other:
		if oid == oidXML {
			// xml's binary form is its text; a leading XML declaration
			// names the encoding it was sent in.
			return Value{Text: string(data)}, nil
		}
		return Value{}, binaryError(k, data, "binary decoding is not supported for this type (OID %d); a column of kind other decodes from its text form only (chain.EncodingText)", oid)
	}
	return Value{}, binaryError(k, data, "unknown kind")
}

func decodeIntBinary(k Kind, oid uint32, data []byte) (Value, error) {
	size := 0
	switch {
	case oid == oidInt2:
		size = 2
	case oid == oidInt4:
		size = 4
	case oid == oidInt8:
		size = 8
	case k.Width == 16 || k.Width == 32 || k.Width == 64:
		size = k.Width / 8
		if k.Unsigned && k.Width < 64 {
			size *= 2 // carried by the next wider signed integer
		}
	case (k.Width == 8 || k.Width == 24) && (len(data) == 2 || len(data) == 4):
		size = len(data) // tinyint in smallint, mediumint in integer
	case len(data) == 2 || len(data) == 4 || len(data) == 8:
		size = len(data)
	}
	if size == 0 || len(data) != size {
		return Value{}, binaryError(k, data, "want %d bytes", size)
	}
	var u uint64
	var n int64
	switch size {
	case 2:
		u = uint64(binary.BigEndian.Uint16(data))
		n = int64(int16(u))
	case 4:
		u = uint64(binary.BigEndian.Uint32(data))
		n = int64(int32(u))
	default:
		u = binary.BigEndian.Uint64(data)
		n = int64(u)
	}
	if k.Unsigned && IntBits(k) == 64 {
		return Value{Uint: u}, nil
	}
	v := Value{Int: n}
	if k.Unsigned {
		// A narrower unsigned int travels in a wider signed PostgreSQL
		// integer (tinyint unsigned in smallint, int unsigned in bigint):
		// its value, not its bits, is the number.
		if n < 0 {
			return Value{}, binaryError(k, data, "%d is out of range", n)
		}
		v = Value{Uint: uint64(n)}
	}
	if !IntFits(k, v) {
		return Value{}, binaryError(k, data, "%d is out of range", n)
	}
	return v, nil
}

func decodeFloatBinary(k Kind, oid uint32, data []byte) (Value, error) {
	size := 8
	switch {
	case oid == oidFloat4:
		size = 4
	case oid == oidFloat8:
	case k.Width == 32:
		size = 4
	}
	if len(data) != size {
		return Value{}, binaryError(k, data, "want %d bytes", size)
	}
	var f float64
	if size == 4 {
		f = float64(math.Float32frombits(binary.BigEndian.Uint32(data)))
	} else {
		f = math.Float64frombits(binary.BigEndian.Uint64(data))
	}
	if math.IsNaN(f) {
		f = math.NaN() // one NaN, whatever its payload
	}
	return Value{Float: f}, nil
}

// decodeNumericBinary turns numeric's binary form into the text
// PostgreSQL prints for it: dscale decimal places, digits beyond them
// dropped (as PostgreSQL's numeric_recv truncates them), no sign on zero.
func decodeNumericBinary(k Kind, data []byte) (Value, error) {
	if len(data) < 8 {
		return Value{}, binaryError(k, data, "shorter than a numeric header")
	}
	ndigits := int(int16(binary.BigEndian.Uint16(data)))
	weight := int(int16(binary.BigEndian.Uint16(data[2:])))
	sign := binary.BigEndian.Uint16(data[4:])
	dscale := int(int16(binary.BigEndian.Uint16(data[6:])))
	if ndigits < 0 || len(data) != 8+2*ndigits {
		return Value{}, binaryError(k, data, "%d digits do not fit %d bytes", ndigits, len(data))
	}
	special := ""
	switch sign {
	case numericNaN:
		special = "NaN"
	case numericPInf:
		special = "Infinity"
	case numericNInf:
		special = "-Infinity"
	case numericPos, numericNeg:
	default:
		return Value{}, binaryError(k, data, "bad sign word %04x", sign)
	}
	if special != "" {
		if !k.Special {
			return Value{}, binaryError(k, data, "this decimal holds no NaN or infinity")
		}
		return Value{Text: special}, nil
	}
	if dscale < 0 || dscale > numericMaxDscale {
		return Value{}, binaryError(k, data, "bad display scale %d", dscale)
	}
	digit := func(j int) int {
		if j < 0 || j >= ndigits {
			return 0
		}
		return int(binary.BigEndian.Uint16(data[8+2*j:]))
	}
	for j := 0; j < ndigits; j++ {
		if digit(j) > 9999 {
			return Value{}, binaryError(k, data, "digit %d is not base 10000", digit(j))
		}
	}
	var b strings.Builder
	if sign == numericNeg {
		b.WriteByte('-')
	}
	group := func(d int) string {
		s := strconv.Itoa(d)
		return strings.Repeat("0", 4-len(s)) + s
	}
	if weight < 0 {
		b.WriteByte('0')
	}
	for pos := weight; pos >= 0; pos-- {
		b.WriteString(group(digit(weight - pos)))
	}
	if dscale > 0 {
		b.WriteByte('.')
		for pos, left := -1, dscale; left > 0; pos-- {
			g := group(digit(weight - pos))
			if left < 4 {
				g = g[:left]
			}
			b.WriteString(g)
			left -= len(g)
		}
	}
	s, err := canonicalDecimal(k, b.String())
	if err != nil {
		return Value{}, binaryError(k, data, "%s", err)
	}
	return Value{Text: s}, nil
}

func decodeDateBinary(k Kind, data []byte) (Value, error) {
	if len(data) != 4 {
		return Value{}, binaryError(k, data, "want 4 bytes")
	}
	days := int32(binary.BigEndian.Uint32(data))
	switch days {
	case math.MaxInt32:
		return Value{Infinite: 1}, nil
	case math.MinInt32:
		return Value{Infinite: -1}, nil
	}
	if !dateInRange(int64(days)) {
		return Value{}, binaryError(k, data, "date out of range")
	}
	return Value{Time: dateFromDays(int64(days))}, nil
}

func decodeTimeBinary(k Kind, data []byte) (Value, error) {
	want := 8
	if k.Zoned {
		want = 12
	}
	if len(data) != want {
		return Value{}, binaryError(k, data, "want %d bytes", want)
	}
	us := int64(binary.BigEndian.Uint64(data))
	if us < 0 || us > microsPerDay {
		return Value{}, binaryError(k, data, "time of day out of range")
	}
	v := Value{Micros: us}
	if k.Zoned {
		west := int32(binary.BigEndian.Uint32(data[8:]))
		if west >= maxZoneSeconds || west <= -maxZoneSeconds {
			return Value{}, binaryError(k, data, "zone offset out of range")
		}
		v.Offset = -west
	}
	return v, nil
}

func decodeTimestampBinary(k Kind, data []byte) (Value, error) {
	if len(data) != 8 {
		return Value{}, binaryError(k, data, "want 8 bytes")
	}
	us := int64(binary.BigEndian.Uint64(data))
	switch us {
	case math.MaxInt64:
		return Value{Infinite: 1}, nil
	case math.MinInt64:
		return Value{Infinite: -1}, nil
	}
	if us < minTimestampSeconds*microsPerSecond || us >= endTimestampSeconds*microsPerSecond {
		return Value{}, binaryError(k, data, "timestamp out of range")
	}
	return Value{Time: timeFromMicros(us)}, nil
}

// decodeArrayBinary reads PostgreSQL's binary array: int32 dimensions,
// int32 flags, uint32 element OID, a length and lower bound per dimension
// (the lower bounds are not kept), then each element as an int32 length
// (-1 for NULL) and its binary form.
func decodeArrayBinary(k Kind, data []byte) (Value, error) {
	elem, err := arrayElemKind(k)
	if err != nil {
		return Value{}, binaryError(k, data, "%s", err)
	}
	if len(data) < 12 {
		return Value{}, binaryError(k, data, "shorter than an array header")
	}
	ndim := int32(binary.BigEndian.Uint32(data))
	flags := int32(binary.BigEndian.Uint32(data[4:]))
	elemOID := binary.BigEndian.Uint32(data[8:])
	if ndim < 0 || ndim > maxArrayDims {
		return Value{}, binaryError(k, data, "%d dimensions", ndim)
	}
	if flags != 0 && flags != 1 {
		return Value{}, binaryError(k, data, "bad array flags %d", flags)
	}
	if known, ok := scalarByOID[elemOID]; ok && known.Name != elem.Name {
		return Value{}, binaryError(k, data, "element type OID %d is not of kind %s", elemOID, elem)
	}
	off := 12
	if len(data) < off+8*int(ndim) {
		return Value{}, binaryError(k, data, "shorter than its dimensions")
	}
	dims := make([]int, ndim)
	total := 1
	for i := range dims {
		d := int32(binary.BigEndian.Uint32(data[off:]))
		off += 8 // length, then the lower bound, which is not kept
		if d < 0 {
			return Value{}, binaryError(k, data, "dimension of length %d", d)
		}
		dims[i] = int(d)
		if d > 0 && total > (len(data)-12)/4/int(d) {
			return Value{}, binaryError(k, data, "more elements than the data holds")
		}
		total *= int(d)
	}
	if ndim == 0 || total == 0 {
		if off != len(data) {
			return Value{}, binaryError(k, data, "data after an empty array")
		}
		return Value{}, nil
	}
	elems := make([]Value, 0, total)
	for len(elems) < total {
		if len(data)-off < 4 {
			return Value{}, binaryError(k, data, "ends inside element %d", len(elems)+1)
		}
		n := int32(binary.BigEndian.Uint32(data[off:]))
		off += 4
		if n == -1 {
			elems = append(elems, Value{Null: true})
			continue
		}
		if n < 0 || int(n) > len(data)-off {
			return Value{}, binaryError(k, data, "element %d has length %d", len(elems)+1, n)
		}
		v, err := DecodePGBinary(elem, elemOID, data[off:off+int(n)])
		if err != nil {
			return Value{}, fmt.Errorf("value: %s binary %s: element %d: %w", k, binaryExcerpt(data), len(elems)+1, err)
		}
		elems = append(elems, v)
		off += int(n)
	}
	if off != len(data) {
		return Value{}, binaryError(k, data, "data after the last element")
	}
	return Value{Elems: elems, Dims: dims}, nil
}

package value

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// The int kinds a MySQL-family source records: widths 8 and 24 beside 16,
// 32 and 64, each signed or unsigned.
var (
	kInt1  = Kind{Name: Int, Width: 8}
	kUint1 = Kind{Name: Int, Width: 8, Unsigned: true}
	kUint2 = Kind{Name: Int, Width: 16, Unsigned: true}
	kInt3  = Kind{Name: Int, Width: 24}
	kUint3 = Kind{Name: Int, Width: 24, Unsigned: true}
	kUint4 = Kind{Name: Int, Width: 32, Unsigned: true}
	kUint8 = Kind{Name: Int, Width: 64, Unsigned: true}
)

// intBounds are each width's first values inside and outside its range.
var intBounds = []struct {
	k                  Kind
	min, max           string
	belowMin, aboveMax string
}{
	{kInt1, "-128", "127", "-129", "128"},
	{kUint1, "0", "255", "-1", "256"},
	{kInt2, "-32768", "32767", "-32769", "32768"},
	{kUint2, "0", "65535", "-1", "65536"},
	{kInt3, "-8388608", "8388607", "-8388609", "8388608"},
	{kUint3, "0", "16777215", "-1", "16777216"},
	{kInt4, "-2147483648", "2147483647", "-2147483649", "2147483648"},
	{kUint4, "0", "4294967295", "-1", "4294967296"},
	{kInt8, "-9223372036854775808", "9223372036854775807", "-9223372036854775809", "9223372036854775808"},
	{kUint8, "0", "18446744073709551615", "-1", "18446744073709551616"},
}

func TestIntWidthsText(t *testing.T) {
	for _, b := range intBounds {
		for _, in := range []string{b.min, b.max} {
			v, err := DecodePGText(b.k, []byte(in))
			if err != nil {
				t.Errorf("%s %s: %v", b.k, in, err)
				continue
			}
			if b.k.Unsigned && strconv.FormatUint(v.Uint, 10) != in || !b.k.Unsigned && strconv.FormatInt(v.Int, 10) != in {
				t.Errorf("%s %s decoded to %+v", b.k, in, v)
			}
			out, err := EncodePGText(b.k, v)
			if err != nil || string(out) != in {
				t.Errorf("%s %s encoded to %q, %v", b.k, in, out, err)
			}
		}
		for _, in := range []string{b.belowMin, b.aboveMax} {
			if v, err := DecodePGText(b.k, []byte(in)); err == nil {
				t.Errorf("%s %s decoded to %+v, want an error", b.k, in, v)
			}
		}
	}
}

func TestIntWidthsEncodeRefusesOutOfRange(t *testing.T) {
	cases := []struct {
		k Kind
		v Value
	}{
		{kInt1, Value{Int: 128}}, {kInt1, Value{Int: -129}}, {kUint1, Value{Uint: 256}},
		{kInt3, Value{Int: 1 << 23}}, {kUint3, Value{Uint: 1 << 24}},
		{kInt2, Value{Int: math.MaxInt32}}, {kUint4, Value{Uint: math.MaxUint32 + 1}},
	}
	for _, c := range cases {
		if out, err := EncodePGText(c.k, c.v); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("%s %+v encoded to %q, %v; want out of range", c.k, c.v, out, err)
		}
	}
	if out, err := EncodePGText(kUint8, Value{Uint: math.MaxUint64}); err != nil || string(out) != "18446744073709551615" {
		t.Errorf("uint64 max: %q, %v", out, err)
	}
}

// A narrower int arrives in PostgreSQL binary in the signed integer that
// holds it (the type a PostgreSQL target stores it in).
func TestIntWidthsBinary(t *testing.T) {
	cases := []struct {
		k    Kind
		oid  uint32
		data []byte
		want string // "" for an error
	}{
		{kInt1, 21, be16(-128), "-128"},
		{kInt1, 21, be16(128), ""},
		{kUint1, 21, be16(255), "255"},
		{kUint1, 21, be16(-1), ""},
		{kUint2, 23, be32(65535), "65535"},
		{kUint2, 23, be32(65536), ""},
		{kInt3, 23, be32(-8388608), "-8388608"},
		{kInt3, 23, be32(8388608), ""},
		{kUint3, 23, be32(16777215), "16777215"},
		{kUint4, 20, be64(math.MaxUint32), "4294967295"},
		{kUint4, 20, be64(-1), ""},
		{kUint8, 20, be64(-1), "18446744073709551615"},
		{kInt3, 0, []byte{1, 2, 3}, ""},
		{kUint1, 0, []byte{1}, ""},
	}
	for _, c := range cases {
		v, err := DecodePGBinary(c.k, c.oid, c.data)
		if c.want == "" {
			if err == nil {
				t.Errorf("%s %x decoded to %+v, want an error", c.k, c.data, v)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %x: %v", c.k, c.data, err)
			continue
		}
		if out, err := EncodePGText(c.k, v); err != nil || string(out) != c.want {
			t.Errorf("%s %x: %q, %v; want %s", c.k, c.data, out, err, c.want)
		}
	}
}

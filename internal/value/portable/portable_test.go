package portable

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/value"
)

var (
	kDate   = value.Kind{Name: value.Date}
	kTs     = value.Kind{Name: value.Timestamp}
	kTstz   = value.Kind{Name: value.TimestampTZ}
	kTime   = value.Kind{Name: value.Time}
	kTimetz = value.Kind{Name: value.Time, Zoned: true}
	kIvl    = value.Kind{Name: value.Interval}
	kF4     = value.Kind{Name: value.Float, Width: 32}
	kF8     = value.Kind{Name: value.Float, Width: 64}
	kI8     = value.Kind{Name: value.Int, Width: 64}
	kU8     = value.Kind{Name: value.Int, Width: 64, Unsigned: true}
	kBool   = value.Kind{Name: value.Bool}
	kBytes  = value.Kind{Name: value.Bytes}
	kText   = value.Kind{Name: value.Text}
	kDec    = value.Kind{Name: value.Decimal}
)

func arrayOf(elem value.Kind) value.Kind { return value.Kind{Name: value.Array, Elem: &elem} }

func day(y int, m time.Month, d int) value.Value {
	return value.Value{Time: time.Date(y, m, d, 0, 0, 0, 0, time.UTC)}
}

func at(y int, m time.Month, d, h, min, s, us int) value.Value {
	return value.Value{Time: time.Date(y, m, d, h, min, s, us*1000, time.UTC)}
}

func TestAppendText(t *testing.T) {
	for _, c := range []struct {
		name string
		k    value.Kind
		v    value.Value
		want string
	}{
		{"date", kDate, day(2026, 3, 5), "2026-03-05"},
		{"1 BC", kDate, day(0, 1, 1), "0000-01-01"},
		{"45 BC", kDate, day(-44, 3, 15), "-0044-03-15"},
		{"year 10000", kDate, day(10000, 1, 1), "+10000-01-01"},
		{"far future", kDate, day(294276, 12, 31), "+294276-12-31"},
		{"date infinity", kDate, value.Value{Infinite: 1}, "infinity"},
		{"timestamp", kTs, at(2026, 1, 2, 3, 4, 5, 6), "2026-01-02 03:04:05.000006"},
		{"BC timestamp", kTs, at(-99, 7, 1, 23, 0, 0, 0), "-0099-07-01 23:00:00.000000"},
		{"timestamptz", kTstz, value.Value{Time: time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.FixedZone("x", 3600))}, "1999-12-31T22:59:59.999999Z"},
		{"-infinity", kTstz, value.Value{Infinite: -1}, "-infinity"},
		{"midnight", kTime, value.Value{}, "00:00:00.000000"},
		{"24:00", kTime, value.Value{Micros: 86400e6}, "24:00:00.000000"},
		{"timetz", kTimetz, value.Value{Micros: 1, Offset: -(5*3600 + 30*60 + 7)}, "00:00:00.000001-05:30:07"},
		{"timetz UTC", kTimetz, value.Value{Micros: 12 * 3600e6}, "12:00:00.000000+00:00"},
		{"zero interval", kIvl, value.Value{}, "PT0S"},
		{"interval", kIvl, value.Value{Months: 14, Days: -3, Micros: 4*3600e6 + 5*60e6 + 6500000}, "P1Y2M-3DT4H5M6.5S"},
		{"negative interval", kIvl, value.Value{Months: -1, Micros: -1}, "P-1MT-0.000001S"},
		{"negative time parts", kIvl, value.Value{Micros: -(26*3600e6 + 60e6 + 250000)}, "PT-26H-1M-0.25S"},
		{"whole minutes", kIvl, value.Value{Days: 1, Micros: 90 * 60e6}, "P1DT1H30M"},
		{"infinite interval", kIvl, value.Value{Infinite: 1}, "infinity"},
		{"float4", kF4, value.Value{Float: float64(float32(0.1))}, "0.1"},
		{"float8", kF8, value.Value{Float: 0.1}, "0.1"},
		{"negative zero", kF8, value.Value{Float: math.Copysign(0, -1)}, "-0"},
		{"NaN", kF8, value.Value{Float: math.NaN()}, "NaN"},
		{"-Infinity", kF4, value.Value{Float: math.Inf(-1)}, "-Infinity"},
		{"int", kI8, value.Value{Int: math.MinInt64}, "-9223372036854775808"},
		{"unsigned", kU8, value.Value{Uint: math.MaxUint64}, "18446744073709551615"},
		{"bool", kBool, value.Value{Bool: true}, "true"},
		{"bytes", kBytes, value.Value{Bytes: []byte{0xDE, 0xAD, 0x00}}, "dead00"},
		{"decimal", kDec, value.Value{Text: "-Infinity"}, "-Infinity"},
		{"text", kText, value.Value{Text: "a\"b"}, "a\"b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := string(AppendText([]byte("x"), c.k, c.v)); got != "x"+c.want {
				t.Fatalf("got %q, want %q", got, "x"+c.want)
			}
		})
	}
}

func TestAppendArray(t *testing.T) {
	for _, c := range []struct {
		name string
		k    value.Kind
		v    value.Value
		want string
	}{
		{"floats", arrayOf(kF4), value.Value{Elems: []value.Value{{Float: float64(float32(0.1))}, {Float: math.NaN()}, {Float: math.Inf(1)}, {Null: true}}, Dims: []int{4}}, `[0.1,"NaN","Infinity",null]`},
		{"text", arrayOf(kText), value.Value{Elems: []value.Value{{Text: "a\"b\\c\n\x01<>"}, {Text: ""}}, Dims: []int{1, 2}}, `[["a\"b\\c\n\u0001<>",""]]`},
		{"bytes without dims", arrayOf(kBytes), value.Value{Elems: []value.Value{{Bytes: []byte{0xde, 0xad}}}}, `["dead"]`},
		{"empty", arrayOf(kF4), value.Value{}, "[]"},
		{"ints and bools", arrayOf(kI8), value.Value{Elems: []value.Value{{Int: -1}, {Int: 2}, {Null: true}, {Int: 4}}, Dims: []int{2, 2}}, `[[-1,2],[null,4]]`},
		{"bools", arrayOf(kBool), value.Value{Elems: []value.Value{{Bool: true}, {}}, Dims: []int{2}}, `[true,false]`},
		{"dates", arrayOf(kDate), value.Value{Elems: []value.Value{day(-44, 3, 15), {Infinite: 1}}, Dims: []int{2}}, `["-0044-03-15","infinity"]`},
		{"no element kind", value.Kind{Name: value.Array}, value.Value{Elems: []value.Value{{Text: "x"}}, Dims: []int{1}}, `["x"]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := AppendArray([]byte("x"), c.k, c.v)
			if err != nil || string(got) != "x"+c.want {
				t.Fatalf("got %q, %v; want %q", got, err, "x"+c.want)
			}
		})
	}
}

func TestAppendArrayShape(t *testing.T) {
	for _, c := range []struct {
		v    value.Value
		want string
	}{
		{value.Value{Elems: []value.Value{{}}, Dims: []int{2, 2}}, "an array of dimensions [2 2]: it holds 1 elements, its dimensions call for 4"},
		{value.Value{Elems: []value.Value{{}}, Dims: []int{-1, -1}}, "an array of dimensions [-1 -1]: a dimension is negative"},
	} {
		b, err := AppendArray(nil, arrayOf(kI8), c.v)
		if err == nil || err.Error() != c.want || b != nil {
			t.Errorf("%v: got %q, %v; want the error %q", c.v.Dims, b, err, c.want)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	for in, want := range map[string]string{
		"":                 `""`,
		"plain <>&'":       `"plain <>&'"`,
		"\"\\":             `"\"\\"`,
		"\n\r\t\x00\x1f":   `"\n\r\t\u0000\u001f"`,
		"\x7fé☃😀":          "\"\x7fé☃😀\"",
		"a\xffb\xe2\x98":   "\"a\uFFFDb\uFFFD\uFFFD\"",
		"\u2028 separator": "\"\u2028 separator\"",
	} {
		if got := string(AppendJSONString([]byte("x"), []byte(in))); got != "x"+want {
			t.Errorf("%q: got %q, want %q", in, got, "x"+want)
		}
	}
}

// roundTripCases are values of every kind, each one AppendText (or, for an
// array, AppendArray) then ParseText must give back.
func roundTripCases() []struct {
	k value.Kind
	v value.Value
} {
	type c = struct {
		k value.Kind
		v value.Value
	}
	inf := value.Value{Infinite: 1}
	ninf := value.Value{Infinite: -1}
	return []c{
		{kDate, day(2026, 3, 5)}, {kDate, day(0, 1, 1)}, {kDate, day(-44, 3, 15)}, {kDate, day(-4712, 1, 1)},
		{kDate, day(2024, 2, 29)}, {kDate, day(9999, 12, 31)}, {kDate, day(10000, 1, 1)}, {kDate, day(5874897, 12, 31)},
		{kDate, inf}, {kDate, ninf},
		{kTs, at(2026, 1, 2, 3, 4, 5, 6)}, {kTs, at(-44, 3, 15, 12, 0, 0, 999999)}, {kTs, at(0, 12, 31, 23, 59, 59, 0)},
		{kTs, at(12345, 6, 7, 8, 9, 10, 11)}, {kTs, inf}, {kTs, ninf},
		{kTstz, value.Value{Time: time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.FixedZone("x", 3600))}},
		{kTstz, at(1970, 1, 1, 0, 0, 0, 0)}, {kTstz, at(-1, 2, 3, 4, 5, 6, 7)}, {kTstz, at(20000, 1, 1, 0, 0, 0, 1)},
		{kTstz, inf}, {kTstz, ninf},
		{kTime, value.Value{}}, {kTime, value.Value{Micros: 1}}, {kTime, value.Value{Micros: 86399999999}}, {kTime, value.Value{Micros: 86400e6}},
		{kTimetz, value.Value{Micros: 1, Offset: -(5*3600 + 30*60 + 7)}}, {kTimetz, value.Value{Micros: 3600e6, Offset: 14 * 3600}},
		{kTimetz, value.Value{Micros: 45296789012, Offset: 5*3600 + 45*60}}, {kTimetz, value.Value{Micros: 86400e6, Offset: 59}},
		{kTimetz, value.Value{}},
		{kIvl, value.Value{}}, {kIvl, value.Value{Months: 14, Days: -3, Micros: 4*3600e6 + 5*60e6 + 6500000}},
		{kIvl, value.Value{Months: -1, Micros: -1}}, {kIvl, value.Value{Months: -25, Days: -40, Micros: -(26*3600e6 + 60e6 + 250000)}},
		{kIvl, value.Value{Micros: 123456}}, {kIvl, value.Value{Days: 7}}, {kIvl, value.Value{Months: 12}},
		{kIvl, value.Value{Months: 1, Days: -1, Micros: 1}}, {kIvl, value.Value{Micros: math.MaxInt64}}, {kIvl, value.Value{Micros: math.MinInt64}},
		{kIvl, value.Value{Months: math.MaxInt32, Days: math.MinInt32}},
		{kIvl, inf}, {kIvl, ninf},
		{kF8, value.Value{Float: 0.1}}, {kF8, value.Value{Float: math.Copysign(0, -1)}}, {kF8, value.Value{Float: 5e-324}},
		{kF8, value.Value{Float: math.MaxFloat64}}, {kF8, value.Value{Float: -1.5e300}}, {kF8, value.Value{Float: math.NaN()}},
		{kF8, value.Value{Float: math.Inf(1)}}, {kF8, value.Value{Float: math.Inf(-1)}},
		{kF4, value.Value{Float: float64(float32(0.1))}}, {kF4, value.Value{Float: math.MaxFloat32}},
		{kF4, value.Value{Float: math.SmallestNonzeroFloat32}}, {kF4, value.Value{Float: float64(float32(-16777217))}},
		{kF4, value.Value{Float: math.NaN()}}, {kF4, value.Value{Float: math.Inf(1)}}, {kF4, value.Value{Float: math.Inf(-1)}},
		{kI8, value.Value{Int: math.MinInt64}}, {kI8, value.Value{Int: math.MaxInt64}}, {kI8, value.Value{}},
		{value.Kind{Name: value.Int, Width: 16}, value.Value{Int: -32768}},
		{kU8, value.Value{Uint: math.MaxUint64}}, {kU8, value.Value{}},
		{kBool, value.Value{Bool: true}}, {kBool, value.Value{}},
		{kBytes, value.Value{Bytes: []byte{}}}, {kBytes, value.Value{Bytes: []byte{0, 0xde, 0xad, 0xbe, 0xef, 0xff}}},
		{kDec, value.Value{Text: "-12.50"}}, {value.Kind{Name: value.Decimal, Special: true}, value.Value{Text: "NaN"}},
		{kText, value.Value{Text: ""}}, {kText, value.Value{Text: "infinity"}}, {kText, value.Value{Text: "a \"quoted\" \\ line\n"}},
		{value.Kind{Name: value.UUID}, value.Value{Text: "00000000-0000-0000-0000-000000000001"}},
		{value.Kind{Name: value.JSON}, value.Value{Text: `{"a": [1, null]}`}},
		{value.Kind{Name: value.Enum, Labels: []string{"x", "y"}}, value.Value{Text: "y"}},

		// Arrays: nested, with NULLs, quotes and every kind of element.
		{arrayOf(kI8), value.Value{Elems: []value.Value{{Int: 1}, {Null: true}, {Int: -3}, {Int: math.MaxInt64}, {Int: math.MinInt64}, {Null: true}}, Dims: []int{2, 3}}},
		{arrayOf(kText), value.Value{Elems: []value.Value{{Text: `say "hi"`}, {Null: true}, {Text: "NULL"}, {Text: ""}, {Text: `back\slash, {brace}`}, {Text: "tab\tnew\nline é ☃"}}, Dims: []int{3, 2}}},
		{arrayOf(kText), value.Value{Elems: []value.Value{{Text: "a"}, {Text: "b"}, {Text: "c"}, {Null: true}, {Text: "e"}, {Text: "f"}, {Text: "g"}, {Text: "h"}}, Dims: []int{2, 2, 2}}},
		{arrayOf(kText), value.Value{}},
		{arrayOf(kF8), value.Value{Elems: []value.Value{{Float: 0.1}, {Float: math.NaN()}, {Float: math.Inf(1)}, {Float: math.Inf(-1)}, {Float: math.Copysign(0, -1)}, {Null: true}}, Dims: []int{3, 2}}},
		{arrayOf(kF4), value.Value{Elems: []value.Value{{Float: float64(float32(0.1))}, {Float: math.NaN()}, {Float: math.Inf(-1)}, {Float: math.SmallestNonzeroFloat32}}, Dims: []int{2, 2}}},
		{arrayOf(kBool), value.Value{Elems: []value.Value{{Bool: true}, {Null: true}, {}, {Bool: true}}, Dims: []int{2, 2}}},
		{arrayOf(kBytes), value.Value{Elems: []value.Value{{Bytes: []byte{0xde, 0xad}}, {Bytes: []byte{}}, {Null: true}, {Bytes: []byte{0}}}, Dims: []int{2, 2}}},
		{arrayOf(kDate), value.Value{Elems: []value.Value{day(-44, 3, 15), {Null: true}, inf, day(10000, 1, 1)}, Dims: []int{2, 2}}},
		{arrayOf(kTs), value.Value{Elems: []value.Value{at(2026, 1, 2, 3, 4, 5, 6), ninf}, Dims: []int{1, 2}}},
		{arrayOf(kTstz), value.Value{Elems: []value.Value{at(-1, 2, 3, 4, 5, 6, 7), {Null: true}}, Dims: []int{2, 1}}},
		{arrayOf(kTimetz), value.Value{Elems: []value.Value{{Micros: 1, Offset: -(5*3600 + 30*60 + 7)}, {Null: true}, {Micros: 86400e6, Offset: 3600}, {}}, Dims: []int{2, 2}}},
		{arrayOf(kIvl), value.Value{Elems: []value.Value{{Months: -1, Micros: -1}, {}, {Null: true}, inf}, Dims: []int{2, 2}}},
		{arrayOf(value.Kind{Name: value.Decimal, Special: true}), value.Value{Elems: []value.Value{{Text: "1.50"}, {Text: "-Infinity"}}, Dims: []int{2}}},
		{arrayOf(kU8), value.Value{Elems: []value.Value{{Uint: math.MaxUint64}, {Null: true}}, Dims: []int{2}}},
	}
}

// TestParseTextRoundTrip writes each value, reads it back, and compares the
// two values by their PostgreSQL text renderings.
func TestParseTextRoundTrip(t *testing.T) {
	for _, c := range roundTripCases() {
		var text []byte
		if c.k.Name == value.Array {
			var err error
			if text, err = AppendArray(nil, c.k, c.v); err != nil {
				t.Fatalf("%s: %v", c.k, err)
			}
		} else {
			text = AppendText(nil, c.k, c.v)
		}
		want, err := value.EncodePGText(c.k, c.v)
		if err != nil {
			t.Fatalf("%s %q: the case does not encode: %v", c.k, text, err)
		}
		back, err := ParseText(c.k, string(text))
		if err != nil {
			t.Errorf("%s %q: %v", c.k, text, err)
			continue
		}
		got, err := value.EncodePGText(c.k, back)
		if err != nil || string(got) != string(want) {
			t.Errorf("%s %q: read back as %q (%v), want %q", c.k, text, got, err, want)
		}
		if c.k.Name == value.Float && math.Float64bits(back.Float) != math.Float64bits(c.v.Float) && !math.IsNaN(c.v.Float) {
			t.Errorf("%s %q: read back as %v, want %v", c.k, text, back.Float, c.v.Float)
		}
		if c.k.Name == value.Bytes && back.Bytes == nil {
			t.Errorf("%s %q: read back as NULL bytes", c.k, text)
		}
	}
}

func TestParseTextErrors(t *testing.T) {
	for _, c := range []struct {
		k    value.Kind
		text string
		want string // in the error
	}{
		{kDate, "2023-02-30", "no such day"},
		{kDate, "2023-13-01", "no such day"},
		{kDate, "2023-01", "date"},
		{kDate, "2023-01-x1", "date"},
		{kDate, "Infinity", "date"},
		{kTs, "2023-01-01T00:00:00.000000", "timestamp"},
		{kTs, "2023-01-01 00:60:00.000000", "clock"},
		{kTstz, "2023-01-01 00:00:00.000000Z", "timestamp"},
		{kTime, "24:00:00.000001", "end of the day"},
		{kTime, "12:00:00.1234567", "fraction"},
		{kTime, "12:00", "clock"},
		{kTimetz, "12:00:00.000000", "no offset"},
		{kTimetz, "12:00:00.000000+01:02:03:04", "offset"},
		{kTimetz, "12:00:00.000000+01:x", "offset"},
		{kIvl, "P1X", "interval"},
		{kI8, "1.5", "integer"},
		{kU8, "-1", "unsigned integer"},
		{kI8, "9223372036854775808", "out of range"},
		{kBool, "yes", "boolean"},
		{kF4, "1e39", "out of range"},
		{kF8, "x", "float"},
		{kBytes, "abc", "hex"},
		{arrayOf(kI8), "{1,2}", "array JSON"},
		{arrayOf(kI8), `{"a":1}`, "want a JSON array"},
		{arrayOf(kI8), "[1,2] 3", "text after the array"},
		{arrayOf(kI8), "[[1,2],[3]]", "want an array of 2 at depth 1"},
		{arrayOf(kI8), "[[1],2]", "want an array of 1 at depth 1"},
		{arrayOf(kI8), "[1,[2]]", "where an element is"},
		{arrayOf(kI8), `[1,{"a":2}]`, "where an element is"},
		{arrayOf(kI8), "[1.5]", "integer"},
		{arrayOf(kDate), `["2023-02-30"]`, "no such day"},
	} {
		v, err := ParseText(c.k, c.text)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: got %+v, %v; want an error saying %q", c.k, c.text, v, err, c.want)
		}
	}
}

// ParseDate, ParseClock and the offset of a zoned time read more than the
// forms written: a fraction of fewer digits, a missing + on a far year.
func TestParseLeniency(t *testing.T) {
	if d, err := ParseDate("10000-01-02"); err != nil || !d.Equal(time.Date(10000, 1, 2, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("year 10000 without +: %v %v", d, err)
	}
	if d, err := ParseDate("-0000-01-01"); err != nil || d.Year() != 0 {
		t.Errorf("-0000: %v %v", d, err)
	}
	for in, want := range map[string]int64{
		"00:00:00.000000": 0, "01:02:03.5": 3723500000, "23:59:59": 86399e6, "1:2:3.000004": 3723000004, "24:00:00": 86400e6,
	} {
		if got, err := ParseClock(in); err != nil || got != want {
			t.Errorf("%q: got %d, %v; want %d", in, got, err, want)
		}
	}
	v, err := ParseText(kTimetz, "01:00:00.000000-05")
	if err != nil || v.Micros != 3600e6 || v.Offset != -5*3600 {
		t.Errorf("offset of hours only: %+v %v", v, err)
	}
	v, err = ParseText(arrayOf(kI8), "[[],[]]")
	if err != nil || v.Elems != nil || v.Dims != nil {
		t.Errorf("an array of empty arrays: %+v %v", v, err)
	}
}

// ParseText reads an int by its kind's width and sign, refusing what lies
// outside.
func TestParseIntWidths(t *testing.T) {
	cases := []struct {
		k  value.Kind
		in string
		ok bool
	}{
		{value.Kind{Name: value.Int, Width: 8}, "-128", true},
		{value.Kind{Name: value.Int, Width: 8}, "128", false},
		{value.Kind{Name: value.Int, Width: 8, Unsigned: true}, "255", true},
		{value.Kind{Name: value.Int, Width: 8, Unsigned: true}, "256", false},
		{value.Kind{Name: value.Int, Width: 24}, "-8388608", true},
		{value.Kind{Name: value.Int, Width: 24}, "8388608", false},
		{value.Kind{Name: value.Int, Width: 24, Unsigned: true}, "16777215", true},
		{value.Kind{Name: value.Int, Width: 24, Unsigned: true}, "16777216", false},
		{kU8, "18446744073709551615", true},
	}
	for _, c := range cases {
		v, err := ParseText(c.k, c.in)
		if (err == nil) != c.ok {
			t.Errorf("%s %q: %+v, %v", c.k, c.in, v, err)
			continue
		}
		if c.ok {
			if got := string(AppendText(nil, c.k, v)); got != c.in {
				t.Errorf("%s %q wrote back as %q", c.k, c.in, got)
			}
		}
	}
}

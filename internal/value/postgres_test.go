package value

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

var (
	kInt2      = Kind{Name: Int, Width: 16}
	kInt4      = Kind{Name: Int, Width: 32}
	kInt8      = Kind{Name: Int, Width: 64}
	kNumeric   = Kind{Name: Decimal, Special: true}
	kNumeric20 = Kind{Name: Decimal, Precision: 20, Scale: 4, Special: true}
	kFloat4    = Kind{Name: Float, Width: 32}
	kFloat8    = Kind{Name: Float, Width: 64}
	kBool      = Kind{Name: Bool}
	kText      = Kind{Name: Text}
	kBytes     = Kind{Name: Bytes}
	kDate      = Kind{Name: Date}
	kTime      = Kind{Name: Time}
	kTimetz    = Kind{Name: Time, Zoned: true}
	kTs        = Kind{Name: Timestamp}
	kTstz      = Kind{Name: TimestampTZ}
	kInterval  = Kind{Name: Interval}
	kUUID      = Kind{Name: UUID}
	kJSON      = Kind{Name: JSON}
	kMood      = Kind{Name: Enum, Labels: []string{"sad", "ok", "happy"}}
	kOther     = Kind{Name: Other}
)

func arrayOf(k Kind) Kind { return Kind{Name: Array, Elem: &k} }

func ts(y int, m time.Month, d, h, min, s, us int) time.Time {
	return time.Date(y, m, d, h, min, s, us*1000, time.UTC)
}

func TestFromPostgres(t *testing.T) {
	mood := Kind{Name: Enum}
	cases := []struct {
		text string
		oid  uint32
		want Kind
	}{
		{"smallint", 21, kInt2},
		{"integer", 23, kInt4},
		{"bigint", 20, kInt8},
		{"bigint", 0, kInt8},
		{"numeric(40,20)", 1700, Kind{Name: Decimal, Precision: 40, Scale: 20, Special: true}},
		{"numeric(10)", 0, Kind{Name: Decimal, Precision: 10, Special: true}},
		{"numeric", 1700, kNumeric},
		{"", 1700, kNumeric},
		{"real", 700, kFloat4},
		{"double precision", 0, kFloat8},
		{"boolean", 16, kBool},
		{"text", 25, kText},
		{"character varying(20)", 1043, kText},
		{"character varying", 0, kText},
		{"character(3)", 1042, kText},
		{"name", 19, kText},
		{"bytea", 17, kBytes},
		{"date", 1082, kDate},
		{"time without time zone", 1083, kTime},
		{"time(3) without time zone", 0, kTime},
		{"time with time zone", 1266, kTimetz},
		{"timestamp(3) without time zone", 1114, kTs},
		{"timestamp with time zone", 1184, kTstz},
		{"timestamp(0) with time zone", 0, kTstz},
		{"interval", 1186, kInterval},
		{"interval day to second(3)", 0, kInterval},
		{"uuid", 2950, kUUID},
		{"json", 114, kJSON},
		{"jsonb", 3802, kJSON},
		{"public.mood", 0, mood},
		{"public.mood", 16390, mood},
		{`"My Schema"."Mood.Type"`, 0, mood},
		{"integer[]", 1007, arrayOf(kInt4)},
		{"integer[]", 0, arrayOf(kInt4)},
		{"", 1016, arrayOf(kInt8)},
		{"text[]", 1009, arrayOf(kText)},
		{"numeric(10,2)[]", 1231, arrayOf(Kind{Name: Decimal, Precision: 10, Scale: 2, Special: true})},
		{"public.mood[]", 16389, arrayOf(mood)},
		{"timestamp with time zone[]", 1185, arrayOf(kTstz)},
		{"inet", 869, kOther},
		{"money", 790, kOther},
		{"xml", 142, kOther},
		{"point", 600, kOther},
		{"tsvector", 3614, kOther},
		{"int4range", 3904, kOther},
		{"bit(3)", 1560, kOther},
		{"bit varying(8)", 0, kOther},
		{`"char"`, 18, kOther},
		{"oid", 26, kOther},
		{"inet[]", 1041, arrayOf(kOther)},
		{"box[]", 1020, kOther},
		{"mood", 0, kOther}, // unqualified and unknown: no guess
		{"information_schema.sql_identifier", 13225, kOther},
		{"information_schema.sql_identifier[]", 13224, arrayOf(kOther)},
		// The OID wins over text that names another type.
		{"public.integer", 23, kInt4},
	}
	for _, c := range cases {
		if got := FromPostgres(c.text, c.oid); !reflect.DeepEqual(got, c.want) {
			t.Errorf("FromPostgres(%q, %d) = %s %+v, want %s", c.text, c.oid, got, got, c.want)
		}
	}
}

func TestKindJSON(t *testing.T) {
	k := arrayOf(Kind{Name: Decimal, Precision: 40, Scale: 20, Special: true})
	b, err := json.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"name":"array","elem":{"name":"decimal","precision":40,"scale":20,"special":true}}`
	if string(b) != want {
		t.Fatalf("json %s, want %s", b, want)
	}
	var back Kind
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, k) {
		t.Fatalf("read back %+v, %v", back, err)
	}
	if s := k.String(); s != "array(decimal(40,20,special))" {
		t.Errorf("String() = %q", s)
	}
}

// textCase is PostgreSQL text of kind k, the value it decodes to, and the
// text EncodePGText prints for that value ("" when it is the input).
type textCase struct {
	k    Kind
	in   string
	want Value
	out  string
}

func textCases() []textCase {
	bc44 := time.Date(-43, 3, 15, 0, 0, 0, 0, time.UTC)
	return []textCase{
		// int
		{kInt2, "32767", Value{Int: 32767}, ""},
		{kInt2, "-32768", Value{Int: -32768}, ""},
		{kInt4, "-2147483648", Value{Int: math.MinInt32}, ""},
		{kInt8, "9223372036854775807", Value{Int: math.MaxInt64}, ""},
		{kInt8, "-9223372036854775808", Value{Int: math.MinInt64}, ""},
		{kInt8, "9007199254740993", Value{Int: 1<<53 + 1}, ""},
		{kInt4, "+5", Value{Int: 5}, "5"},
		{Kind{Name: Int, Width: 64, Unsigned: true}, "18446744073709551615", Value{Uint: math.MaxUint64}, ""},
		// decimal
		{kNumeric, "0", Value{Text: "0"}, ""},
		{kNumeric, "12345678901234567890.12345", Value{Text: "12345678901234567890.12345"}, ""},
		{kNumeric, "-0.00001", Value{Text: "-0.00001"}, ""},
		{kNumeric20, "1234.5600", Value{Text: "1234.5600"}, ""},
		{kNumeric, "-12.3400", Value{Text: "-12.3400"}, ""},
		{kNumeric, "0.0000", Value{Text: "0.0000"}, ""},
		{kNumeric, "NaN", Value{Text: "NaN"}, ""},
		{kNumeric, "Infinity", Value{Text: "Infinity"}, ""},
		{kNumeric, "-Infinity", Value{Text: "-Infinity"}, ""},
		{kNumeric, "nan", Value{Text: "NaN"}, "NaN"},
		{kNumeric, "-0.00", Value{Text: "0.00"}, "0.00"},
		{kNumeric, "007.50", Value{Text: "7.50"}, "7.50"},
		{kNumeric, ".5", Value{Text: "0.5"}, "0.5"},
		{kNumeric, "+1.", Value{Text: "1"}, "1"},
		{kNumeric, "99999999999999999999999999999999999999.99999999999999999999",
			Value{Text: "99999999999999999999999999999999999999.99999999999999999999"}, ""},
		// float
		{kFloat8, "0.25", Value{Float: 0.25}, ""},
		{kFloat8, "0", Value{Float: 0}, ""},
		{kFloat8, "-0", Value{Float: math.Copysign(0, -1)}, ""},
		{kFloat8, "NaN", Value{Float: math.NaN()}, ""},
		{kFloat8, "Infinity", Value{Float: math.Inf(1)}, ""},
		{kFloat8, "-Infinity", Value{Float: math.Inf(-1)}, ""},
		{kFloat8, "0.1", Value{Float: 0.1}, ""},
		{kFloat8, "1e+100", Value{Float: 1e100}, ""},
		{kFloat8, "1.7976931348623157e+308", Value{Float: math.MaxFloat64}, ""},
		{kFloat8, "5e-324", Value{Float: 5e-324}, ""},
		{kFloat8, "123456789012345.67", Value{Float: 123456789012345.67}, ""},
		{kFloat8, "100000000000000", Value{Float: 1e14}, ""},
		{kFloat8, "1e+15", Value{Float: 1e15}, ""},
		{kFloat8, "0.0001", Value{Float: 0.0001}, ""},
		{kFloat8, "1e-05", Value{Float: 1e-5}, ""},
		{kFloat8, "-1.5e-07", Value{Float: -1.5e-7}, ""},
		{kFloat8, "1E5", Value{Float: 1e5}, "100000"},
		{kFloat4, "1.1", Value{Float: float64(float32(1.1))}, ""},
		{kFloat4, "123456", Value{Float: 123456}, ""},
		{kFloat4, "1e+06", Value{Float: 1e6}, ""},
		{kFloat4, "3.4028235e+38", Value{Float: math.MaxFloat32}, ""},
		{kFloat4, "1e-45", Value{Float: float64(math.SmallestNonzeroFloat32)}, ""},
		{kFloat4, "NaN", Value{Float: math.NaN()}, ""},
		// bool
		{kBool, "t", Value{Bool: true}, ""},
		{kBool, "f", Value{}, ""},
		{kBool, "true", Value{Bool: true}, "t"},
		// text, enum, json, other
		{kText, "", Value{}, ""},
		{kText, "plain", Value{Text: "plain"}, ""},
		{kText, "tab\tnewline\n", Value{Text: "tab\tnewline\n"}, ""},
		{kText, "日本語 ✓", Value{Text: "日本語 ✓"}, ""},
		{kMood, "happy", Value{Text: "happy"}, ""},
		{kJSON, `{"a": [1, 2]}`, Value{Text: `{"a": [1, 2]}`}, ""},
		{kOther, "(1.5,-2)", Value{Text: "(1.5,-2)"}, ""},
		{kOther, "192.168.0.1/24", Value{Text: "192.168.0.1/24"}, ""},
		// bytes
		{kBytes, `\x`, Value{Bytes: []byte{}}, ""},
		{kBytes, `\x0001feff`, Value{Bytes: []byte{0, 1, 0xfe, 0xff}}, ""},
		{kBytes, `\xDEADBEEF`, Value{Bytes: []byte{0xde, 0xad, 0xbe, 0xef}}, `\xdeadbeef`},
		{kBytes, `a\\b\001`, Value{Bytes: []byte{'a', '\\', 'b', 1}}, `\x615c6201`},
		// date
		{kDate, "2024-01-02", Value{Time: ts(2024, 1, 2, 0, 0, 0, 0)}, ""},
		{kDate, "2000-02-29", Value{Time: ts(2000, 2, 29, 0, 0, 0, 0)}, ""},
		{kDate, "0044-03-15 BC", Value{Time: bc44}, ""},
		{kDate, "0001-01-01", Value{Time: ts(1, 1, 1, 0, 0, 0, 0)}, ""},
		{kDate, "0001-12-31 BC", Value{Time: ts(0, 12, 31, 0, 0, 0, 0)}, ""},
		{kDate, "4714-11-24 BC", Value{Time: ts(-4713, 11, 24, 0, 0, 0, 0)}, ""},
		{kDate, "5874897-12-31", Value{Time: ts(5874897, 12, 31, 0, 0, 0, 0)}, ""},
		{kDate, "infinity", Value{Infinite: 1}, ""},
		{kDate, "-infinity", Value{Infinite: -1}, ""},
		// time
		{kTime, "00:00:00", Value{}, ""},
		{kTime, "23:59:59.999999", Value{Micros: 86399999999}, ""},
		{kTime, "24:00:00", Value{Micros: 86400000000}, ""},
		{kTime, "03:04:05.5", Value{Micros: 11045500000}, ""},
		{kTimetz, "03:04:05.123456+05:30", Value{Micros: 11045123456, Offset: 19800}, ""},
		{kTimetz, "00:00:00+00", Value{}, ""},
		{kTimetz, "12:00:00-08", Value{Micros: 43200000000, Offset: -28800}, ""},
		{kTimetz, "12:00:00+05:30:15", Value{Micros: 43200000000, Offset: 19815}, ""},
		{kTimetz, "12:00:00-15:59:59", Value{Micros: 43200000000, Offset: -57599}, ""},
		// timestamp
		{kTs, "2024-01-02 03:04:05.123456", Value{Time: ts(2024, 1, 2, 3, 4, 5, 123456)}, ""},
		{kTs, "2024-01-02 03:04:05", Value{Time: ts(2024, 1, 2, 3, 4, 5, 0)}, ""},
		{kTs, "1999-12-31 23:59:59.000001", Value{Time: ts(1999, 12, 31, 23, 59, 59, 1)}, ""},
		{kTs, "2024-01-02T03:04:05.1", Value{Time: ts(2024, 1, 2, 3, 4, 5, 100000)}, "2024-01-02 03:04:05.1"},
		{kTs, "0044-03-15 03:04:05 BC", Value{Time: bc44.Add(3*time.Hour + 4*time.Minute + 5*time.Second)}, ""},
		{kTs, "4714-11-24 00:00:00 BC", Value{Time: ts(-4713, 11, 24, 0, 0, 0, 0)}, ""},
		{kTs, "294276-12-31 23:59:59.999999", Value{Time: ts(294276, 12, 31, 23, 59, 59, 999999)}, ""},
		{kTs, "infinity", Value{Infinite: 1}, ""},
		{kTs, "-infinity", Value{Infinite: -1}, ""},
		{kTstz, "2024-01-02 03:04:05.123456+00", Value{Time: ts(2024, 1, 2, 3, 4, 5, 123456)}, ""},
		{kTstz, "2024-01-02 05:34:05+02:30", Value{Time: ts(2024, 1, 2, 3, 4, 5, 0)}, "2024-01-02 03:04:05+00"},
		{kTstz, "1970-01-01 00:00:00+00", Value{Time: time.Unix(0, 0).UTC()}, ""},
		{kTstz, "0044-03-15 03:04:05+00 BC", Value{Time: bc44.Add(3*time.Hour + 4*time.Minute + 5*time.Second)}, ""},
		{kTstz, "-infinity", Value{Infinite: -1}, ""},
		// interval, iso_8601 style
		{kInterval, "PT0S", Value{}, ""},
		{kInterval, "P1Y2M3DT4H5M6.789S", Value{Months: 14, Days: 3, Micros: 14706789000}, ""},
		{kInterval, "P-1Y-2M3DT-4H-5M-6S", Value{Months: -14, Days: 3, Micros: -14706000000}, ""},
		{kInterval, "P-1M-1DT-0.000001S", Value{Months: -1, Days: -1, Micros: -1}, ""},
		{kInterval, "PT-2562047788H-54.775808S", Value{Micros: math.MinInt64}, ""},
		{kInterval, "PT2562047788H54.775807S", Value{Micros: math.MaxInt64}, ""},
		{kInterval, "P178956970Y7M", Value{Months: math.MaxInt32}, ""},
		{kInterval, "P-178956970Y-8M", Value{Months: math.MinInt32}, ""},
		{kInterval, "P2147483647D", Value{Days: math.MaxInt32}, ""},
		{kInterval, "P1W", Value{Days: 7}, "P7D"},
		{kInterval, "infinity", Value{Infinite: 1}, ""},
		{kInterval, "-infinity", Value{Infinite: -1}, ""},
		// What PostgreSQL 17 keeps for infinity, as older versions print it.
		{kInterval, "P178956970Y7M2147483647DT2562047788H54.775807S", Value{Infinite: 1}, "infinity"},
		// interval, postgres style
		{kInterval, "1 year 2 mons 3 days 04:05:06.789", Value{Months: 14, Days: 3, Micros: 14706789000}, "P1Y2M3DT4H5M6.789S"},
		{kInterval, "-1 years -2 mons +3 days -04:05:06", Value{Months: -14, Days: 3, Micros: -14706000000}, "P-1Y-2M3DT-4H-5M-6S"},
		{kInterval, "-00:00:01", Value{Micros: -1000000}, "PT-1S"},
		{kInterval, "1 day -00:00:01", Value{Days: 1, Micros: -1000000}, "P1DT-1S"},
		{kInterval, "00:00:00", Value{}, "PT0S"},
		{kInterval, "1 mon", Value{Months: 1}, "P1M"},
		// uuid
		{kUUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", Value{Text: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}, ""},
		{kUUID, "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", Value{Text: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{kUUID, "{a0eebc999c0b4ef8bb6d6bb9bd380a11}", Value{Text: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{kUUID, "a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11", Value{Text: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		// arrays
		{arrayOf(kInt4), "{1,2,NULL}", Value{Elems: []Value{{Int: 1}, {Int: 2}, {Null: true}}, Dims: []int{3}}, ""},
		{arrayOf(kInt4), "{}", Value{}, ""},
		{arrayOf(kInt4), "{{1,2},{3,4}}", Value{Elems: []Value{{Int: 1}, {Int: 2}, {Int: 3}, {Int: 4}}, Dims: []int{2, 2}}, ""},
		{arrayOf(kInt4), "{{{1},{2}},{{3},{4}}}", Value{Elems: []Value{{Int: 1}, {Int: 2}, {Int: 3}, {Int: 4}}, Dims: []int{2, 2, 1}}, ""},
		{arrayOf(kInt4), " { 1 , 2 } ", Value{Elems: []Value{{Int: 1}, {Int: 2}}, Dims: []int{2}}, "{1,2}"},
		{arrayOf(kInt4), "[0:1]={7,8}", Value{Elems: []Value{{Int: 7}, {Int: 8}}, Dims: []int{2}}, "{7,8}"},
		{arrayOf(kInt4), "{null}", Value{Elems: []Value{{Null: true}}, Dims: []int{1}}, "{NULL}"},
		{arrayOf(kInt4), "{{},{}}", Value{}, "{}"},
		{arrayOf(kText), `{"a,b","say \"hi\"","back\\slash",""," lead",NULL,"NULL",plain,"{}"}`,
			Value{Elems: []Value{{Text: "a,b"}, {Text: `say "hi"`}, {Text: `back\slash`}, {}, {Text: " lead"},
				{Null: true}, {Text: "NULL"}, {Text: "plain"}, {Text: "{}"}}, Dims: []int{9}}, ""},
		{arrayOf(kText), `{a b,  c\ }`, Value{Elems: []Value{{Text: "a b"}, {Text: "c "}}, Dims: []int{2}}, `{"a b","c "}`},
		{arrayOf(kText), `{\N\U\L\L}`, Value{Elems: []Value{{Text: "NULL"}}, Dims: []int{1}}, `{"NULL"}`},
		{arrayOf(kText), "{\"é\tü\"}", Value{Elems: []Value{{Text: "é\tü"}}, Dims: []int{1}}, ""},
		{arrayOf(kNumeric), "{1.50,NaN,-Infinity}", Value{Elems: []Value{{Text: "1.50"}, {Text: "NaN"}, {Text: "-Infinity"}}, Dims: []int{3}}, ""},
		{arrayOf(kFloat8), "{NaN,-0,1e+100}", Value{Elems: []Value{{Float: math.NaN()}, {Float: math.Copysign(0, -1)}, {Float: 1e100}}, Dims: []int{3}}, ""},
		{arrayOf(kBool), "{t,f}", Value{Elems: []Value{{Bool: true}, {}}, Dims: []int{2}}, ""},
		{arrayOf(kBytes), `{"\\x0102","\\x"}`, Value{Elems: []Value{{Bytes: []byte{1, 2}}, {Bytes: []byte{}}}, Dims: []int{2}}, ""},
		{arrayOf(kTstz), `{"2024-01-02 03:04:05+00",infinity}`, Value{Elems: []Value{{Time: ts(2024, 1, 2, 3, 4, 5, 0)}, {Infinite: 1}}, Dims: []int{2}}, ""},
		{arrayOf(kDate), `{2024-01-02,"0044-03-15 BC"}`, Value{Elems: []Value{{Time: ts(2024, 1, 2, 0, 0, 0, 0)}, {Time: bc44}}, Dims: []int{2}}, ""},
		{arrayOf(kInterval), `{PT0S,P1D}`, Value{Elems: []Value{{}, {Days: 1}}, Dims: []int{2}}, ""},
		{arrayOf(kUUID), `{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}`, Value{Elems: []Value{{Text: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}}, Dims: []int{1}}, ""},
		{arrayOf(kMood), "{sad,happy}", Value{Elems: []Value{{Text: "sad"}, {Text: "happy"}}, Dims: []int{2}}, ""},
		{arrayOf(kJSON), `{"{\"a\": 1}",null}`, Value{Elems: []Value{{Text: `{"a": 1}`}, {Null: true}}, Dims: []int{2}}, `{"{\"a\": 1}",NULL}`},
	}
}

func TestTextRoundTrip(t *testing.T) {
	for _, c := range textCases() {
		got, err := DecodePGText(c.k, []byte(c.in))
		if err != nil {
			t.Errorf("%s %q: %v", c.k, c.in, err)
			continue
		}
		if !sameValue(got, c.want) {
			t.Errorf("%s %q decodes to %s, want %s", c.k, c.in, show(got), show(c.want))
			continue
		}
		out, err := EncodePGText(c.k, got)
		if err != nil {
			t.Errorf("%s %q: encode: %v", c.k, c.in, err)
			continue
		}
		want := c.out
		if want == "" {
			want = c.in
		}
		if string(out) != want {
			t.Errorf("%s %q encodes as %q, want %q", c.k, c.in, out, want)
		}
		back, err := DecodePGText(c.k, out)
		if err != nil || !sameValue(back, got) {
			t.Errorf("%s %q: re-decoding %q gives %s, %v", c.k, c.in, out, show(back), err)
		}
	}
}

func TestDecodeTextErrors(t *testing.T) {
	cases := []struct {
		k  Kind
		in string
	}{
		{kInt2, "32768"}, {kInt4, "1.5"}, {kInt8, ""}, {kInt8, "9223372036854775808"}, {kInt4, "abc"},
		{kNumeric, "1e5"}, {kNumeric, "1.2.3"}, {kNumeric, ""}, {kNumeric, "-"}, {kNumeric, "."}, {kNumeric, "1 "},
		{Kind{Name: Decimal}, "NaN"},
		{kFloat8, "1e400"}, {kFloat8, "0x1p-2"}, {kFloat8, "abc"}, {kFloat8, "1_0"}, {kFloat8, ""}, {kFloat4, "1e39"},
		{kBool, "yes"}, {kBool, ""},
		{kBytes, `\x0`}, {kBytes, `\xzz`}, {kBytes, `\q`}, {kBytes, `\`},
		{kDate, "2024-02-30"}, {kDate, "0000-01-01"}, {kDate, "2024-1-2"}, {kDate, "5874898-01-01"},
		{kDate, "4714-11-23 BC"}, {kDate, "2024-01-02 "}, {kDate, ""},
		{kTime, "25:00:00"}, {kTime, "24:00:01"}, {kTime, "12:60:00"}, {kTime, "12:00:00.1234567"}, {kTime, "12:00"},
		{kTime, "12:00:00+00"}, {kTimetz, "12:00:00"}, {kTimetz, "12:00:00+16"},
		{kTs, "2024-01-02 03:04:05+00"}, {kTs, "2024-01-02"}, {kTs, "294277-01-01 00:00:00"},
		{kTs, "4714-11-23 23:59:59 BC"}, {kTs, "2024-01-02 24:00:00"}, {kTstz, "2024-01-02 03:04:05+99"},
		{kInterval, "P"}, {kInterval, "P1.5D"}, {kInterval, "1 fortnight"}, {kInterval, "P178956971Y"},
		{kInterval, "PT9223372036854775807S"}, {kInterval, ""}, {kInterval, "1"}, {kInterval, "PT1"},
		{kInterval, "P2147483648D"}, {kInterval, "00:60:00"},
		{kUUID, "a0eebc99"}, {kUUID, "g0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}, {kUUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11ff"},
		{kUUID, "-a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{arrayOf(kInt4), "{1,2"}, {arrayOf(kInt4), "{1,,2}"}, {arrayOf(kInt4), "{{1},2}"}, {arrayOf(kInt4), "{1,{2}}"},
		{arrayOf(kInt4), "{{1,2},{3}}"}, {arrayOf(kInt4), "1,2"}, {arrayOf(kInt4), "{1}x"}, {arrayOf(kInt4), "{1,x}"},
		{arrayOf(kInt4), "[1:2]={1}"}, {arrayOf(kInt4), "{{{{{{{1}}}}}}}"}, {arrayOf(kInt4), ""},
		{arrayOf(kText), `{"a}`}, {arrayOf(kText), `{a"b}`}, {arrayOf(kText), `{{},1}`}, {arrayOf(kText), `{a\`},
		{Kind{Name: Array}, "{1}"}, {arrayOf(arrayOf(kInt4)), "{1}"},
		{Kind{Name: "nonsense"}, "1"},
	}
	for _, c := range cases {
		v, err := DecodePGText(c.k, []byte(c.in))
		if err == nil {
			t.Errorf("%s %q decodes to %s; want an error", c.k, c.in, show(v))
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.k.String()) || !strings.Contains(msg, textExcerpt([]byte(c.in))) {
			t.Errorf("%s %q: error %q does not name the kind and the text", c.k, c.in, msg)
		}
	}
	long := strings.Repeat("9", 5000)
	_, err := DecodePGText(kInt8, []byte(long))
	if err == nil || len(err.Error()) > 200 || !strings.Contains(err.Error(), "5000 bytes") {
		t.Errorf("a long bad value's error is not cut short: %v", err)
	}
	_, err = DecodePGText(arrayOf(kInt4), []byte("{1,x}"))
	if err == nil || !strings.Contains(err.Error(), "element 2") {
		t.Errorf("a bad element's error does not say which: %v", err)
	}
}

func TestEncodeTextErrors(t *testing.T) {
	cases := []struct {
		k Kind
		v Value
	}{
		{kInt4, Value{Null: true}},
		{kFloat4, Value{Float: 0.1}},
		{kNumeric, Value{Text: "abc"}},
		{Kind{Name: Decimal}, Value{Text: "NaN"}},
		{kTs, Value{Time: time.Date(2024, 1, 2, 3, 4, 5, 1, time.UTC)}},
		{kTs, Value{Time: time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{kDate, Value{Time: ts(2024, 1, 2, 3, 0, 0, 0)}},
		{kDate, Value{Time: ts(5874898, 1, 1, 0, 0, 0, 0)}},
		{kTime, Value{Micros: -1}},
		{kTime, Value{Micros: 1, Offset: 3600}},
		{kTimetz, Value{Offset: 16 * 3600}},
		{kUUID, Value{Text: "nope"}},
		{arrayOf(kInt4), Value{Elems: []Value{{Int: 1}}, Dims: []int{2}}},
		{arrayOf(kInt4), Value{Elems: []Value{{Int: 1}}}},
		{arrayOf(kInt4), Value{Dims: []int{0}}},
		{arrayOf(kFloat4), Value{Elems: []Value{{Float: 0.1}}, Dims: []int{1}}},
		{Kind{Name: Array}, Value{}},
		{Kind{Name: "nonsense"}, Value{}},
	}
	for _, c := range cases {
		out, err := EncodePGText(c.k, c.v)
		if err == nil {
			t.Errorf("%s %s encodes as %q; want an error", c.k, show(c.v), out)
		} else if !strings.Contains(err.Error(), c.k.String()) {
			t.Errorf("%s: error %q does not name the kind", c.k, err)
		}
	}
}

// A Time in another location encodes by its instant.
func TestEncodeTimestampLocation(t *testing.T) {
	loc := time.FixedZone("x", 5*3600+1800)
	v := Value{Time: time.Date(2024, 1, 2, 8, 34, 5, 0, loc)}
	out, err := EncodePGText(kTstz, v)
	if err != nil || string(out) != "2024-01-02 03:04:05+00" {
		t.Fatalf("got %q, %v", out, err)
	}
}

package value

import (
	"math"
	"strings"
	"testing"
	"time"
)

// binaryCase is a hand-built PostgreSQL binary value of kind k and type
// oid, and the text PostgreSQL prints for the same value.
type binaryCase struct {
	k    Kind
	oid  uint32
	data []byte
	text string
}

func binaryCases() []binaryCase {
	bc44 := time.Date(-43, 3, 15, 3, 4, 5, 0, time.UTC)
	moment := ts(2024, 1, 2, 3, 4, 5, 123456)
	return []binaryCase{
		{kInt2, 21, be16(math.MinInt16), "-32768"},
		{kInt4, 23, be32(math.MaxInt32), "2147483647"},
		{kInt8, 20, be64(math.MinInt64), "-9223372036854775808"},
		{kInt8, 20, be64(math.MaxInt64), "9223372036854775807"},
		{kInt8, 20, be64(1<<53 + 1), "9007199254740993"},
		{kInt4, 16400, be32(7), "7"}, // a domain over int4
		{Kind{Name: Int}, 0, be16(-2), "-2"},

		{kFloat4, 700, f4(1.1), "1.1"},
		{kFloat4, 700, be32(0x7fc00000), "NaN"},
		{kFloat4, 700, be32(-0x800000), "-Infinity"}, // ff800000
		{kFloat8, 701, f8bits(0x7ff8000000000000), "NaN"},
		{kFloat8, 701, f8bits(0x8000000000000000), "-0"},
		{kFloat8, 701, f8bits(0x7ff0000000000000), "Infinity"},
		{kFloat8, 701, f8bits(0xfff0000000000000), "-Infinity"},
		{kFloat8, 701, f8(5e-324), "5e-324"},
		{kFloat8, 701, f8(0.25), "0.25"},

		{kNumeric, 1700, numericBin("12345678901234567890.12345"), "12345678901234567890.12345"},
		{kNumeric, 1700, numericBin("0"), "0"},
		{kNumeric, 1700, numericBin("0.0000"), "0.0000"},
		{kNumeric20, 1700, numericBin("1234.5600"), "1234.5600"},
		{kNumeric, 1700, numericBin("-0.00001"), "-0.00001"},
		{kNumeric, 1700, numericBin("100000000"), "100000000"},
		{kNumeric, 1700, numericBin("99999999999999999999999999999999999999.99999999999999999999"),
			"99999999999999999999999999999999999999.99999999999999999999"},
		// The two examples docs/chain-format.md spells out byte by byte.
		{kNumeric, 1700, []byte{0, 2, 0, 0, 0x40, 0, 0, 4, 0, 0x0c, 0x0d, 0x48}, "-12.3400"},
		{kNumeric, 1700, []byte{0, 1, 0xff, 0xfe, 0, 0, 0, 5, 0x03, 0xe8}, "0.00001"},
		{kNumeric, 1700, numericSpecial(0xC000), "NaN"},
		{kNumeric, 1700, numericSpecial(0xD000), "Infinity"},
		{kNumeric, 1700, numericSpecial(0xF000), "-Infinity"},
		// Digits beyond the display scale are dropped, as numeric_recv
		// truncates them; what is left of a negative may be zero.
		{kNumeric, 1700, cat(be16(2), be16(0), be16(0), be16(2), be16(1), be16(2345)), "1.23"},
		{kNumeric, 1700, cat(be16(1), be16(-1), be16(0x4000), be16(2), be16(10)), "0.00"},

		{kBool, 16, []byte{1}, "t"},
		{kBool, 16, []byte{0}, "f"},

		{kText, 25, []byte("plain"), "plain"},
		{kText, 25, []byte{}, ""},
		{kText, 1043, []byte("日本語 ✓"), "日本語 ✓"},
		{kText, 1042, []byte("ab  "), "ab  "},
		{kText, 19, []byte("relname"), "relname"},
		{kMood, 16390, []byte("happy"), "happy"},

		{kBytes, 17, []byte{}, `\x`},
		{kBytes, 17, []byte{0, 1, 0xfe, 0xff}, `\x0001feff`},

		{kDate, 1082, dateBin(ts(2024, 1, 2, 0, 0, 0, 0)), "2024-01-02"},
		{kDate, 1082, dateBin(ts(1999, 12, 31, 0, 0, 0, 0)), "1999-12-31"},
		{kDate, 1082, dateBin(time.Date(-43, 3, 15, 0, 0, 0, 0, time.UTC)), "0044-03-15 BC"},
		{kDate, 1082, be32(math.MaxInt32), "infinity"},
		{kDate, 1082, be32(math.MinInt32), "-infinity"},
		{kDate, 1082, be32(-2451545), "4714-11-24 BC"},

		{kTime, 1083, be64(0), "00:00:00"},
		{kTime, 1083, be64(86400000000), "24:00:00"},
		{kTime, 1083, be64(11045123456), "03:04:05.123456"},
		{kTimetz, 1266, timetzBin(11045123456, -19800), "03:04:05.123456+05:30"},
		{kTimetz, 1266, timetzBin(43200000000, 28800), "12:00:00-08"},
		{kTimetz, 1266, timetzBin(0, 0), "00:00:00+00"},

		{kTs, 1114, tsBin(moment), "2024-01-02 03:04:05.123456"},
		{kTs, 1114, tsBin(bc44), "0044-03-15 03:04:05 BC"},
		{kTs, 1114, tsBin(ts(1999, 12, 31, 23, 59, 59, 999999)), "1999-12-31 23:59:59.999999"},
		{kTs, 1114, be64(math.MaxInt64), "infinity"},
		{kTs, 1114, be64(math.MinInt64), "-infinity"},
		{kTs, 1114, be64(-211813488000000000), "4714-11-24 00:00:00 BC"},
		{kTs, 1114, be64(9223371331199999999), "294276-12-31 23:59:59.999999"},
		{kTstz, 1184, tsBin(moment), "2024-01-02 03:04:05.123456+00"},
		{kTstz, 1184, be64(0), "2000-01-01 00:00:00+00"},
		{kTstz, 1184, tsBin(time.Unix(0, 0)), "1970-01-01 00:00:00+00"},
		{kTstz, 1184, be64(math.MaxInt64), "infinity"},

		{kInterval, 1186, intervalBin(14706789000, 3, 14), "P1Y2M3DT4H5M6.789S"},
		{kInterval, 1186, intervalBin(-1, -1, -1), "P-1M-1DT-0.000001S"},
		{kInterval, 1186, intervalBin(0, 0, 0), "PT0S"},
		{kInterval, 1186, intervalBin(math.MinInt64, 0, 0), "PT-2562047788H-54.775808S"},
		{kInterval, 1186, intervalBin(1500000, 2, 1), "1 mon 2 days 00:00:01.5"},
		{kInterval, 1186, intervalBin(math.MaxInt64, math.MaxInt32, math.MaxInt32), "infinity"},
		{kInterval, 1186, intervalBin(math.MinInt64, math.MinInt32, math.MinInt32), "-infinity"},

		{kUUID, 2950, uuidBin("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{kUUID, 2950, uuidBin("ffffffff-ffff-ffff-ffff-ffffffffffff"), "ffffffff-ffff-ffff-ffff-ffffffffffff"},

		{kJSON, 114, []byte(`{"a": [1, 2]}`), `{"a": [1, 2]}`},
		{kJSON, 114, []byte(` {}`), ` {}`},
		{kJSON, 3802, append([]byte{1}, `{"a": [1, 2]}`...), `{"a": [1, 2]}`},
		{kJSON, 16401, append([]byte{1}, `"str"`...), `"str"`}, // a domain over jsonb
		{kJSON, 16402, []byte(`"str"`), `"str"`},               // a domain over json

		{arrayOf(kInt4), 1007, arrayBin(23, []int{3}, [][]byte{be32(1), nil, be32(3)}), "{1,NULL,3}"},
		{arrayOf(kInt4), 1007, arrayBin(23, nil, nil), "{}"},
		{arrayOf(kInt4), 1007, arrayBin(23, []int{0}, nil), "{}"},
		{arrayOf(kInt4), 1007, arrayBin(23, []int{2, 2}, [][]byte{be32(1), be32(2), be32(3), be32(4)}), "{{1,2},{3,4}}"},
		{arrayOf(kText), 1009, arrayBin(25, []int{4}, [][]byte{[]byte("a,b"), {}, nil, []byte(`q"\`)}), `{"a,b","",NULL,"q\"\\"}`},
		{arrayOf(kNumeric), 1231, arrayBin(1700, []int{2}, [][]byte{numericBin("1.50"), numericSpecial(0xC000)}), "{1.50,NaN}"},
		{arrayOf(kMood), 16389, arrayBin(16390, []int{2}, [][]byte{[]byte("sad"), []byte("happy")}), "{sad,happy}"},
		{arrayOf(kTstz), 1185, arrayBin(1184, []int{2}, [][]byte{tsBin(moment), be64(math.MinInt64)}), `{"2024-01-02 03:04:05.123456+00",-infinity}`},
		{arrayOf(kFloat8), 1022, arrayBin(701, []int{1}, [][]byte{f8bits(0x7ff8000000000000)}), "{NaN}"},
		{arrayOf(kBytes), 1001, arrayBin(17, []int{1}, [][]byte{{}}), `{"\\x"}`},
	}
}

func TestBinaryMatchesText(t *testing.T) {
	for _, c := range binaryCases() {
		got, err := DecodePGBinary(c.k, c.oid, c.data)
		if err != nil {
			t.Errorf("%s %x: %v", c.k, c.data, err)
			continue
		}
		want, err := DecodePGText(c.k, []byte(c.text))
		if err != nil {
			t.Errorf("%s text %q: %v", c.k, c.text, err)
			continue
		}
		if !sameValue(got, want) {
			t.Errorf("%s %x decodes to %s; the text %q to %s", c.k, c.data, show(got), c.text, show(want))
			continue
		}
		out, err := EncodePGText(c.k, got)
		if err != nil {
			t.Errorf("%s %x: encode: %v", c.k, c.data, err)
			continue
		}
		if back, err := DecodePGText(c.k, out); err != nil || !sameValue(back, got) {
			t.Errorf("%s %x: its text %q reads back as %s, %v", c.k, c.data, out, show(back), err)
		}
	}
}

// The decoded bytes are the caller's to keep: they do not alias the input.
func TestBinaryBytesCopied(t *testing.T) {
	in := []byte{1, 2, 3}
	v, err := DecodePGBinary(kBytes, 17, in)
	if err != nil {
		t.Fatal(err)
	}
	in[0] = 9
	if v.Bytes[0] != 1 {
		t.Fatal("decoded bytes alias the input")
	}
}

func TestDecodeBinaryErrors(t *testing.T) {
	cases := []struct {
		k    Kind
		oid  uint32
		data []byte
		want string
	}{
		{kInt4, 23, []byte{0, 0, 1}, "want 4 bytes"},
		{kInt4, 20, be32(1), "want 8 bytes"},
		{Kind{Name: Int}, 0, []byte{1, 2, 3}, "want"},
		{kFloat8, 701, f4(1), "want 8 bytes"},
		{kBool, 16, nil, "want 1 byte"},
		{kOther, 869, []byte{2, 32, 0, 4, 10, 0, 0, 1}, "not supported"},
		{kInt4, 25, be32(1), "not of this kind"},
		{kNumeric, 1700, []byte{0, 1, 0}, "shorter"},
		{kNumeric, 1700, cat(be16(1), be16(0), be16(0), be16(0)), "do not fit"},
		{kNumeric, 1700, cat(be16(0), be16(0), be16(0x1234), be16(0)), "sign"},
		{kNumeric, 1700, cat(be16(1), be16(0), be16(0), be16(0), be16(10000)), "base 10000"},
		{kNumeric, 1700, cat(be16(0), be16(0), be16(0), be16(-1)), "scale"},
		{Kind{Name: Decimal}, 1700, numericSpecial(0xC000), "no NaN"},
		{kDate, 1082, be32(2145031949), "out of range"},
		{kDate, 1082, be32(-2451546), "out of range"},
		{kTime, 1083, be64(86400000001), "out of range"},
		{kTimetz, 1266, timetzBin(0, 57600), "out of range"},
		{kTimetz, 1266, be64(0), "want 12 bytes"},
		{kTs, 1114, be64(9223371331200000000), "out of range"},
		{kTs, 1114, be64(-211813488000000001), "out of range"},
		{kInterval, 1186, be64(0), "want 16 bytes"},
		{kUUID, 2950, []byte{1}, "want 16 bytes"},
		{kJSON, 3802, []byte(`{}`), "version byte"},
		{arrayOf(kInt4), 1007, []byte{0, 0, 0, 1}, "shorter"},
		{arrayOf(kInt4), 1007, cat(be32(7), be32(0), be32(23)), "dimensions"},
		{arrayOf(kInt4), 1007, cat(be32(1), be32(2), be32(23), be32(1), be32(1), be32(4), be32(1)), "flags"},
		{arrayOf(kInt4), 1007, cat(be32(1), be32(0), be32(25), be32(1), be32(1), be32(1), []byte("a")), "element type OID"},
		{arrayOf(kInt4), 1007, cat(be32(1), be32(0), be32(23), be32(-1), be32(1)), "length -1"},
		{arrayOf(kInt4), 1007, cat(be32(1), be32(0), be32(23), be32(1000), be32(1), be32(4), be32(1)), "more elements"},
		{arrayOf(kInt4), 1007, cat(be32(1), be32(0), be32(23), be32(2), be32(1), be32(4), be32(1)), "ends inside element 2"},
		{arrayOf(kInt4), 1007, cat(be32(1), be32(0), be32(23), be32(1), be32(1), be32(40), be32(1)), "length 40"},
		{arrayOf(kInt4), 1007, cat(be32(1), be32(0), be32(23), be32(1), be32(1), be32(2), be16(1)), "element 1"},
		{arrayOf(kInt4), 1007, append(arrayBin(23, []int{1}, [][]byte{be32(1)}), 0), "after the last element"},
		{arrayOf(kInt4), 1007, append(arrayBin(23, nil, nil), 0), "after an empty array"},
		{Kind{Name: Array}, 1007, arrayBin(23, nil, nil), "no element kind"},
	}
	for _, c := range cases {
		v, err := DecodePGBinary(c.k, c.oid, c.data)
		if err == nil {
			t.Errorf("%s %x decodes to %s; want an error", c.k, c.data, show(v))
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.k.String()) {
			t.Errorf("%s %x: error %q, want one naming the kind and saying %q", c.k, c.data, err, c.want)
		}
	}
}

// xml is of kind other, yet its binary form is its text: a column of it
// keeps PostgreSQL's binary form in a chain (see the source's encoding rule).
func TestXMLBinaryIsItsText(t *testing.T) {
	doc := `<?xml version="1.0" encoding="UTF8"?><r a="1">t&amp;<b>ü</b></r>`
	v, err := DecodePGBinary(kOther, 142, []byte(doc))
	if err != nil || v.Text != doc {
		t.Fatalf("xml: %+v, %v", v, err)
	}
	a, err := DecodePGBinary(arrayOf(kOther), 143, cat(be32(1), be32(0), be32(142), be32(1), be32(1), be32(int32(len("<a/>"))), []byte("<a/>")))
	if err != nil || len(a.Elems) != 1 || a.Elems[0].Text != "<a/>" {
		t.Fatalf("xml[]: %+v, %v", a, err)
	}
}

package value

import (
	"bytes"
	"reflect"
	"testing"
)

// fuzzKinds are the kinds the fuzz tests pick from by their first input.
var fuzzKinds = []Kind{
	kInt2, kInt4, kInt8, {Name: Int, Width: 64, Unsigned: true},
	kNumeric, kNumeric20, {Name: Decimal}, kFloat4, kFloat8, kBool,
	kText, kBytes, kDate, kTime, kTimetz, kTs, kTstz, kInterval, kUUID, kJSON, kMood, kOther,
	arrayOf(kInt4), arrayOf(kText), arrayOf(kNumeric), arrayOf(kFloat8), arrayOf(kTstz),
	arrayOf(kBytes), arrayOf(kInterval), arrayOf(kDate), arrayOf(kTimetz), arrayOf(kUUID), arrayOf(kBool),
	kInt1, kUint1, kUint2, kInt3, kUint3, kUint4,
}

// fuzzKindIndex is k's place in fuzzKinds (-1 when absent).
func fuzzKindIndex(k Kind) int {
	for i, f := range fuzzKinds {
		if reflect.DeepEqual(f, k) {
			return i
		}
	}
	return -1
}

// FuzzDecodePGText decodes arbitrary text by a kind chosen by the first
// input: it must not panic, and whatever decodes must encode to text that
// decodes to the same value and encodes to the same text again.
func FuzzDecodePGText(f *testing.F) {
	for _, c := range textCases() {
		if i := fuzzKindIndex(c.k); i >= 0 {
			f.Add(byte(i), []byte(c.in))
		}
	}
	f.Fuzz(func(t *testing.T, which byte, text []byte) {
		k := fuzzKinds[int(which)%len(fuzzKinds)]
		v, err := DecodePGText(k, text)
		if err != nil {
			return
		}
		checkTextRoundTrip(t, k, v)
	})
}

// FuzzDecodePGBinary decodes arbitrary bytes by a kind and OID chosen by
// the first input: it must not panic, and whatever decodes must encode to
// text that decodes to the same value.
func FuzzDecodePGBinary(f *testing.F) {
	type kindOID struct {
		k   Kind
		oid uint32
	}
	var kinds []kindOID
	seen := map[string]int{}
	for _, c := range binaryCases() {
		key := c.k.String() + "/" + string(rune(c.oid))
		i, ok := seen[key]
		if !ok {
			i = len(kinds)
			seen[key] = i
			kinds = append(kinds, kindOID{c.k, c.oid})
		}
		f.Add(byte(i), c.data)
	}
	f.Fuzz(func(t *testing.T, which byte, data []byte) {
		ko := kinds[int(which)%len(kinds)]
		v, err := DecodePGBinary(ko.k, ko.oid, data)
		if err != nil {
			return
		}
		checkTextRoundTrip(t, ko.k, v)
	})
}

func checkTextRoundTrip(t *testing.T, k Kind, v Value) {
	t.Helper()
	out, err := EncodePGText(k, v)
	if err != nil {
		t.Fatalf("%s: %s decodes but does not encode: %v", k, show(v), err)
	}
	back, err := DecodePGText(k, out)
	if err != nil {
		t.Fatalf("%s: %s encodes as %q, which does not decode: %v", k, show(v), out, err)
	}
	if !sameValue(back, v) {
		t.Fatalf("%s: %s encodes as %q, which decodes to %s", k, show(v), out, show(back))
	}
	again, err := EncodePGText(k, back)
	if err != nil || !bytes.Equal(again, out) {
		t.Fatalf("%s: %q re-encodes as %q, %v", k, out, again, err)
	}
}

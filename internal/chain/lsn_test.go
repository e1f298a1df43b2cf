package chain

import "testing"

func TestLSNsReadAndOrder(t *testing.T) {
	for _, s := range []string{"0/0", "0/16B3748", "16/B374D848", "FFFFFFFF/FFFFFFFF"} {
		v, err := ParseLSN(s)
		if err != nil || FormatLSN(v) != s {
			t.Errorf("%s read as %X, written back as %s (%v)", s, v, FormatLSN(v), err)
		}
	}
	for _, bad := range []string{"", "16B3748", "1/2/3", "G/1", "100000000/0"} {
		if _, err := ParseLSN(bad); err == nil {
			t.Errorf("%q read as a log position", bad)
		}
	}
	if !SamePosition("postgres", "0/16B3748", "0/016b3748") {
		t.Error("two spellings of one LSN differ")
	}
	if SamePosition("postgres", "0/1", "0/2") || SamePosition("mysql", "a", "b") {
		t.Error("different positions read as the same")
	}
	if c, ok, err := ComparePositions("postgres", "1/0", "0/FFFFFFFF"); !ok || err != nil || c <= 0 {
		t.Errorf("1/0 against 0/FFFFFFFF: %d %t %v", c, ok, err)
	}
	if _, ok, _ := ComparePositions("unknown-engine", "a", "b"); ok {
		t.Error("an engine without an order compared positions")
	}
}

package target

import (
	"slices"
	"testing"
)

func TestRangesJSONRoundTrip(t *testing.T) {
	for _, r := range [][]uint32{{0, 0}, {0, 3, 5, 5, 7, 4294967295}} {
		text := RangesJSON(r)
		got, err := ParseRangesJSON(text)
		if err != nil || !slices.Equal(got, r) {
			t.Errorf("%v → %s → %v, %v", r, text, got, err)
		}
	}
	for _, bad := range []string{"[1]", "[3,2]", "[-1,2]", "[0,4294967296]", "{}", ""} {
		if _, err := ParseRangesJSON(bad); err == nil {
			t.Errorf("%q read as ranges", bad)
		}
	}
}

func TestRangesFromOrdinals(t *testing.T) {
	if got := Ranges([]uint32{1, 2, 3, 7, 9, 10}); !slices.Equal(got, []uint32{1, 3, 7, 7, 9, 10}) {
		t.Errorf("Ranges: %v", got)
	}
}

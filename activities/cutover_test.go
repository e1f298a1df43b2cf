package activities

import (
	"maps"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
)

// A cutover's counters are the incrementals' latest records, and the
// full's values for the sequences none of them records.
func TestCutoverCounters(t *testing.T) {
	full := &chain.Manifest{Kind: chain.KindFull, Schema: &chain.Schema{Sequences: []chain.Sequence{
		{Schema: "public", Name: "s_id_seq", LastValue: 10, IsCalled: true},
		{Schema: "public", Name: "quiet", LastValue: 77, IsCalled: true},
	}}}
	inc1 := &chain.Manifest{Kind: chain.KindIncremental, Sequences: map[string]int64{"public.s_id_seq": 1500, "shop.orders": 4}}
	inc2 := &chain.Manifest{Kind: chain.KindIncremental, Sequences: map[string]int64{"public.s_id_seq": 3000}}
	got := CutoverCounters([]*chain.Manifest{full, inc1, inc2})
	want := map[string]int64{"public.s_id_seq": 3000, "public.quiet": 77, "shop.orders": 4}
	if !maps.Equal(got, want) {
		t.Fatalf("counters %v, want %v", got, want)
	}
	if got := CutoverCounters([]*chain.Manifest{full}); !maps.Equal(got, map[string]int64{"public.s_id_seq": 10, "public.quiet": 77}) {
		t.Fatalf("a position at the full: %v", got)
	}
}

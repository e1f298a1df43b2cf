package producer

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/filter"
	"github.com/sluicehq/sluice/internal/source"
)

func compileFilter(t *testing.T, s filter.Spec, key string) *filter.Filter {
	t.Helper()
	f, err := filter.Compile(s, func(string) (string, bool) { return key, key != "" })
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func withFilter(o Options, f *filter.Filter, key string) Options {
	o.Filter, o.MaskKeyEnv = f, "MASK_KEY"
	o.LookupEnv = func(string) (string, bool) { return key, key != "" }
	return o
}

// A window never captures under other filters than its segment's: only a
// rotation starts a segment under new ones, and its closing incremental
// still captures under the old segment's.
func TestFiltersChangeOnlyWithARotation(t *testing.T) {
	ctx := context.Background()
	ch, _ := newChain(t)
	src := newFakeSource(t, ch,
		fakeWindow{records: chaintest.Txn(10, insert("public.t", "1")), end: "0/880", before: "0/900"},
		fakeWindow{records: chaintest.Txn(11, insert("public.t", "2")), end: "0/950"})
	src.rotation = fullAt("0/900")
	const keyA, keyB = "key-a-0123456789abcdef", "key-b-0123456789abcdef"
	spec := filter.Spec{ExcludeTables: []string{"audit*"}, Masks: []string{"public.t.email=hash"}, MaskKeyEnv: "MASK_KEY"}
	flt := compileFilter(t, spec, keyA)

	// The chain was written with no filters: a run with some is refused
	// before any capture opens.
	_, err := Window(ctx, ch, withFilter(options(src, "w1"), flt, keyA), source.Limits{})
	if !errcode.Is(err, errcode.FilterChanged) {
		t.Fatalf("window under new filters: %v, want %s", err, errcode.FilterChanged)
	}
	if len(src.opened) != 0 {
		t.Fatalf("a refused window opened %d captures", len(src.opened))
	}

	// A rotation writes its full under the new filters; its closing
	// incremental is captured under the old segment's (none).
	if _, err := Rotate(ctx, ch, withFilter(options(src, "rot"), flt, keyA)); err != nil {
		t.Fatal(err)
	}
	if o := src.opened[0]; o.Filter != nil {
		t.Fatalf("the closing incremental captured under %+v, want the old segment's (none)", o.Filter.Record())
	}
	cat := loadCatalog(t, ch)
	rec, err := ch.FiltersAt(ctx, cat, cat.Tip().ID)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Equal(flt.Record()) || rec.Masks[0].KeyID != filter.KeyID([]byte(keyA)) {
		t.Fatalf("new segment records %+v, want %+v", rec, flt.Record())
	}

	// Now the same filters capture, under the segment's recorded filter.
	if _, err := Window(ctx, ch, withFilter(options(src, "w2"), flt, keyA), source.Limits{}); err != nil {
		t.Fatal(err)
	}
	if o := src.opened[len(src.opened)-1]; o.Filter == nil || !o.Filter.Record().Equal(rec) {
		t.Fatalf("capture opened with filter %v, want the segment's", o.Filter)
	}

	// No filters, other patterns in another order, or another mask key:
	// each is a change.
	for name, o := range map[string]Options{
		"none":        options(src, "w3"),
		"other key":   withFilter(options(src, "w4"), compileFilter(t, spec, keyB), keyB),
		"other table": withFilter(options(src, "w5"), compileFilter(t, filter.Spec{ExcludeTables: []string{"audit*", "log"}, Masks: spec.Masks, MaskKeyEnv: "MASK_KEY"}, keyA), keyA),
	} {
		if _, err := Window(ctx, ch, o, source.Limits{}); !errcode.Is(err, errcode.FilterChanged) {
			t.Errorf("%s: %v, want %s", name, err, errcode.FilterChanged)
		}
	}
	// The same patterns in another order are the same filters.
	same := filter.Spec{ExcludeTables: []string{"audit*"}, Masks: spec.Masks, MaskKeyEnv: "MASK_KEY"}
	if _, err := segmentFilter(ctx, ch, cat, withFilter(options(src, "w6"), compileFilter(t, same, keyA), keyA), false); err != nil {
		t.Fatalf("the same filters: %v", err)
	}
	// The segment's own key is needed to keep capturing it, even when a
	// rotation is under way.
	if _, err := segmentFilter(ctx, ch, cat, withFilter(options(src, "w7"), nil, keyB), true); !errcode.Is(err, errcode.FilterChanged) {
		t.Fatalf("capturing a segment with another mask key: %v, want %s", err, errcode.FilterChanged)
	}
}

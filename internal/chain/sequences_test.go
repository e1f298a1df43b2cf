package chain

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/errcode"
)

func TestManifestSequencesRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := newMemStore()
	c := Open(s)
	full := putFull(t, c, "", "0/1000", 0)
	plain := putIncremental(t, c, LinkFromManifest(full), "0/2000", 1)
	// A manifest without sequences is stored without the field: the IDs
	// of every manifest written before it existed stay what they were.
	if raw := string(s.raw(ManifestKey(plain.ID))); strings.Contains(raw, "sequences") {
		t.Fatalf("manifest without sequences stores the field: %s", raw)
	}
	withSeq := *plain
	withSeq.ID = ""
	withSeq.Sequences = map[string]int64{"public.items_id_seq": 3000, "public.orders_id_seq": -5}
	if err := c.PutManifest(ctx, &withSeq); err != nil {
		t.Fatal(err)
	}
	if withSeq.ID == plain.ID {
		t.Fatal("sequence values do not change the manifest's ID")
	}
	got, err := c.GetManifest(ctx, withSeq.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got.Sequences, withSeq.Sequences) {
		t.Fatalf("read back %v, want %v", got.Sequences, withSeq.Sequences)
	}
	// Stored with sorted keys, so the encoding (and the ID) is canonical.
	raw := string(s.raw(ManifestKey(withSeq.ID)))
	if !strings.Contains(raw, `"sequences":{"public.items_id_seq":3000,"public.orders_id_seq":-5}`) {
		t.Fatalf("stored form: %s", raw)
	}
}

func TestValidateManifestSequences(t *testing.T) {
	c := Open(newMemStore())
	full := putFull(t, c, "", "0/1000", 0)
	f := *full
	f.Sequences = map[string]int64{"public.s": 1}
	if err := f.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := ValidateManifest(&f); !errcode.Is(err, errcode.ManifestInvalid) || !strings.Contains(err.Error(), "sequence") {
		t.Fatalf("full with sequences: %v", err)
	}
	inc := *putIncremental(t, c, LinkFromManifest(full), "0/2000", 1)
	inc.Sequences = map[string]int64{"": 1}
	if err := inc.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := ValidateManifest(&inc); !errcode.Is(err, errcode.ManifestInvalid) {
		t.Fatalf("unnamed sequence: %v", err)
	}
}

func TestSequencesThroughAndMoved(t *testing.T) {
	ms := []*Manifest{
		{Sequences: map[string]int64{"a": 1, "b": 5}},
		{},
		{Sequences: map[string]int64{"a": 7}},
	}
	if got, want := SequencesThrough(ms), map[string]int64{"a": 7, "b": 5}; !maps.Equal(got, want) {
		t.Fatalf("SequencesThrough = %v, want %v", got, want)
	}
	if got := SequencesThrough([]*Manifest{{}}); got != nil {
		t.Fatalf("SequencesThrough of none = %v", got)
	}
	moved := SequencesMoved(map[string]int64{"a": 7, "b": 5}, map[string]int64{"a": 7, "b": 6, "c": 1})
	if want := map[string]int64{"b": 6, "c": 1}; !maps.Equal(moved, want) {
		t.Fatalf("SequencesMoved = %v, want %v", moved, want)
	}
	if got := SequencesMoved(map[string]int64{"a": 1}, map[string]int64{"a": 1}); got != nil {
		t.Fatalf("nothing moved, got %v", got)
	}
}

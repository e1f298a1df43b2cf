package apply

import (
	"testing"

	"github.com/sluicehq/sluice/internal/errcode"
)

// A catalog older than the generation a stream verified, or the same
// generation with other content, is refused; newer ones pass and are
// recorded.
func TestCheckNotRolledBack(t *testing.T) {
	rec := &Verified{Generation: 7, Commit: "aa"}
	for _, c := range []struct {
		gen    int64
		commit string
		refuse bool
	}{
		{7, "aa", false},
		{8, "bb", false},
		{6, "cc", true},  // rolled back, or the tail deleted
		{7, "dd", true},  // the same generation rewritten
		{7, "", false},   // a handle that holds no hash (not read from a store)
		{1, "aa", true},  // far back
		{9, "aa", false}, // a newer generation whose hash proves nothing here
	} {
		err := CheckNotRolledBack("s", rec, c.gen, c.commit)
		if got := errcode.Is(err, errcode.ChainRolledBack); got != c.refuse || (!c.refuse && err != nil) {
			t.Errorf("generation %d commit %q: %v", c.gen, c.commit, err)
		}
	}
	if err := CheckNotRolledBack("s", nil, 1, "x"); err != nil {
		t.Fatal(err)
	}
	if got := newer(rec, &Verified{Generation: 5}); got != rec {
		t.Fatal("an older generation replaced the record")
	}
	if got := newer(rec, &Verified{Generation: 9}); got.Generation != 9 {
		t.Fatal("a newer generation was not recorded")
	}
	// The record survives the token's encoding.
	tok := Token{Engine: EngineBroker, Stream: "s", ChainID: "c", LastApplied: "l", Verified: rec}
	text, sum, err := tok.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(text, sum)
	if err != nil || back.Verified == nil || *back.Verified != *rec {
		t.Fatalf("decoded %+v, %v", back.Verified, err)
	}
}

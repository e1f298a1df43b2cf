package apply

import (
	"context"
	"errors"
	"maps"
	"testing"

	"github.com/sluicehq/sluice/internal/chain/chaintest"
)

// The target's counters are raised to what an incremental records once its
// rows and position committed; a run that died before raising them raises
// them on the retry that finds the incremental applied.
func TestSequencesAreRaisedAfterTheIncremental(t *testing.T) {
	ctx := context.Background()
	ch, stored := chaintest.WriteIncremental(t, txns(2, 1, 10), 4)
	m := *stored
	m.Sequences = map[string]int64{"public.t_id_seq": 3000}
	f := newFakeTarget()
	startAt(t, f, "full-1", "run-1")
	f.raiseErr = errors.New("connection lost")
	if _, err := ApplyIncremental(ctx, ch, &m, testSchema(), f, opts("run-1", 1)); err == nil {
		t.Fatal("a failed raise was not reported")
	}
	if tok := f.token("s"); tok.LastApplied != m.ID {
		t.Fatalf("position %+v: the rows were to commit before the counters", tok)
	}
	f.raiseErr = nil
	res, err := ApplyIncremental(ctx, ch, &m, testSchema(), f, opts("run-1", 1))
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied != 0 || len(res.Sequences.Raised) != 1 {
		t.Fatalf("retry %+v, want nothing applied and the counter raised", res)
	}
	if !maps.Equal(f.sequences, m.Sequences) {
		t.Fatalf("target counters %v, want %v", f.sequences, m.Sequences)
	}
	requireOnce(t, f, 2, 1)
}

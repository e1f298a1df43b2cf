package apply

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
)

// An apply told to stop at a transaction boundary commits exactly the
// transactions before it, leaves the position inside the incremental, and
// a later apply without a stop resumes there exactly once — serially and
// on lanes. A repeated stop at the same place applies nothing.
func TestStopAtKeepsThePositionInsideTheIncremental(t *testing.T) {
	for _, lanes := range []int{1, 4} {
		ctx := context.Background()
		ch, m := chaintest.WriteIncremental(t, txns(10, 3, 7), 5)
		f := newFakeTarget()
		startAt(t, f, "full-1", "run-1")
		o := opts("run-1", lanes)
		o.StopAt, o.StopDigest = 15, ChunksDigest(m) // three transactions of five records
		res, err := ApplyIncremental(ctx, ch, m, testSchema(), f, o)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Stopped || res.Applied != 9 {
			t.Fatalf("lanes %d: result %+v, want 9 changes applied and stopped", lanes, res)
		}
		tok := f.token("s")
		if tok.InProgress == nil || tok.InProgress.AppliedThrough != 15 || tok.LastApplied != "full-1" {
			t.Fatalf("lanes %d: position %+v, want inside %s at record 15", lanes, tok, m.ID)
		}
		requireOnce(t, f, 3, 3)

		res, err = ApplyIncremental(ctx, ch, m, testSchema(), f, o)
		if err != nil || !res.Stopped || res.Applied != 0 {
			t.Fatalf("lanes %d: the same stop again: %+v, %v; want nothing applied", lanes, res, err)
		}
		o.StopAt, o.StopDigest = 0, ""
		if res, err = ApplyIncremental(ctx, ch, m, testSchema(), f, o); err != nil {
			t.Fatal(err)
		}
		if !res.Resumed || res.Stopped {
			t.Errorf("lanes %d: result %+v, want a resume to the end", lanes, res)
		}
		requireOnce(t, f, 10, 3)
		if tok := f.token("s"); tok.LastApplied != m.ID || tok.InProgress != nil {
			t.Errorf("lanes %d: position %+v, want past %s", lanes, tok, m.ID)
		}
	}
}

// A stop counted in other records (the incremental was rewritten since)
// applies nothing and asks for a new plan; a stop that falls inside a
// transaction is refused with what was applied rolled into no position.
func TestStopAtOnOtherRecordsIsRefused(t *testing.T) {
	ctx := context.Background()
	ch, m := chaintest.WriteIncremental(t, txns(4, 3, 7), 5)
	f := newFakeTarget()
	startAt(t, f, "full-1", "run-1")
	o := opts("run-1", 1)
	o.StopAt, o.StopDigest = 10, "another digest"
	res, err := ApplyIncremental(ctx, ch, m, testSchema(), f, o)
	if err != nil || !res.Replan || res.Applied != 0 || len(f.committed) != 0 {
		t.Fatalf("stale stop: %+v, %v; want a replan with nothing applied", res, err)
	}
	o.StopAt, o.StopDigest = 12, ChunksDigest(m)
	_, err = ApplyIncremental(ctx, ch, m, testSchema(), f, o)
	if e, ok := errcode.As(err); !ok || e.Code != errcode.BrokerIncrementalRewritten {
		t.Fatalf("a stop inside a transaction: %v, want %s", err, errcode.BrokerIncrementalRewritten)
	}
	if tok := f.token("s"); tok.InProgress != nil && tok.InProgress.AppliedThrough > 10 {
		t.Errorf("position %+v moved past the last boundary before the bad stop", tok)
	}
	o.StopAt = 99
	_, err = ApplyIncremental(ctx, ch, m, testSchema(), f, o)
	if e, ok := errcode.As(err); !ok || e.Code != errcode.BrokerIncrementalRewritten {
		t.Fatalf("a stop past the end: %v, want %s", err, errcode.BrokerIncrementalRewritten)
	}
}

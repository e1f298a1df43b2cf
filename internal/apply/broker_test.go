package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// testSchema has a keyed table public.t (id, v) and a keyless public.k.
func testSchema() *chain.Schema {
	return &chain.Schema{Tables: []chain.Table{
		{Schema: "public", Name: "k", Columns: []chain.Column{{Name: "a", Type: "text"}, {Name: "b", Type: "text"}}},
		{Schema: "public", Name: "t", Columns: []chain.Column{{Name: "id", Type: "integer", NotNull: true}, {Name: "v", Type: "text"}}, PrimaryKey: []string{"id"}},
	}}
}

func ins(id, v string) chain.Change {
	return chain.Change{Op: chain.OpInsert, Table: "public.t", New: chaintest.Text(id, v)}
}

// startAt gives the stream a position after link last, owned by owner.
func startAt(t *testing.T, f *fakeTarget, last, owner string) {
	t.Helper()
	row, err := Row(Token{Engine: EngineBroker, Stream: "s", ChainID: "c", LastApplied: last, Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	f.state["s"] = row
}

func opts(owner string, lanes int) Options {
	return Options{Stream: "s", Owner: owner, Lanes: lanes, ExpectedLast: "full-1"}
}

// txns builds n transactions of per inserts each, keys cycling over keys.
func txns(n, per, keys int) []chain.Change {
	var recs []chain.Change
	k := 0
	for x := 1; x <= n; x++ {
		var cs []chain.Change
		for range per {
			cs = append(cs, ins(fmt.Sprint(k%keys), fmt.Sprintf("x%d", x)))
			k++
		}
		recs = append(recs, chaintest.Txn(uint32(x), cs...)...)
	}
	return recs
}

// requireOnce checks that every change of the first n transactions of per
// changes was committed exactly once.
func requireOnce(t *testing.T, f *fakeTarget, n, per int) {
	t.Helper()
	seen := map[[2]uint32]int{}
	for _, a := range f.committed {
		seen[[2]uint32{a.xid, a.ordinal}]++
	}
	for x := 1; x <= n; x++ {
		for o := range per {
			if got := seen[[2]uint32{uint32(x), uint32(o)}]; got != 1 {
				t.Errorf("change %d of transaction %d committed %d times, want once", o, x, got)
			}
		}
	}
	if len(f.committed) != n*per {
		t.Errorf("%d changes committed, want %d", len(f.committed), n*per)
	}
}

func TestSerialApplyCommitsPositionWithTheRows(t *testing.T) {
	ch, m := chaintest.WriteIncremental(t, txns(3, 2, 10), 4)
	f := newFakeTarget()
	startAt(t, f, "full-1", "run-1")
	res, err := ApplyIncremental(context.Background(), ch, m, testSchema(), f, opts("run-1", 1))
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied != 6 || res.Skipped != 0 || res.Resumed {
		t.Fatalf("result %+v, want 6 applied", res)
	}
	requireOnce(t, f, 3, 2)
	tok := f.token("s")
	if tok.LastApplied != m.ID || tok.InProgress != nil || tok.Changes != 6 {
		t.Fatalf("position %+v, want past %s with 6 changes", tok, m.ID)
	}
	if f.commits != 1 {
		t.Errorf("%d commits, want the rows and the position in one", f.commits)
	}
	if len(f.marks["s"]) != 3 {
		t.Errorf("marks %+v, want one range per transaction of the newest link", f.marks["s"])
	}
}

// A crash inside an incremental resumes from the last checkpoint: the
// changes before it are never applied again and none after it is lost,
// serially and on lanes, whether the crash hits a change or the position
// write that follows committed lanes.
func TestCrashInsideAnIncrementalResumesExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		name         string
		lanes        int
		failAt       int
		failPosition bool
	}{
		{"serial, crash on a change", 1, 17, false},
		{"four lanes, crash on a change", 4, 17, false},
		{"four lanes, crash on the position write", 4, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ch, m := chaintest.WriteIncremental(t, txns(10, 3, 7), 5)
			f := newFakeTarget()
			startAt(t, f, "full-1", "run-1")
			f.failAt = tc.failAt
			o := opts("run-1", tc.lanes)
			o.CheckpointChanges = 4
			// With failPosition, the second position write fails after the
			// lanes committed their rows and marks.
			failing := &failingPosition{fakeTarget: f, failAt: 2, enabled: tc.failPosition}
			_, err := ApplyIncremental(ctx, ch, m, testSchema(), failing, o)
			if !errors.Is(err, errCrash) {
				t.Fatalf("first run: want the crash, got %v", err)
			}
			tok := f.token("s")
			if tok.InProgress == nil {
				t.Fatalf("no checkpoint before the crash: %+v", tok)
			}
			if got := tok.InProgress.AppliedThrough % 5; got != 0 {
				t.Errorf("checkpoint at record %d, which is not a transaction boundary", tok.InProgress.AppliedThrough)
			}
			// A new run takes the stream over and finishes.
			f.failAt = 0
			failing.enabled = false
			if err := Claim(ctx, f.State(), "s", "run-2"); err != nil {
				t.Fatal(err)
			}
			res, err := ApplyIncremental(ctx, ch, m, testSchema(), f, opts("run-2", tc.lanes))
			if err != nil {
				t.Fatal(err)
			}
			if !res.Resumed || res.Skipped == 0 {
				t.Errorf("result %+v, want a resume that skipped what was applied", res)
			}
			requireOnce(t, f, 10, 3)
			if tok := f.token("s"); tok.LastApplied != m.ID || tok.InProgress != nil {
				t.Errorf("position %+v, want past %s", tok, m.ID)
			}
		})
	}
}

// failingPosition fails its failAt-th position write, after the lanes
// committed their rows and marks.
type failingPosition struct {
	*fakeTarget
	failAt, writes int
	enabled        bool
}

func (p *failingPosition) OpenLane(ctx context.Context, cfg target.LaneConfig) (target.Lane, error) {
	l, err := p.fakeTarget.OpenLane(ctx, cfg)
	return &failingLane{Lane: l, p: p}, err
}

type failingLane struct {
	target.Lane
	p *failingPosition
}

func (l *failingLane) Commit(ctx context.Context, c target.Commit) error {
	if c.Position != nil && l.p.enabled {
		l.p.writes++
		if l.p.writes == l.p.failAt {
			return errCrash
		}
	}
	return l.Lane.Commit(ctx, c)
}

func TestMarksSkipARedeliveredTransaction(t *testing.T) {
	ch, m := chaintest.WriteIncremental(t, txns(3, 2, 10), 100)
	f := newFakeTarget()
	startAt(t, f, "full-1", "run-1")
	f.marks["s"] = []fakeMark{{link: "earlier", id: chain.Identity{XID: 2, CommitLSN: 200}, lo: 0, hi: 1}}
	res, err := ApplyIncremental(context.Background(), ch, m, testSchema(), f, opts("run-1", 1))
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied != 4 || res.Skipped != 2 {
		t.Fatalf("result %+v, want 4 applied and transaction 2 skipped", res)
	}
	for _, a := range f.committed {
		if a.xid == 2 {
			t.Errorf("marked change %d of transaction 2 applied again", a.ordinal)
		}
	}
	for _, mk := range f.marks["s"] {
		if mk.link != m.ID {
			t.Errorf("mark of link %s survived the final checkpoint", mk.link)
		}
	}
}

// Changes to one row stay in source order on one lane, while the rows
// spread over several lanes.
func TestLanesKeepEachRowsOrder(t *testing.T) {
	ch, m := chaintest.WriteIncremental(t, txns(40, 5, 9), 50)
	f := newFakeTarget()
	startAt(t, f, "full-1", "run-1")
	var lanes []*fakeLane
	tgt := &recordingLanes{fakeTarget: f, lanes: &lanes}
	o := opts("run-1", 4)
	o.CheckpointChanges = 30
	if _, err := ApplyIncremental(context.Background(), ch, m, testSchema(), tgt, o); err != nil {
		t.Fatal(err)
	}
	requireOnce(t, f, 40, 5)
	last := map[string][2]uint32{}
	for _, a := range f.committed {
		prev, ok := last[a.key]
		if ok && (a.xid < prev[0] || a.xid == prev[0] && a.ordinal < prev[1]) {
			t.Fatalf("row %s: change %d/%d committed after %d/%d", a.key, a.xid, a.ordinal, prev[0], prev[1])
		}
		last[a.key] = [2]uint32{a.xid, a.ordinal}
	}
	if len(lanes) != 4 {
		t.Fatalf("%d lanes opened, want 4", len(lanes))
	}
}

type recordingLanes struct {
	*fakeTarget
	lanes *[]*fakeLane
}

func (r *recordingLanes) OpenLane(ctx context.Context, cfg target.LaneConfig) (target.Lane, error) {
	l, err := r.fakeTarget.OpenLane(ctx, cfg)
	*r.lanes = append(*r.lanes, l.(*fakeLane))
	return l, err
}

// A truncate (a barrier) applies only after every lane committed what came
// before it, and what follows it applies after it committed.
func TestBarrierWaitsForEveryLane(t *testing.T) {
	var recs []chain.Change
	recs = append(recs, chaintest.Txn(1, ins("1", "a"), ins("2", "a"), ins("3", "a"), ins("4", "a"), ins("5", "a"), ins("6", "a"))...)
	recs = append(recs, chaintest.Txn(2, chain.Change{Op: chain.OpTruncate, Tables: []string{"public.t"}})...)
	recs = append(recs, chaintest.Txn(3, ins("7", "b"), ins("8", "b"))...)
	ch, m := chaintest.WriteIncremental(t, recs, 100)
	f := newFakeTarget()
	startAt(t, f, "full-1", "run-1")
	if _, err := ApplyIncremental(context.Background(), ch, m, testSchema(), f, opts("run-1", 3)); err != nil {
		t.Fatal(err)
	}
	for _, a := range f.committed {
		switch {
		case a.op == chain.OpTruncate && a.committedBefore != 6:
			t.Errorf("the truncate applied with %d of the 6 earlier changes committed", a.committedBefore)
		case a.xid == 3 && a.committedBefore < 7:
			t.Errorf("change %d after the truncate applied before the truncate committed", a.ordinal)
		}
	}
}

// A run whose stream another run took over cannot commit anything more.
func TestFencedRunCommitsNothing(t *testing.T) {
	ch, m := chaintest.WriteIncremental(t, txns(4, 2, 10), 100)
	f := newFakeTarget()
	startAt(t, f, "full-1", "run-1")
	f.onApply = func(c *chain.Change) {
		if c.XID == 3 && c.Ordinal == 0 {
			f.setOwner("s", "run-2")
		}
	}
	_, err := ApplyIncremental(context.Background(), ch, m, testSchema(), f, opts("run-1", 1))
	if !errcode.Is(err, errcode.BrokerFenced) {
		t.Fatalf("want %s, got %v", errcode.BrokerFenced, err)
	}
	if len(f.committed) != 0 {
		t.Errorf("a fenced run committed %d changes", len(f.committed))
	}
	if tok := f.token("s"); tok.Owner != "run-2" || tok.LastApplied != "full-1" {
		t.Errorf("position %+v, want run-2's, unmoved", tok)
	}
}

func TestStartRefusals(t *testing.T) {
	ctx := context.Background()
	ch, m := chaintest.WriteIncremental(t, txns(2, 2, 10), 100)
	for _, tc := range []struct {
		name  string
		setup func(f *fakeTarget)
		o     Options
		code  errcode.Code
	}{
		{"no position row", func(f *fakeTarget) {}, opts("run-1", 1), errcode.BrokerFenced},
		{"another owner", func(f *fakeTarget) { startAt(t, f, "full-1", "run-0") }, opts("run-1", 1), errcode.BrokerFenced},
		{"damaged row", func(f *fakeTarget) {
			f.state["s"] = target.StateRow{Token: `{"_engine":"backup-broker-v2"}`, Checksum: "x"}
		}, opts("run-1", 1), errcode.BrokerPositionCorrupt},
		{"unexpected last link", func(f *fakeTarget) { startAt(t, f, "other", "run-1") }, opts("run-1", 1), errcode.ChainInvalid},
		{"rewritten incremental", func(f *fakeTarget) {
			row, _ := Row(Token{Engine: EngineBroker, Stream: "s", ChainID: "c", LastApplied: "full-1", Owner: "run-1",
				InProgress: &Progress{Incremental: m.ID, ChunksDigest: "another", AppliedThrough: 4}})
			f.state["s"] = row
		}, opts("run-1", 1), errcode.BrokerIncrementalRewritten},
		{"position past the incremental's end", func(f *fakeTarget) {
			row, _ := Row(Token{Engine: EngineBroker, Stream: "s", ChainID: "c", LastApplied: "full-1", Owner: "run-1",
				InProgress: &Progress{Incremental: m.ID, ChunksDigest: ChunksDigest(m), AppliedThrough: 99}})
			f.state["s"] = row
		}, opts("run-1", 1), errcode.BrokerIncrementalRewritten},
		{"lanes beyond a single writer", func(f *fakeTarget) { startAt(t, f, "full-1", "run-1"); f.maxLanes = 1 }, opts("run-1", 2), errcode.ConfigInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeTarget()
			tc.setup(f)
			_, err := ApplyIncremental(ctx, ch, m, testSchema(), f, tc.o)
			if !errcode.Is(err, tc.code) {
				t.Fatalf("want %s, got %v", tc.code, err)
			}
			if len(f.committed) != 0 {
				t.Errorf("a refused apply committed %d changes", len(f.committed))
			}
		})
	}
}

func TestAppliedIncrementalIsANoOp(t *testing.T) {
	ch, m := chaintest.WriteIncremental(t, txns(2, 2, 10), 100)
	f := newFakeTarget()
	startAt(t, f, m.ID, "run-1")
	res, err := ApplyIncremental(context.Background(), ch, m, testSchema(), f, opts("run-1", 1))
	if err != nil || res.Applied != 0 || len(f.committed) != 0 {
		t.Fatalf("re-applying an applied incremental: %+v, %v, %d committed", res, err, len(f.committed))
	}
}

func TestClaimWithoutPositionRefused(t *testing.T) {
	err := Claim(context.Background(), newFakeTarget().State(), "s", "run-1")
	if !errcode.Is(err, errcode.BrokerNoPosition) {
		t.Fatalf("want %s, got %v", errcode.BrokerNoPosition, err)
	}
}

// implicitTarget is a fake whose schema changes and truncates commit the
// open transaction by themselves, as MySQL's DDL does.
type implicitTarget struct{ *fakeTarget }

func (implicitTarget) CommitsImplicitly() bool { return true }

// On a target whose truncates commit implicitly, a single lane commits the
// rows before a truncate (with their marks) before it, and the truncate's
// own mark right after it, in a transaction of its own; the rows after it
// commit after that.
func TestImplicitCommitIsolatesTruncateOnOneLane(t *testing.T) {
	var recs []chain.Change
	recs = append(recs, chaintest.Txn(1, ins("1", "a"), ins("2", "a"),
		chain.Change{Op: chain.OpTruncate, Tables: []string{"public.t"}}, ins("3", "b"))...)
	ch, m := chaintest.WriteIncremental(t, recs, 100)
	f := newFakeTarget()
	startAt(t, f, "full-1", "run-1")
	if _, err := ApplyIncremental(context.Background(), ch, m, testSchema(), implicitTarget{f}, opts("run-1", 1)); err != nil {
		t.Fatal(err)
	}
	if f.commits != 3 {
		t.Errorf("%d commits, want 3: the rows before the truncate, the truncate with its mark, and the rest with the position", f.commits)
	}
	for _, a := range f.committed {
		switch {
		case a.op == chain.OpTruncate && a.committedBefore != 2:
			t.Errorf("the truncate applied with %d of the 2 rows before it committed", a.committedBefore)
		case a.key == "3" && a.committedBefore != 3:
			t.Errorf("the row after the truncate applied with %d changes committed, want 3", a.committedBefore)
		}
	}
	var ranges []string
	for _, mk := range f.marks["s"] {
		ranges = append(ranges, fmt.Sprintf("%d-%d", mk.lo, mk.hi))
	}
	if got := strings.Join(ranges, " "); got != "0-1 2-2 3-3" {
		t.Errorf("marks %s, want 0-1 2-2 3-3 (the truncate's mark committed alone)", got)
	}
}

package apply

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/target"
)

// fakeTarget is an in-memory target: its lanes buffer what they apply and
// publish it only at commit, and positions and marks commit with the rows,
// so tests see exactly what a real target would hold after a crash.
type fakeTarget struct {
	mu       sync.Mutex
	maxLanes int
	state    map[string]target.StateRow
	marks    map[string][]fakeMark
	// committed lists the changes applied by committed transactions, in
	// commit order.
	committed []applied
	// commits counts committed lane transactions.
	commits int
	// failAt makes the n-th Apply call (from 1) fail, as a crash would.
	failAt  int
	applies int
	// onApply, when set, runs before each Apply with the change.
	onApply func(c *chain.Change)
	// sequences holds the counters raised, by name; raiseErr fails the
	// raise.
	sequences map[string]int64
	raiseErr  error
}

// fakeMark is one stored range of marks.
type fakeMark struct {
	link   string
	id     chain.Identity
	lo, hi uint32
}

// applied is one change a committed transaction applied.
type applied struct {
	op      chain.Op
	table   string
	key     string
	xid     uint32
	ordinal uint32
	// committedBefore is how many changes were committed when it was applied.
	committedBefore int
}

var errCrash = errors.New("fake target: crash")

func newFakeTarget() *fakeTarget {
	return &fakeTarget{state: map[string]target.StateRow{}, marks: map[string][]fakeMark{}}
}

func (f *fakeTarget) Prepare(context.Context, *chain.Schema, bool) error  { return nil }
func (f *fakeTarget) Finish(context.Context, *chain.Schema) error         { return nil }
func (f *fakeTarget) JudgeColdStart(context.Context, *chain.Schema) error { return nil }
func (f *fakeTarget) MaxLanes() int                                       { return f.maxLanes }
func (f *fakeTarget) Close(context.Context) error                         { return nil }
func (f *fakeTarget) State() target.StateStore                            { return fakeState{f} }
func (f *fakeTarget) LoadTable(context.Context, *chain.Chain, *chain.Schema, chain.TableData, target.LoadProgress) (int64, error) {
	return 0, nil
}
func (f *fakeTarget) JudgeIncremental(context.Context, *chain.Chain, *chain.Manifest, *chain.Schema, *target.Selection) (target.Judgment, error) {
	return target.Judgment{}, nil
}

func (f *fakeTarget) ApplyObjects(_ context.Context, _, to []chain.Object, _ target.ObjectOptions) (target.ObjectResult, error) {
	var r target.ObjectResult
	r.SkipAll(to, "fake target")
	return r, nil
}

func (f *fakeTarget) RaiseSequences(_ context.Context, _ *chain.Schema, values map[string]int64, _ int64, _ *target.Selection) (target.SequenceResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.raiseErr != nil {
		return target.SequenceResult{}, f.raiseErr
	}
	var res target.SequenceResult
	for name, v := range values {
		if f.sequences == nil {
			f.sequences = map[string]int64{}
		}
		if old, ok := f.sequences[name]; !ok || old < v {
			f.sequences[name] = v
			res.Raised = append(res.Raised, name)
		}
	}
	return res, nil
}

func (f *fakeTarget) OpenLane(_ context.Context, cfg target.LaneConfig) (target.Lane, error) {
	return &fakeLane{f: f, cfg: cfg}, nil
}

// token decodes the stream's committed position.
func (f *fakeTarget) token(stream string) Token {
	f.mu.Lock()
	defer f.mu.Unlock()
	row := f.state[stream]
	t, err := Decode(row.Token, row.Checksum)
	if err != nil {
		panic(err)
	}
	return t
}

// setOwner hands the stream to another run, as a newer run's claim does.
func (f *fakeTarget) setOwner(stream, owner string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	row := f.state[stream]
	t, _ := Decode(row.Token, row.Checksum)
	t.Owner = owner
	f.state[stream], _ = Row(t)
}

type fakeState struct{ f *fakeTarget }

func (s fakeState) EnsureControlTables(context.Context) error { return nil }

func (s fakeState) ReadState(_ context.Context, stream string) (target.StateRow, bool, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	row, ok := s.f.state[stream]
	return row, ok, nil
}

func (s fakeState) ReplaceState(_ context.Context, stream string, row *target.StateRow) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	delete(s.f.state, stream)
	delete(s.f.marks, stream)
	if row != nil {
		s.f.state[stream] = *row
	}
	return nil
}

func (s fakeState) UpdateState(_ context.Context, stream string, update func(target.StateRow) (target.StateRow, error)) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	row, ok := s.f.state[stream]
	if !ok {
		return target.ErrNoState
	}
	next, err := update(row)
	if err != nil {
		return err
	}
	s.f.state[stream] = next
	return nil
}

func (s fakeState) ReadMarks(_ context.Context, stream string, add func(chain.Identity, uint32, uint32)) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	for _, m := range s.f.marks[stream] {
		add(m.id, m.lo, m.hi)
	}
	return nil
}

// fakeLane buffers one transaction.
type fakeLane struct {
	f       *fakeTarget
	cfg     target.LaneConfig
	open    bool
	pending []applied
}

func (l *fakeLane) begin() error {
	if l.open {
		return nil
	}
	l.f.mu.Lock()
	row := l.f.state[l.cfg.Stream]
	l.f.mu.Unlock()
	if err := l.cfg.Lease(row); err != nil {
		return err
	}
	l.open = true
	return nil
}

func (l *fakeLane) Apply(_ context.Context, c *chain.Change) error {
	if c.Op == chain.OpBegin || c.Op == chain.OpCommit {
		return nil
	}
	if err := l.begin(); err != nil {
		return err
	}
	l.f.mu.Lock()
	l.f.applies++
	n, fail, hook := l.f.applies, l.f.failAt, l.f.onApply
	before := len(l.f.committed)
	l.f.mu.Unlock()
	if hook != nil {
		hook(c)
	}
	if fail > 0 && n == fail {
		return errCrash
	}
	key := ""
	if img := c.New; len(img) > 0 {
		key = string(img[0].Data)
	}
	if len(c.Old) > 0 {
		key = string(c.Old[0].Data)
	}
	l.pending = append(l.pending, applied{op: c.Op, table: c.Table, key: key, xid: c.XID, ordinal: c.Ordinal, committedBefore: before})
	return nil
}

func (l *fakeLane) Track(*chain.Change) {}

func (l *fakeLane) Commit(_ context.Context, c target.Commit) error {
	if !l.open && c.Position == nil {
		return nil
	}
	if err := l.begin(); err != nil {
		return err
	}
	l.f.mu.Lock()
	defer l.f.mu.Unlock()
	defer func() { l.open, l.pending = false, nil }()
	if c.Position != nil {
		if err := l.cfg.Lease(l.f.state[l.cfg.Stream]); err != nil {
			return err
		}
	}
	var marks []fakeMark
	err := c.Marks.Each(func(id chain.Identity, r []uint32) error {
		for i := 0; i < len(r); i += 2 {
			marks = append(marks, fakeMark{link: c.Marks.Link, id: id, lo: r[i], hi: r[i+1]})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fake marks: %w", err)
	}
	l.f.committed = append(l.f.committed, l.pending...)
	l.f.commits++
	l.f.marks[l.cfg.Stream] = append(l.f.marks[l.cfg.Stream], marks...)
	if c.Position != nil {
		l.f.state[l.cfg.Stream] = *c.Position
		if c.PruneMarksExcept != "" {
			kept := l.f.marks[l.cfg.Stream][:0]
			for _, m := range l.f.marks[l.cfg.Stream] {
				if m.link == c.PruneMarksExcept {
					kept = append(kept, m)
				}
			}
			l.f.marks[l.cfg.Stream] = kept
		}
	}
	return nil
}

func (l *fakeLane) Close(context.Context) error { l.open, l.pending = false, nil; return nil }

var (
	_ target.Target     = (*fakeTarget)(nil)
	_ target.Lane       = (*fakeLane)(nil)
	_ target.StateStore = fakeState{}
)

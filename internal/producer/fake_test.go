package producer

import (
	"context"
	"errors"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/source"
)

// fakeEngine is the engine the fake source reads and its chains record.
const fakeEngine = "fake"

// fakeInfo is what the test chains record of their source.
var fakeInfo = chain.SourceInfo{Engine: fakeEngine, SystemID: "42", Database: "app", Slot: "fake_slot"}

// fakeWindow is what one Next of the fake capture delivers.
type fakeWindow struct {
	// records are delivered to the sink in order; the window counts their
	// transactions and changes.
	records []chain.Change
	// end is the window's end position (the session's start when empty).
	end string
	// before, when set, is the Limits.Before the window must be asked
	// with (a rotation's closing window).
	before string
	// after, when set, runs once the records were delivered, before Next
	// returns: another producer may commit meanwhile.
	after func()
	// fail, when set, is what Next returns at once, delivering nothing (a
	// session whose connection was lost).
	fail error
	// sequences are the counters the source holds once the window ends
	// (nil: as after the window before).
	sequences map[string]int64
}

// confirmation is one Confirm call and what the catalog named when it came.
type confirmation struct {
	pos string
	// tipEnd and generation are the committed catalog's at that moment.
	tipEnd     string
	generation int64
}

// fakeSource is a source whose captures deliver scripted windows, in order
// across sessions, and record every Confirm with the catalog it found.
type fakeSource struct {
	t       *testing.T
	ch      *chain.Chain
	windows []fakeWindow
	// rotation is the full RotationFull returns (a copy each call).
	rotation *chain.Manifest
	// rotationCleaned counts calls of the rotation full's cleanup.
	rotationCleaned int
	health          source.LogHealth
	confirmErr      error
	opened          []source.CaptureOptions
	limits          []source.Limits
	confirms        []confirmation
	// closed counts closed sessions (a parked session's expiry closes it
	// from a timer's goroutine).
	closed atomic.Int32
	// sequences are the source's counters now (set by each window that
	// scripts them); sequencesErr is what reading them returns.
	sequences    map[string]int64
	sequencesErr error
	// sequenceReads counts reads of the counters.
	sequenceReads int
}

func newFakeSource(t *testing.T, ch *chain.Chain, windows ...fakeWindow) *fakeSource {
	return &fakeSource{t: t, ch: ch, windows: windows,
		health: source.LogHealth{State: source.LogOK, RetainedBytes: 4096, WalStatus: "reserved", Active: true}}
}

func (s *fakeSource) Engine() string { return fakeEngine }
func (s *fakeSource) Close()         {}

func (s *fakeSource) FullBackup(context.Context, *chain.Chain, source.FullOptions) (*chain.Manifest, error) {
	return nil, errors.New("fake source: the producer never takes a first full")
}

func (s *fakeSource) RotationFull(_ context.Context, _ *chain.Chain, o source.FullOptions, src chain.SourceInfo) (*chain.Manifest, func(), error) {
	if s.rotation == nil {
		return nil, nil, errors.New("fake source: no rotation full scripted")
	}
	if src != fakeInfo {
		s.t.Errorf("RotationFull of source %+v, want %+v", src, fakeInfo)
	}
	m := *s.rotation
	// As every engine does: the full records its filters.
	m.Filters = o.Filter.Record()
	return &m, func() { s.rotationCleaned++ }, nil
}

func (s *fakeSource) OpenCapture(_ context.Context, o source.CaptureOptions) (source.Capture, error) {
	s.opened = append(s.opened, o)
	return &fakeCapture{s: s, pos: o.Start}, nil
}

// fakeCapture is one session of a fakeSource.
type fakeCapture struct {
	s   *fakeSource
	pos string
}

func (c *fakeCapture) Next(_ context.Context, lim source.Limits, sink source.Sink) (source.Window, error) {
	s := c.s
	s.limits = append(s.limits, lim)
	if len(s.windows) == 0 {
		s.t.Fatal("fake capture: Next called with no window scripted")
	}
	fw := s.windows[0]
	s.windows = s.windows[1:]
	if fw.before != lim.Before {
		s.t.Errorf("window asked with Before %q, want %q", lim.Before, fw.before)
	}
	if fw.fail != nil {
		return source.Window{End: c.pos}, fw.fail
	}
	w := source.Window{End: c.pos}
	for i := range fw.records {
		rec := fw.records[i]
		if err := sink(&rec); err != nil {
			return w, err
		}
		switch rec.Op {
		case chain.OpBegin:
		case chain.OpCommit:
			w.Transactions++
			w.LastCommit = time.UnixMicro(rec.CommitTime)
		default:
			w.Changes++
		}
	}
	if fw.end != "" {
		w.End, c.pos = fw.end, fw.end
	}
	if fw.sequences != nil {
		s.sequences = fw.sequences
	}
	if fw.after != nil {
		fw.after()
	}
	return w, nil
}

func (c *fakeCapture) Confirm(ctx context.Context, pos string) error {
	cat, err := c.s.ch.LoadCatalog(ctx)
	if err != nil {
		c.s.t.Errorf("confirm %s: load catalog: %v", pos, err)
		return err
	}
	c.s.confirms = append(c.s.confirms, confirmation{pos: pos, tipEnd: cat.Tip().EndPosition, generation: cat.Generation})
	return c.s.confirmErr
}

func (c *fakeCapture) CurrentPosition(context.Context) (string, error) { return "0/ffff", nil }

func (c *fakeCapture) LogHealth(context.Context) (source.LogHealth, error) { return c.s.health, nil }

func (c *fakeCapture) Sequences(context.Context) (map[string]int64, error) {
	c.s.sequenceReads++
	return maps.Clone(c.s.sequences), c.s.sequencesErr
}

func (c *fakeCapture) Close() { c.s.closed.Add(1) }

// newChain stores a chain whose only link is a first full ending at 0/100.
func newChain(t *testing.T) (*chain.Chain, *chain.Manifest) {
	t.Helper()
	ctx := context.Background()
	ch := chaintest.Store(t)
	full := fullAt("0/100")
	if err := ch.PutManifest(ctx, full); err != nil {
		t.Fatal(err)
	}
	if err := ch.CommitCatalog(ctx, chain.NewCatalog(full)); err != nil {
		t.Fatal(err)
	}
	return ch, full
}

// fullAt is a full of no tables anchored at pos (not yet stored).
func fullAt(pos string) *chain.Manifest {
	return &chain.Manifest{
		FormatVersion: chain.ManifestFormatVersion,
		Kind:          chain.KindFull,
		Source:        fakeInfo,
		StartPosition: pos,
		EndPosition:   pos,
		CreatedAt:     time.Unix(1700000000, 0).UTC(),
		Schema:        &chain.Schema{},
	}
}

package apply

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// DefaultCheckpointChanges is how many changes the broker applies between
// two advances of its position inside an incremental.
const DefaultCheckpointChanges = 50000

// Options configure the broker's apply of one incremental.
type Options struct {
	// Stream is the --stream-id; Owner the lease of this run.
	Stream, Owner string
	// Lanes is the apply concurrency (1: serial).
	Lanes int
	// ExpectedLast is the link the position must record as fully applied
	// before this incremental (the previous incremental; fulls are skipped).
	ExpectedLast string
	// Arbiters are the insert arbiters the judgment found on the live
	// target, by table (target.Judgment.Arbiters).
	Arbiters map[string][]string
	// CheckpointChanges bounds the work between two position advances.
	CheckpointChanges int64
	// Progress is called with the changes applied so far.
	Progress func(applied int64)
	// Committed, when set, is called after each apply transaction commits
	// with how long it was open (first change to commit); lanes call it
	// concurrently.
	Committed func(open time.Duration)
	// Verified, when set, is the catalog generation the incremental was
	// read from. One older than the stream recorded is refused before
	// anything is applied; a newer one is recorded with the position.
	Verified *Verified
	// StopAt, when positive, applies only the incremental's first StopAt
	// records (a transaction boundary: a broker's --until or
	// --apply-delay) and leaves the position inside the incremental
	// there, so a later apply resumes from it exactly once.
	StopAt int64
	// CheckWhole, with StopAt, reads and checks the incremental's records
	// after StopAt too (framing and the manifest's counts) before the stop
	// commits: a restore to a point checks the whole incremental it stops
	// inside, as a restore of all of it does.
	CheckWhole bool
	// StopDigest is the chunk digest (ChunksDigest) of the incremental
	// StopAt was counted in; an incremental that no longer has it (a
	// compaction rewrote it since) is not applied and Result.Replan says
	// so.
	StopDigest string
	// Subset is the stream's subset of the chain's tables (zero: all):
	// changes of other tables are skipped, not applied, and the position
	// moves past them all the same. It must be the one the position was
	// written under (SLUICE-E-BROKER-SUBSET-CHANGED otherwise).
	Subset target.Subset
	// Objects, when set, applies the schema objects the incremental
	// changes once it is wholly applied (ApplyObjectChange); nil leaves
	// them alone.
	Objects *ObjectGate
	// SeamFrom, when set, is the schema the target was brought to by the
	// previous segment (the schema in force after ExpectedLast), for the
	// first incremental of a later segment: that segment's full records
	// tables created or altered at the end of the previous one that no
	// change record ever carried (PostgreSQL records a table's definition
	// only with its next row change), so before the incremental's first
	// record the target is brought from SeamFrom to schema (SeamChanges).
	SeamFrom *chain.Schema
}

// Result reports one applied incremental.
type Result struct {
	// Applied counts the changes applied; Skipped those already applied
	// (below the position, or marked); Excluded those of tables the
	// subset leaves out, which are never applied.
	Applied, Skipped, Excluded int64
	// Resumed is true when the run started inside the incremental.
	Resumed bool
	// Stopped is true when the apply stopped at Options.StopAt, inside
	// the incremental.
	Stopped bool
	// Replan is true when nothing was applied because the incremental is
	// no longer the one Options.StopAt was counted in.
	Replan bool
	// Sequences is what the target did with the sequence counters the
	// incremental records, once it was wholly applied.
	Sequences target.SequenceResult
	// Objects is what the target did with the schema objects the
	// incremental changed; nil when it changed none.
	Objects *target.ObjectResult
}

// ApplyIncremental applies incremental m to target t exactly once for a
// stream: it resumes from the position stored in the target, skips changes
// its marks name, applies on lanes hashed by table and key with barriers for
// what cannot be split, and advances the position at source transaction
// boundaries that every lane has committed. schema is the schema in force
// before m.
func ApplyIncremental(ctx context.Context, ch *chain.Chain, m *chain.Manifest, schema *chain.Schema, t target.Target, o Options) (Result, error) {
	if o.Lanes < 1 {
		o.Lanes = 1
	}
	if max := t.MaxLanes(); max > 0 && o.Lanes > max {
		return Result{}, errcode.New(errcode.ConfigInvalid, "--apply-concurrency %d: this target takes at most %d writer at a time; run with --apply-concurrency %d", o.Lanes, max, max)
	}
	if o.CheckpointChanges <= 0 {
		o.CheckpointChanges = DefaultCheckpointChanges
	}
	var res Result
	st := t.State()
	tok, err := ReadOwnedToken(ctx, st, o.Stream, o.Owner)
	if err != nil {
		return res, err
	}
	if !tok.Subset.Equal(o.Subset) {
		return res, target.SubsetChanged(o.Stream, tok.Subset, o.Subset)
	}
	sel, err := o.Subset.Select(schema)
	if err != nil {
		return res, err
	}
	if o.Verified != nil {
		if err := CheckNotRolledBack(o.Stream, tok.Verified, o.Verified.Generation, o.Verified.Commit); err != nil {
			return res, err
		}
		tok.Verified = newer(tok.Verified, o.Verified)
	}
	digest := ChunksDigest(m)
	if o.StopAt > 0 && o.StopDigest != digest {
		res.Replan = true
		return res, nil
	}
	var skip int64
	switch {
	case tok.InProgress != nil:
		if tok.InProgress.Incremental != m.ID || tok.InProgress.ChunksDigest != digest {
			return res, errcode.New(errcode.BrokerIncrementalRewritten,
				"the position is inside incremental %s (chunk digest %s), but the chain now gives %s (chunk digest %s) after %s",
				tok.InProgress.Incremental, tok.InProgress.ChunksDigest, m.ID, digest, tok.LastApplied)
		}
		skip = tok.InProgress.AppliedThrough
		var records int64
		for _, ref := range m.Chunks {
			records += ref.Rows
		}
		if skip > records {
			return res, errcode.New(errcode.BrokerIncrementalRewritten,
				"the position counts %d records applied in incremental %s, which now holds %d", skip, m.ID, records)
		}
		res.Resumed = true
	case tok.LastApplied == m.ID:
		// Already applied (a retry after the final commit): the counters
		// may not have been raised before the crash; raising is idempotent.
		if res.Sequences, err = RaiseSequences(ctx, t, m, schema, sel); err != nil {
			return res, err
		}
		res.Objects, err = ApplyObjectChange(ctx, t, m, schema, sel, o.Objects)
		return res, err
	case tok.LastApplied != o.ExpectedLast:
		return res, errcode.New(errcode.ChainInvalid, "the position records %s as last applied, but incremental %s follows %s", tok.LastApplied, m.ID, o.ExpectedLast)
	}
	if o.StopAt > 0 && o.StopAt <= skip {
		res.Stopped = true
		return res, nil // the position is already at or past the stop
	}
	marks, err := ReadMarks(ctx, st, o.Stream)
	if err != nil {
		return res, err
	}

	// At a seam not yet crossed, the lanes start from the target's schema
	// and the seam's changes bring it to the incremental's.
	laneSchema := schema
	var seam []*chain.Change
	if o.SeamFrom != nil && skip == 0 {
		laneSchema, seam = o.SeamFrom, SeamChanges(o.SeamFrom, schema)
	}
	cfg := target.LaneConfig{Schema: laneSchema, Stream: o.Stream, Arbiters: o.Arbiters, Lease: Lease(o.Stream, o.Owner)}
	lanes := make([]*lane, 0, o.Lanes)
	defer func() {
		for _, l := range lanes {
			l.close(context.WithoutCancel(ctx))
		}
	}()
	for range o.Lanes {
		tl, err := t.OpenLane(ctx, cfg)
		if err != nil {
			return res, err
		}
		l := &lane{target: tl, link: m.ID, committed: o.Committed}
		if o.Lanes > 1 {
			l.work, l.done = make(chan laneMsg, 4096), make(chan struct{})
			go l.loop(ctx)
		}
		lanes = append(lanes, l)
	}

	d := &dispatcher{lanes: lanes, m: m, digest: digest, tok: tok, o: o, marks: marks, res: &res, sel: sel}
	if ic, ok := t.(target.ImplicitCommitter); ok {
		d.implicit = ic.CommitsImplicitly()
	}
	if len(lanes) > 1 {
		d.router = NewRouter(laneSchema)
	}
	if len(seam) > 0 {
		names := make([]string, len(seam))
		for i, c := range seam {
			names[i] = c.Table
		}
		slog.Info("entering a new segment: bringing tables its full records otherwise to the segment's schema",
			"stream", o.Stream, "incremental", m.ID, "tables", names)
	}
	for _, c := range seam {
		if err := d.seam(ctx, c); err != nil {
			return res, err
		}
	}
	// Every record read is checked against the framing and the counts the
	// manifest records, as the chain's own walk checks them; with one
	// lane and no checkpoint inside, nothing commits before the last check.
	var f chain.Framing
	var index int64
	for _, ref := range m.Chunks {
		it, err := ch.ReadChangeChunk(ctx, ref)
		if err != nil {
			return res, err
		}
		var n int64
		for it.Next() {
			if o.StopAt > 0 && index == o.StopAt && !o.CheckWhole {
				return res, d.stop(ctx, index)
			}
			c := it.Change()
			if err := f.Check(m, ref, n, c); err != nil {
				return res, err
			}
			n++
			if o.StopAt == 0 || index < o.StopAt {
				if err := d.record(ctx, index, index < skip, c); err != nil {
					return res, err
				}
			}
			index++
		}
		if err := it.Err(); err != nil {
			return res, err
		}
		if err := chain.CheckChunkRecords(m, ref, n); err != nil {
			return res, err
		}
	}
	if o.StopAt > 0 {
		if index < o.StopAt {
			return res, errcode.New(errcode.BrokerIncrementalRewritten, "the apply was to stop after record %d of incremental %s, which holds %d", o.StopAt, m.ID, index)
		}
		if o.CheckWhole {
			if err := f.End(m); err != nil {
				return res, err
			}
		}
		return res, d.stop(ctx, o.StopAt)
	}
	if err := f.End(m); err != nil {
		return res, err
	}
	// The final checkpoint moves the position past the incremental.
	if err := d.checkpoint(ctx, index, true); err != nil {
		return res, err
	}
	if res.Sequences, err = RaiseSequences(ctx, t, m, schema, sel); err != nil {
		return res, err
	}
	// Like the counters, the schema objects are no part of the rows'
	// transactions: applied once the position covers m, and again by a
	// retry that finds m applied.
	res.Objects, err = ApplyObjectChange(ctx, t, m, schema, sel, o.Objects)
	return res, err
}

// RaiseSequences raises target t's sequence counters to those incremental m
// records (target.Target.RaiseSequences), resolved against the schema in
// force after m; schema is the one in force before it, sel the stream's or
// the restore's subset (nil: every table). The broker calls it once m's
// rows and position committed, restore once m is applied: counters are not
// transactional, so a run that dies in between raises them when its retry
// finds m applied. An incremental that records none does nothing.
func RaiseSequences(ctx context.Context, t target.Target, m *chain.Manifest, schema *chain.Schema, sel *target.Selection) (target.SequenceResult, error) {
	if len(m.Sequences) == 0 {
		return target.SequenceResult{}, nil
	}
	after := schema
	if m.Schema != nil {
		after = m.Schema
	}
	r, err := t.RaiseSequences(ctx, after, m.Sequences, 0, sel)
	if err != nil {
		return r, fmt.Errorf("raise the target's sequences to incremental %s: %w", m.ID, err)
	}
	if len(r.Raised) > 0 || len(r.Skipped) > 0 {
		slog.Debug("sequences raised", "incremental", m.ID, "raised", r.Raised, "skipped", r.Skipped)
	}
	return r, nil
}

// stop ends an apply at record index, which must be a transaction
// boundary: everything before it commits and the position records it.
func (d *dispatcher) stop(ctx context.Context, index int64) error {
	if d.open {
		return errcode.New(errcode.BrokerIncrementalRewritten, "the apply was to stop after record %d of incremental %s, which lies inside source transaction %s", index, d.m.ID, d.cur.Identity())
	}
	d.res.Stopped = true
	return d.checkpoint(ctx, index, false)
}

// dispatcher walks an incremental's records and hands them to lanes.
type dispatcher struct {
	lanes  []*lane
	m      *chain.Manifest
	digest string
	tok    Token
	o      Options
	marks  Marks
	res    *Result
	// router decides lanes and follows schema changes in the dispatcher's
	// goroutine (nil with a single lane, which needs no routing).
	router *Router
	// implicit is set for a target whose schema changes and truncates
	// commit the open transaction by themselves (target.ImplicitCommitter).
	implicit bool
	// sel is the stream's subset of the tables (nil: all of them).
	sel *target.Selection

	open     bool
	cur      chain.Change // the open transaction's begin record
	boundary int64        // records up to the last commit
	pending  int64        // changes sent since the last checkpoint
}

func (d *dispatcher) record(ctx context.Context, index int64, skipped bool, c *chain.Change) error {
	switch c.Op {
	case chain.OpBegin: // the framing was checked before (chain.Framing)
		d.open, d.cur = true, *c
		return nil
	case chain.OpCommit:
		d.open = false
		d.boundary = index + 1
		if !skipped && d.pending >= d.o.CheckpointChanges {
			return d.checkpoint(ctx, d.boundary, false)
		}
		return nil
	}
	// A change of a table the subset leaves out is neither applied nor
	// marked; the transaction's commit moves the position past it all
	// the same. Truncates keep only the tables taken.
	c, keep := d.sel.Keep(c)
	if !keep {
		d.res.Excluded++
		return nil
	}
	if skipped || (c.Identified && d.marks.Has(c)) {
		// Applied before: only the lanes' view of the schema moves.
		if c.Op == chain.OpSchema {
			if err := d.track(ctx, c); err != nil {
				return err
			}
		}
		d.res.Skipped++
		return nil
	}
	if len(d.lanes) == 1 && !(d.implicit && implicitCommit(c)) {
		if err := d.lanes[0].apply(ctx, c); err != nil {
			return err
		}
	} else if key, barrier := d.route(c); barrier {
		if err := d.barrier(ctx, c); err != nil {
			return err
		}
	} else {
		l := d.lanes[Lane(c.Table, key, len(d.lanes))]
		if err := l.send(ctx, c); err != nil {
			return err
		}
	}
	d.pending++
	d.res.Applied++
	if d.o.Progress != nil && d.res.Applied%1000 == 0 {
		d.o.Progress(d.res.Applied)
	}
	return nil
}

// barrier applies c alone: everything before it commits first; it then
// applies on the first lane, and its own mark (if it has one) commits right
// after it.
func (d *dispatcher) barrier(ctx context.Context, c *chain.Change) error {
	if err := d.commitLanes(ctx); err != nil {
		return err
	}
	l := d.lanes[0]
	if err := l.apply(ctx, c); err != nil {
		return err
	}
	if err := l.commit(ctx, nil); err != nil {
		return err
	}
	// Every lane is idle now: their views follow synchronously.
	if d.router != nil {
		d.router.Track(c)
	}
	for _, other := range d.lanes[1:] {
		other.target.Track(c)
	}
	return nil
}

// seam applies one of SeamChanges before the incremental's first record.
// Such a change has no identity, so no mark: applying it again (a crash
// before the first checkpoint) converges, as a schema change does on every
// target. A table the subset leaves out is left alone.
func (d *dispatcher) seam(ctx context.Context, c *chain.Change) error {
	c, keep := d.sel.Keep(c)
	if !keep {
		return nil
	}
	if len(d.lanes) == 1 && !d.implicit {
		// It commits with the rows and position of the first checkpoint.
		return d.lanes[0].apply(ctx, c)
	}
	return d.barrier(ctx, c)
}

// route is the router's verdict on c; with a single lane (which only asks
// for the changes that commit implicitly) every change it is asked about is
// a barrier.
func (d *dispatcher) route(c *chain.Change) ([][]byte, bool) {
	if d.router == nil {
		return nil, true
	}
	return d.router.Route(c)
}

// implicitCommit reports whether c is a change an ImplicitCommitter target
// commits the open transaction for: a schema change or a truncate.
func implicitCommit(c *chain.Change) bool {
	return c.Op == chain.OpSchema || c.Op == chain.OpTruncate
}

// track moves every lane's view past a schema change applied before.
func (d *dispatcher) track(ctx context.Context, c *chain.Change) error {
	if len(d.lanes) == 1 {
		d.lanes[0].target.Track(c)
		return nil
	}
	d.router.Track(c)
	for _, l := range d.lanes {
		select {
		case l.work <- laneMsg{track: c.Clone()}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// commitLanes commits every lane's open transaction (rows and marks).
func (d *dispatcher) commitLanes(ctx context.Context) error {
	if len(d.lanes) == 1 {
		return d.lanes[0].commit(ctx, nil)
	}
	for _, l := range d.lanes {
		if err := l.requestCommit(ctx); err != nil {
			return err
		}
	}
	var first error
	for _, l := range d.lanes {
		if err := l.awaitCommit(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// checkpoint commits every lane and then advances the position to boundary
// (a transaction boundary), or past the incremental when final. With one
// lane the position commits in the same transaction as the rows.
func (d *dispatcher) checkpoint(ctx context.Context, boundary int64, final bool) error {
	tok := d.tok
	tok.Changes += d.pending
	if final {
		tok.LastApplied, tok.InProgress = d.m.ID, nil
	} else {
		tok.InProgress = &Progress{Incremental: d.m.ID, ChunksDigest: d.digest, AppliedThrough: boundary}
	}
	row, err := Row(tok)
	if err != nil {
		return err
	}
	pos := &target.Commit{Position: &row}
	if final {
		pos.PruneMarksExcept = d.m.ID
	}
	if len(d.lanes) > 1 {
		if err := d.commitLanes(ctx); err != nil {
			return err
		}
	}
	if err := d.lanes[0].commit(ctx, pos); err != nil {
		return err
	}
	d.tok, d.pending = tok, 0
	if d.o.Progress != nil {
		d.o.Progress(d.res.Applied)
	}
	return nil
}

// RestoreOptions are the options a restore applies an incremental with,
// under the restore's own stream and lease: after the link after (the
// previous incremental, or the full), on one lane, in one target
// transaction (no checkpoint inside; the position commits with the last
// row), every record checked even when stopAt stops the apply inside the
// incremental (a restore to a point; stopDigest is the incremental's
// ChunksDigest when the stop was planned).
func RestoreOptions(stream, owner, after string, subset target.Subset, stopAt int64, stopDigest string) Options {
	return Options{Stream: stream, Owner: owner, Lanes: 1, ExpectedLast: after, Subset: subset,
		StopAt: stopAt, StopDigest: stopDigest, CheckWhole: true, CheckpointChanges: math.MaxInt64}
}

package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
)

// DefaultCheckpointChanges is how many changes the broker applies between
// two advances of its position inside an incremental.
const DefaultCheckpointChanges = 50000

// BrokerApply configures the broker's apply of one incremental.
type BrokerApply struct {
	// DSN is the target, password resolved.
	DSN string
	// Stream is the --stream-id; Owner the lease of this run.
	Stream, Owner string
	// Lanes is the apply concurrency (1: serial).
	Lanes int
	// ExpectedLast is the link the position must record as fully applied
	// before this incremental (the previous incremental; fulls are skipped).
	ExpectedLast string
	// Arbiters are the insert arbiters the judgment found on the live
	// target, by table (Judgment.Arbiters).
	Arbiters map[string][]string
	// CheckpointChanges bounds the work between two position advances.
	CheckpointChanges int64
	// Progress is called with the changes applied so far.
	Progress func(applied int64)
	// Committed, when set, is called after each apply transaction commits
	// with how long it was open (begin to commit); lanes call it concurrently.
	Committed func(open time.Duration)
}

// BrokerResult reports one applied incremental.
type BrokerResult struct {
	// Applied counts the changes applied; Skipped those already applied
	// (below the position, or marked).
	Applied, Skipped int64
	// Resumed is true when the run started inside the incremental.
	Resumed bool
}

// ApplyIncrementalForBroker applies incremental m to the target exactly once
// for a stream: it resumes from the position stored in the target, skips
// changes its marks name, applies on lanes hashed by table and key with
// barriers for what cannot be split, and advances the position at source
// transaction boundaries that every lane has committed. schema is the schema
// in force before m.
func ApplyIncrementalForBroker(ctx context.Context, ch *chain.Chain, m *chain.Manifest, schema *chain.Schema, o BrokerApply) (BrokerResult, error) {
	if o.Lanes < 1 {
		o.Lanes = 1
	}
	if o.CheckpointChanges <= 0 {
		o.CheckpointChanges = DefaultCheckpointChanges
	}
	var res BrokerResult
	ctl, err := Connect(ctx, o.DSN)
	if err != nil {
		return res, err
	}
	defer ctl.Close(context.WithoutCancel(ctx))

	tok, err := readOwnedToken(ctx, ctl, o.Stream, o.Owner)
	if err != nil {
		return res, err
	}
	digest := apply.ChunksDigest(m)
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
		return res, nil // already applied (a retry after the final commit)
	case tok.LastApplied != o.ExpectedLast:
		return res, errcode.New(errcode.ChainInvalid, "the position records %s as last applied, but incremental %s follows %s", tok.LastApplied, m.ID, o.ExpectedLast)
	}
	marks, err := ReadMarks(ctx, ctl, o.Stream)
	if err != nil {
		return res, err
	}

	lanes := make([]*lane, o.Lanes)
	for i := range lanes {
		conn, err := Connect(ctx, o.DSN)
		if err != nil {
			return res, err
		}
		replicaRole(ctx, conn)
		lanes[i] = &lane{conn: conn, applier: NewApplier(schema), stream: o.Stream, owner: o.Owner, link: m.ID, committed: o.Committed}
		lanes[i].applier.UseArbiters(o.Arbiters)
		if o.Lanes > 1 {
			lanes[i].work = make(chan laneMsg, 4096)
			go lanes[i].loop(ctx)
		}
	}
	defer func() {
		for _, l := range lanes {
			l.close(context.WithoutCancel(ctx))
		}
	}()

	d := &dispatcher{lanes: lanes, m: m, digest: digest, tok: tok, o: o, marks: marks, res: &res, router: lanes[0].applier}
	if o.Lanes > 1 {
		// Lane appliers belong to their goroutines; routing keeps its own view.
		d.router = NewApplier(schema)
	}
	var index int64
	for _, ref := range m.Chunks {
		it, err := ch.ReadChangeChunk(ctx, ref)
		if err != nil {
			return res, err
		}
		for it.Next() {
			c := it.Change()
			if err := d.record(ctx, index, index < skip, c); err != nil {
				return res, err
			}
			index++
		}
		if err := it.Err(); err != nil {
			return res, err
		}
	}
	if d.open {
		return res, errcode.New(errcode.ChunkCorrupt, "incremental %s ends inside source transaction %d", m.ID, d.cur.XID)
	}
	// The final checkpoint moves the position past the incremental.
	if err := d.checkpoint(ctx, index, true); err != nil {
		return res, err
	}
	return res, nil
}

// replicaRole makes the lane's session apply like PostgreSQL's own
// subscriber: foreign keys and triggers do not fire for replayed rows (rows
// of one source transaction may commit on different lanes in any order), and
// commits do not wait for the WAL flush — a commit lost in a target crash
// loses its position and marks with it, so the change is simply applied
// again. A role that may not set the replication role applies with foreign
// keys and triggers firing.
func replicaRole(ctx context.Context, conn *pgx.Conn) {
	_, _ = conn.Exec(ctx, "SET session_replication_role = replica")
	_, _ = conn.Exec(ctx, "SET synchronous_commit = off")
}

func readOwnedToken(ctx context.Context, conn *pgx.Conn, stream, owner string) (apply.Token, error) {
	row, ok, err := ReadState(ctx, conn, stream)
	if err != nil {
		return apply.Token{}, err
	}
	if !ok {
		return apply.Token{}, errcode.New(errcode.BrokerFenced, "stream %s has no position row", stream)
	}
	tok, err := apply.Decode(row.Token, row.Checksum)
	if err != nil {
		return apply.Token{}, errcode.Wrap(errcode.BrokerPositionCorrupt, err, "stream %s", stream)
	}
	if tok.Owner != owner {
		return apply.Token{}, errcode.New(errcode.BrokerFenced, "stream %s is now applied by run %s; this run (%s) stops", stream, tok.Owner, owner)
	}
	return tok, nil
}

// dispatcher walks an incremental's records and hands them to lanes.
type dispatcher struct {
	lanes  []*lane
	m      *chain.Manifest
	digest string
	tok    apply.Token
	o      BrokerApply
	marks  apply.Marks
	res    *BrokerResult
	// router decides lanes and follows schema changes in the dispatcher's
	// goroutine (lane 0's applier when there is a single lane).
	router *Applier

	open     bool
	cur      chain.Change // the open transaction's begin record
	boundary int64        // records up to the last commit
	pending  int64        // changes sent since the last checkpoint
}

func (d *dispatcher) record(ctx context.Context, index int64, skipped bool, c *chain.Change) error {
	switch c.Op {
	case chain.OpBegin:
		if d.open {
			return errcode.New(errcode.ChunkCorrupt, "incremental %s: record %d begins a transaction inside another", d.m.ID, index)
		}
		d.open, d.cur = true, *c
		return nil
	case chain.OpCommit:
		if !d.open {
			return errcode.New(errcode.ChunkCorrupt, "incremental %s: record %d commits outside a transaction", d.m.ID, index)
		}
		d.open = false
		d.boundary = index + 1
		if !skipped && d.pending >= d.o.CheckpointChanges {
			return d.checkpoint(ctx, d.boundary, false)
		}
		return nil
	}
	if !d.open {
		return errcode.New(errcode.ChunkCorrupt, "incremental %s: record %d is a change outside a transaction", d.m.ID, index)
	}
	if skipped || (c.Identified && d.marks.Has(c)) {
		// Applied before: only the appliers' view of the schema moves.
		if c.Op == chain.OpSchema {
			if err := d.track(ctx, c); err != nil {
				return err
			}
		}
		d.res.Skipped++
		return nil
	}
	key, barrier := d.router.Route(c)
	if len(d.lanes) == 1 {
		l := d.lanes[0]
		if err := l.apply(ctx, c); err != nil {
			return err
		}
	} else if barrier {
		// Everything before it commits first; it then applies alone.
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
		d.router.Track(c)
		for _, other := range d.lanes[1:] {
			other.applier.Track(c)
		}
	} else {
		l := d.lanes[apply.Lane(c.Table, key, len(d.lanes))]
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

// track moves every applier's view past a schema change applied before.
func (d *dispatcher) track(ctx context.Context, c *chain.Change) error {
	if len(d.lanes) == 1 {
		d.lanes[0].applier.Track(c)
		return nil
	}
	d.router.Track(c)
	for _, l := range d.lanes {
		select {
		case l.work <- laneMsg{track: cloneChange(c)}:
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
		tok.InProgress = &apply.Progress{Incremental: d.m.ID, ChunksDigest: d.digest, AppliedThrough: boundary}
	}
	writePos := func(ctx context.Context, tx pgx.Tx) error {
		if _, err := LockOwned(ctx, tx, d.o.Stream, d.o.Owner, true); err != nil {
			return err
		}
		if err := WriteState(ctx, tx, tok); err != nil {
			return err
		}
		if final {
			return PruneMarks(ctx, tx, d.o.Stream, d.m.ID)
		}
		return nil
	}
	if len(d.lanes) == 1 {
		if err := d.lanes[0].commit(ctx, writePos); err != nil {
			return err
		}
	} else {
		if err := d.commitLanes(ctx); err != nil {
			return err
		}
		if err := d.lanes[0].commit(ctx, writePos); err != nil {
			return err
		}
	}
	d.tok, d.pending = tok, 0
	if d.o.Progress != nil {
		d.o.Progress(d.res.Applied)
	}
	return nil
}

// lane is one target connection applying its share of the changes in its
// own transactions, each checking the stream's lease and writing its marks.
type lane struct {
	conn    *pgx.Conn
	applier *Applier
	stream  string
	owner   string
	link    string
	tx      pgx.Tx
	began   time.Time
	marks   markBatch
	// committed is BrokerApply.Committed.
	committed func(time.Duration)

	work         chan laneMsg
	pendingReply chan error
	err          error
}

type laneMsg struct {
	change *chain.Change
	track  *chain.Change
	commit chan error
}

func (l *lane) begin(ctx context.Context) error {
	if l.tx != nil {
		return nil
	}
	tx, err := l.conn.Begin(ctx)
	if err != nil {
		return classify(err, "begin apply transaction")
	}
	if _, err := LockOwned(ctx, tx, l.stream, l.owner, false); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	l.tx, l.began = tx, time.Now()
	return nil
}

// apply applies a change in the lane's open transaction (synchronously).
func (l *lane) apply(ctx context.Context, c *chain.Change) error {
	if err := l.begin(ctx); err != nil {
		return err
	}
	if err := l.applier.Apply(ctx, l.tx, c); err != nil {
		return err
	}
	if c.Identified {
		l.marks.add(l.link, apply.IdentityOf(c), c.Ordinal)
	}
	return nil
}

// commit flushes, writes marks (and, when given, the position) and commits.
func (l *lane) commit(ctx context.Context, extra func(context.Context, pgx.Tx) error) error {
	if l.tx == nil && extra == nil {
		return nil
	}
	if err := l.begin(ctx); err != nil {
		return err
	}
	err := l.applier.Flush(ctx, l.tx)
	if err == nil {
		err = l.marks.write(ctx, l.tx, l.stream)
	}
	if err == nil && extra != nil {
		err = extra(ctx, l.tx)
	}
	if err == nil {
		if cerr := l.tx.Commit(ctx); cerr != nil {
			err = classify(cerr, "commit apply transaction")
		} else if l.committed != nil {
			l.committed(time.Since(l.began))
		}
	}
	if err != nil {
		_ = l.tx.Rollback(context.WithoutCancel(ctx))
	}
	l.tx = nil
	l.marks.reset()
	return err
}

// send queues a copy of a change for the lane's goroutine.
func (l *lane) send(ctx context.Context, c *chain.Change) error {
	select {
	case l.work <- laneMsg{change: cloneChange(c)}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *lane) requestCommit(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case l.work <- laneMsg{commit: reply}:
	case <-ctx.Done():
		return ctx.Err()
	}
	l.pendingReply = reply
	return nil
}

func (l *lane) awaitCommit(ctx context.Context) error {
	select {
	case err := <-l.pendingReply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *lane) loop(ctx context.Context) {
	for msg := range l.work {
		if msg.commit != nil {
			err := l.err
			if err == nil {
				err = l.commit(ctx, nil)
			}
			msg.commit <- err
			continue
		}
		if msg.track != nil {
			l.applier.Track(msg.track)
			continue
		}
		if l.err == nil {
			l.err = l.apply(ctx, msg.change)
		}
	}
}

func (l *lane) close(ctx context.Context) {
	if l.work != nil {
		close(l.work)
	}
	if l.tx != nil {
		_ = l.tx.Rollback(ctx)
	}
	_ = l.applier.Release(ctx, l.conn)
	_ = l.conn.Close(ctx)
}

// cloneChange copies a change and its values out of the iterator's buffers.
func cloneChange(c *chain.Change) *chain.Change {
	out := *c
	size := 0
	for _, v := range c.New {
		size += len(v.Data)
	}
	for _, v := range c.Old {
		size += len(v.Data)
	}
	buf := make([]byte, 0, size)
	copyVals := func(in []chain.Value) []chain.Value {
		if in == nil {
			return nil
		}
		vals := make([]chain.Value, len(in))
		for i, v := range in {
			vals[i].Kind = v.Kind
			if v.Data != nil {
				start := len(buf)
				buf = append(buf, v.Data...)
				vals[i].Data = buf[start:len(buf):len(buf)]
			}
		}
		return vals
	}
	out.New = copyVals(c.New)
	out.Old = copyVals(c.Old)
	if c.Tables != nil {
		out.Tables = append([]string(nil), c.Tables...)
	}
	if c.Schema != nil {
		t := *c.Schema
		out.Schema = &t
	}
	return &out
}

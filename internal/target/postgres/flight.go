package postgres

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5/pgconn"
)

// flight is the batch the applier has sent and whose results it has not
// read yet: its pipeline and the buffers its requests were built from,
// kept until it lands so that a failed set statement can be sent again a
// row at a time. While a batch flies the connection belongs to its
// pipeline; the applier builds the next batch in its other buffers.
type flight struct {
	active bool
	pipe   *pgconn.Pipeline
	// guarded says the batch runs inside setSavepoint (it carries set
	// statements); missing is Unmatched before its results.
	guarded bool
	missing int64

	queue     []entry
	spans     []span
	arena     []byte
	held      []span
	heldArena []byte
}

// swapFlight trades the applier's batch buffers with the flight's.
func (a *Applier) swapFlight() {
	f := &a.flight
	a.queue, f.queue = f.queue, a.queue
	a.spans, f.spans = f.spans, a.spans
	a.arena, f.arena = f.arena, a.arena
	a.held, f.held = f.held, a.held
	a.heldArena, f.heldArena = f.heldArena, a.heldArena
}

// launch sends the queue as one pipelined batch without waiting for its
// results, and makes it the flight; the applier's buffers start empty for
// the next batch. A batch carrying set statements of held rows runs inside
// a savepoint (see land). No other batch may be in flight.
func (a *Applier) launch(ctx context.Context, pc *pgconn.PgConn) error {
	sets := false
	for i := range a.queue {
		sets = sets || a.queue[i].rows > 0
	}
	if sets {
		a.queue = slices.Insert(a.queue, 0, entry{kind: entrySQL, sql: "SAVEPOINT " + setSavepoint, table: "a savepoint"})
		a.queue = append(a.queue, entry{kind: entrySQL, sql: "RELEASE SAVEPOINT " + setSavepoint, table: "a savepoint"})
	}
	p := pc.StartPipeline(ctx)
	if err := a.write(p); err != nil {
		a.err = err
		return err
	}
	a.swapFlight()
	a.flight.active, a.flight.pipe, a.flight.guarded, a.flight.missing = true, p, sets, a.missing
	a.resetBatch()
	return nil
}

// land reads the results of the batch in flight, if any. When one of its
// set statements failed, the batch is rolled back to its savepoint and
// sent again a row at a time (diagnose), so the error names the change
// that failed. An error is final: the applier refuses further work.
func (a *Applier) land(ctx context.Context, pc *pgconn.PgConn) error {
	f := &a.flight
	if !f.active {
		return nil
	}
	a.swapFlight()
	err := a.read(f.pipe)
	if err != nil && f.guarded && a.failedAt >= 0 && a.queue[a.failedAt].rows > 0 && diagnosable(err) {
		a.missing = f.missing
		err = a.diagnose(ctx, pc, err)
	}
	for i := range a.queue {
		if a.queue[i].kind == entryPrepare {
			a.queue[i].st.queued = false
		}
	}
	a.resetBatch()
	a.swapFlight()
	f.active, f.pipe = false, nil
	if err != nil {
		a.err = err
	}
	return err
}

// resetBatch empties the applier's batch buffers, dropping the references
// the queue holds to statements.
func (a *Applier) resetBatch() {
	clear(a.queue)
	a.queue, a.spans, a.arena = a.queue[:0], a.spans[:0], a.arena[:0]
	a.held, a.heldArena = a.held[:0], a.heldArena[:0]
}

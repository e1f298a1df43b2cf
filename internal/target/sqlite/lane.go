package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/ddlcheck"
	"github.com/sluicehq/sluice/internal/target"
)

// lane applies changes on a connection of its own, one BEGIN IMMEDIATE
// transaction at a time. SQLite lets one writer in at a time, so the lease
// read at the start of a transaction stays true until its commit: no other
// run can move the position row in between.
type lane struct {
	conn *sql.Conn
	app  *applier
	cfg  target.LaneConfig
	open bool
	// err is the failure that rolled back the open transaction: the lane
	// refuses further work, so marks are never written for changes that
	// were rolled back.
	err error
}

// OpenLane opens a lane on a connection of its own, creating the control
// tables first when they are missing.
func (t *Target) OpenLane(ctx context.Context, cfg target.LaneConfig) (target.Lane, error) {
	// A broker starting cold applies from the chain's recorded schema:
	// refused, like a restore's, when its text does not pass.
	if err := ddlcheck.Check(cfg.Schema); err != nil {
		return nil, err
	}
	conn, err := t.db.Conn(ctx)
	if err != nil {
		return nil, classify(err, "connect an apply lane")
	}
	if err := control.Ensure(ctx, conn); err != nil {
		conn.Close()
		return nil, err
	}
	app := newApplier(cfg.Schema, cfg.Arbiters)
	if app.holdBack, err = foreignKeysOff(ctx, conn); err != nil {
		conn.Close()
		return nil, err
	}
	return &lane{conn: conn, app: app, cfg: cfg}, nil
}

// begin opens the lane's transaction when none is open and checks the
// lease on the stream's row, read under the write lock.
func (l *lane) begin(ctx context.Context) error {
	if l.open {
		return nil
	}
	if err := beginImmediate(ctx, l.conn, "apply transaction"); err != nil {
		return err
	}
	if err := l.checkLease(ctx); err != nil {
		rollbackTx(ctx, l.conn)
		return err
	}
	l.open = true
	return nil
}

// checkLease hands the stream's row (the zero row when there is none) to
// the lane's Lease; a lane without one checks nothing.
func (l *lane) checkLease(ctx context.Context) error {
	if l.cfg.Lease == nil {
		return nil
	}
	row, _, err := control.ReadRow(ctx, l.conn, l.cfg.Stream, "")
	if err != nil {
		return err
	}
	return l.cfg.Lease(row)
}

// fail rolls back the open transaction, forgets what the applier held, and
// makes err the lane's own.
func (l *lane) fail(ctx context.Context, err error) error {
	if l.open {
		rollbackTx(ctx, l.conn)
		l.open = false
	}
	l.app.discard()
	l.err = err
	return err
}

// Apply applies a change in the lane's open transaction, beginning one
// (and checking the lease) when none is open. Begin and commit records are
// no-ops.
func (l *lane) Apply(ctx context.Context, c *chain.Change) error {
	if l.err != nil {
		return l.err
	}
	if c.Op == chain.OpBegin || c.Op == chain.OpCommit {
		return nil
	}
	if err := l.begin(ctx); err != nil {
		return err
	}
	if err := l.app.apply(ctx, l.conn, c); err != nil {
		return l.fail(ctx, err)
	}
	return nil
}

// Track moves the lane's view of a table past a schema change another lane
// applied, after sending what the applier holds (rows decoded for the
// definition before it); when that fails, the lane fails with it.
func (l *lane) Track(c *chain.Change) {
	if c.Op == chain.OpSchema && l.err == nil && l.app.holds() {
		ctx := context.Background()
		if err := l.app.flush(ctx, l.conn); err != nil {
			l.fail(ctx, err)
		}
	}
	l.app.track(c)
}

// Commit sends what the applier holds, writes the marks and, when set, the
// position (after checking the lease again) and commits; with nothing open and no position it does
// nothing.
func (l *lane) Commit(ctx context.Context, c target.Commit) error {
	if l.err != nil {
		return l.err
	}
	if !l.open && c.Position == nil {
		return nil
	}
	if err := l.begin(ctx); err != nil {
		return err
	}
	if err := l.app.flush(ctx, l.conn); err != nil {
		return l.fail(ctx, err)
	}
	if err := control.WriteMarks(ctx, l.conn, l.cfg.Stream, c.Marks); err != nil {
		return l.fail(ctx, err)
	}
	if c.Position != nil {
		if err := l.writePosition(ctx, c); err != nil {
			return l.fail(ctx, err)
		}
	}
	if err := commitTx(ctx, l.conn, "apply transaction"); err != nil {
		return l.fail(ctx, err)
	}
	l.open = false
	return nil
}

func (l *lane) writePosition(ctx context.Context, c target.Commit) error {
	if err := l.checkLease(ctx); err != nil {
		return err
	}
	if err := control.WriteRow(ctx, l.conn, l.cfg.Stream, *c.Position); err != nil {
		return err
	}
	if c.PruneMarksExcept != "" {
		return control.PruneMarks(ctx, l.conn, l.cfg.Stream, c.PruneMarksExcept)
	}
	return nil
}

// Close rolls back what is open (what the applier holds is forgotten)
// and releases the lane's connection.
func (l *lane) Close(ctx context.Context) error {
	l.app.discard()
	if l.open {
		rollbackTx(ctx, l.conn)
		l.open = false
	}
	l.app.close()
	if err := l.conn.Close(); err != nil {
		return fmt.Errorf("close apply lane: %w", err)
	}
	return nil
}

package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/ddlcheck"
	"github.com/sluicehq/sluice/internal/target"
)

// Retries of a transaction InnoDB rolled back for a deadlock (1213) or a
// lock wait timeout (1205): the lane applies it again in place, up to
// maxAttempts times, waiting a little longer each time.
const (
	maxAttempts  = 8
	firstBackoff = 20 * time.Millisecond
	maxBackoff   = 2 * time.Second
)

// testHookImplicit, when set (by tests), runs before (after false) and
// after (after true) a schema change or truncate runs on a lane or in a
// restore; an error it returns ends the work there, as a crash would.
var testHookImplicit func(c *chain.Change, after bool) error

// holdEnv names the failpoint the integration tests SIGKILL a worker at,
// on either side of a schema change or truncate: its value is SIDE:PATH
// (SIDE before or after). The first lane or restore to reach such a
// statement on that side creates the file PATH and waits there until its
// process is killed or its context ends; once PATH exists the point is
// passed, so the restarted worker goes on. Never set outside tests.
const holdEnv = "SLUICE_TEST_MYSQL_HOLD_IMPLICIT"

var holdAt = os.Getenv(holdEnv)

// implicitHook runs testHookImplicit, and the holdEnv failpoint, for c
// when c commits implicitly.
func implicitHook(ctx context.Context, c *chain.Change, after bool) error {
	if c.Op != chain.OpSchema && c.Op != chain.OpTruncate {
		return nil
	}
	if side, path, ok := strings.Cut(holdAt, ":"); ok && (side == "after") == after {
		if f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
			f.Close()
			slog.Warn("MySQL target: holding at a failpoint until killed", "env", holdEnv, "side", side, "op", c.Op.String())
			<-ctx.Done()
			return ctx.Err()
		}
	}
	if testHookImplicit == nil {
		return nil
	}
	return testHookImplicit(c, after)
}

// lane applies changes on a connection of its own, one InnoDB transaction
// at a time. It keeps a copy of every change of the open transaction, so
// that when InnoDB rolls the transaction back for a deadlock or a lock
// wait timeout the lane begins again and re-applies them, instead of
// failing the run.
type lane struct {
	t    *Target
	conn *sql.Conn
	app  *applier
	cfg  target.LaneConfig
	open bool
	held []*chain.Change
	// err is the failure that rolled back the open transaction: the lane
	// refuses further work, so marks are never written for changes that
	// were rolled back.
	err error
	// retries counts the transactions applied again after a deadlock or a
	// lock wait timeout.
	retries int
	// committedImplicitly is set after a schema change or a truncate, whose
	// implicit commit ended the transaction: its mark is still to be
	// written, in a transaction of its own.
	committedImplicitly bool
}

// OpenLane opens a lane on a connection of its own, creating the control
// tables first when they are missing. The lane reads committed data
// (fewer gap locks between lanes) unless the target's binlog records
// statements, which READ COMMITTED does not allow.
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
	if err := t.control.Ensure(ctx, conn); err != nil {
		conn.Close()
		return nil, err
	}
	if t.flavor.binlogRow {
		if _, err := conn.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"); err != nil {
			conn.Close()
			return nil, classify(err, "set the apply lane's isolation level")
		}
	}
	if t.lockWaitSeconds > 0 {
		if _, err := conn.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = ?", t.lockWaitSeconds); err != nil {
			conn.Close()
			return nil, classify(err, "set the apply lane's lock wait timeout")
		}
	}
	return &lane{t: t, conn: conn, app: newApplier(t.flavor, cfg.Schema, cfg.Arbiters, t.multiUniqueTables()), cfg: cfg}, nil
}

// begin opens the lane's transaction when none is open and checks the
// lease on the stream's row, read with a shared lock that holds until the
// commit.
func (l *lane) begin(ctx context.Context) error {
	if l.open {
		return nil
	}
	if err := beginTx(ctx, l.conn, "apply transaction"); err != nil {
		return err
	}
	if err := l.checkLease(ctx, " LOCK IN SHARE MODE"); err != nil {
		rollbackTx(ctx, l.conn)
		return err
	}
	l.open = true
	return nil
}

// checkLease hands the stream's row (the zero row when there is none) to
// the lane's Lease; a lane without one checks nothing.
func (l *lane) checkLease(ctx context.Context, lock string) error {
	if l.cfg.Lease == nil {
		return nil
	}
	row, _, err := l.t.control.ReadRow(ctx, l.conn, l.cfg.Stream, lock)
	if err != nil {
		return err
	}
	return l.cfg.Lease(row)
}

// fail rolls back the open transaction and makes err the lane's own.
func (l *lane) fail(ctx context.Context, err error) error {
	if l.open {
		rollbackTx(ctx, l.conn)
		l.open = false
	}
	l.app.discard()
	l.held = nil
	l.err = err
	return err
}

// Apply applies a change in the lane's open transaction, beginning one
// (and checking the lease) when none is open. Begin and commit records are
// no-ops. A schema change or a truncate commits implicitly; the broker
// sends one only with nothing open and commits right after it.
func (l *lane) Apply(ctx context.Context, c *chain.Change) error {
	if l.err != nil {
		return l.err
	}
	if c.Op == chain.OpBegin || c.Op == chain.OpCommit {
		return nil
	}
	err := l.begin(ctx)
	if err == nil {
		err = implicitHook(ctx, c, false)
	}
	if err == nil {
		err = l.app.apply(ctx, l.conn, c)
	}
	if err != nil && retryable(err) {
		err = l.retry(ctx, err, func() error { return l.app.apply(ctx, l.conn, c) })
	}
	if err == nil {
		err = implicitHook(ctx, c, true)
	}
	if err != nil {
		return l.fail(ctx, classify(err, "apply transaction"))
	}
	if c.Op == chain.OpSchema || c.Op == chain.OpTruncate {
		// MySQL committed it, and what was open before it, already.
		l.open, l.committedImplicitly = false, true
		clear(l.held)
		l.held = l.held[:0]
		return nil
	}
	l.held = append(l.held, c.Clone())
	return nil
}

// retry rolls the open transaction back, begins again and re-applies the
// changes held, then runs then, until it succeeds or fails otherwise than
// by a deadlock or a lock wait timeout, at most maxAttempts times.
func (l *lane) retry(ctx context.Context, cause error, then func() error) error {
	wait := firstBackoff
	for attempt := 1; ; attempt++ {
		if attempt >= maxAttempts {
			return fmt.Errorf("apply transaction: still rolled back after %d attempts: %w", attempt, cause)
		}
		if l.open {
			rollbackTx(ctx, l.conn)
			l.open = false
		}
		l.app.discard()
		l.retries++
		slog.Warn("MySQL target: transaction rolled back by InnoDB, applying it again",
			"stream", l.cfg.Stream, "attempt", attempt, "changes", len(l.held), "cause", cause.Error())
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
		wait = min(2*wait, maxBackoff)
		err := l.replay(ctx)
		if err == nil {
			err = then()
		}
		if err == nil || !retryable(err) {
			return err
		}
		cause = err
	}
}

// replay begins a transaction and applies the held changes again.
func (l *lane) replay(ctx context.Context) error {
	if err := l.begin(ctx); err != nil {
		return err
	}
	for _, c := range l.held {
		if err := l.app.apply(ctx, l.conn, c); err != nil {
			return err
		}
	}
	return nil
}

// Track moves the lane's view of a table past a schema change another lane
// applied.
func (l *lane) Track(c *chain.Change) { l.app.track(c) }

// Commit writes the marks and, when set, the position (after checking the
// lease again, with the row locked for update) and commits; with nothing
// open and no position it does nothing.
func (l *lane) Commit(ctx context.Context, c target.Commit) error {
	if l.err != nil {
		return l.err
	}
	if !l.open && c.Position == nil && !l.committedImplicitly {
		return nil
	}
	finish := func() error {
		if err := l.app.flush(ctx, l.conn); err != nil {
			return err
		}
		if err := l.t.control.WriteMarks(ctx, l.conn, l.cfg.Stream, c.Marks); err != nil {
			return err
		}
		if c.Position != nil {
			if err := l.writePosition(ctx, c); err != nil {
				return err
			}
		}
		_, err := l.conn.ExecContext(ctx, "COMMIT")
		return err
	}
	err := l.begin(ctx)
	if err == nil {
		err = finish()
	}
	if err != nil && retryable(err) {
		err = l.retry(ctx, err, finish)
	}
	if err != nil {
		return l.fail(ctx, classify(err, "commit apply transaction"))
	}
	l.open, l.committedImplicitly = false, false
	clear(l.held)
	l.held = l.held[:0]
	return nil
}

func (l *lane) writePosition(ctx context.Context, c target.Commit) error {
	if err := l.checkLease(ctx, " FOR UPDATE"); err != nil {
		return err
	}
	if err := l.t.control.WriteRow(ctx, l.conn, l.cfg.Stream, *c.Position); err != nil {
		return err
	}
	if c.PruneMarksExcept != "" {
		return l.t.control.PruneMarks(ctx, l.conn, l.cfg.Stream, c.PruneMarksExcept)
	}
	return nil
}

// Close rolls back what is open and releases the lane's connection.
func (l *lane) Close(ctx context.Context) error {
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

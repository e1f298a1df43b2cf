package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

func init() {
	target.Register("postgres", "postgres://user@host:5432/db (or key=value)", open, "postgresql", "pg")
	target.RegisterTraits("postgres", target.Traits{Describe: describe})
}

// describe checks a target DSN's form and names its database host:port/db.
func describe(dsn string) (string, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "", errcode.New(errcode.ConfigInvalid, "--target %s does not parse: %s", credentials.Redact(dsn), credentials.Redact(err.Error()))
	}
	return fmt.Sprintf("%s:%d/%s", cfg.Host, cfg.Port, cfg.Database), nil
}

// Target is an open PostgreSQL target: one control connection for restore,
// judgments and the position, and a connection of its own per lane.
type Target struct {
	conn *pgx.Conn
	dsn  string
}

var (
	_ target.Target     = (*Target)(nil)
	_ target.Lane       = (*lane)(nil)
	_ target.StateStore = stateStore{}
)

func open(ctx context.Context, dsn string, _ map[string]string) (target.Target, error) {
	return Open(ctx, dsn)
}

// Open connects to a PostgreSQL target (see Connect).
func Open(ctx context.Context, dsn string) (*Target, error) {
	conn, err := connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	return &Target{conn: conn, dsn: dsn}, nil
}

// Conn is the target's control connection.
func (t *Target) Conn() *pgx.Conn { return t.conn }

// Prepare is Prepare on the control connection.
func (t *Target) Prepare(ctx context.Context, s *chain.Schema, replace bool) error {
	return prepare(ctx, t.conn, s, replace)
}

// LoadTable is LoadTable on the control connection.
func (t *Target) LoadTable(ctx context.Context, ch *chain.Chain, s *chain.Schema, td chain.TableData, progress target.LoadProgress) (int64, error) {
	return loadTable(ctx, t.conn, ch, s, td, progress)
}

// Finish is Finish on the control connection.
func (t *Target) Finish(ctx context.Context, s *chain.Schema) error { return finish(ctx, t.conn, s) }

// JudgeIncremental is JudgeIncremental on the control connection.
func (t *Target) JudgeIncremental(ctx context.Context, ch *chain.Chain, m *chain.Manifest, schema *chain.Schema, sel *target.Selection) (target.Judgment, error) {
	return judgeIncremental(ctx, t.conn, ch, m, schema, sel)
}

// JudgeColdStart is JudgeColdStart on the control connection.
func (t *Target) JudgeColdStart(ctx context.Context, schema *chain.Schema) error {
	return judgeColdStart(ctx, t.conn, schema)
}

// State keeps positions and marks through the control connection.
func (t *Target) State() target.StateStore { return stateStore{conn: t.conn} }

// MaxLanes is 0: PostgreSQL takes any number of concurrent lanes.
func (t *Target) MaxLanes() int { return 0 }

// Close closes the control connection.
func (t *Target) Close(ctx context.Context) error { return t.conn.Close(ctx) }

// OpenLane opens a lane on a connection of its own that applies like
// PostgreSQL's own subscriber (see replicaRole).
func (t *Target) OpenLane(ctx context.Context, cfg target.LaneConfig) (target.Lane, error) {
	conn, err := connect(ctx, t.dsn)
	if err != nil {
		return nil, err
	}
	warnSuperuser(conn.PgConn())
	a := newApplier(cfg.Schema)
	if a.err != nil {
		// A broker starting cold applies from the chain's recorded
		// schema: refused, like a restore's, when its text does not pass.
		_ = conn.Close(ctx)
		return nil, a.err
	}
	replica := replicaRole(ctx, conn)
	a.UseArbiters(cfg.Arbiters)
	a.HoldBack(replica)
	return &lane{conn: conn, applier: a, cfg: cfg}, nil
}

// replicaRole makes the lane's session apply like PostgreSQL's own
// subscriber: foreign keys and triggers do not fire for replayed rows (rows
// of one source transaction may commit on different lanes in any order), and
// commits do not wait for the WAL flush — a commit lost in a target crash
// loses its position and marks with it, so the change is simply applied
// again. A role that may not set the replication role applies with foreign
// keys and triggers firing, one statement a change in the source's order;
// replicaRole reports whether the role was set.
func replicaRole(ctx context.Context, conn *pgx.Conn) (replica bool) {
	_, err := conn.Exec(ctx, "SET session_replication_role = replica")
	_, _ = conn.Exec(ctx, "SET synchronous_commit = off")
	return err == nil
}

// stateStore is the StateStore of a PostgreSQL target.
type stateStore struct{ conn *pgx.Conn }

func (s stateStore) EnsureControlTables(ctx context.Context) error {
	if err := ensureControlTables(ctx, s.conn); err != nil {
		return err
	}
	return dropLegacyRestoreLinks(ctx, s.conn)
}

func (s stateStore) ReadState(ctx context.Context, stream string) (target.StateRow, bool, error) {
	r, ok, err := readStateIfAny(ctx, s.conn, stream)
	return target.StateRow(r), ok, err
}

func (s stateStore) ReplaceState(ctx context.Context, stream string, row *target.StateRow) error {
	return pgx.BeginFunc(ctx, s.conn, func(tx pgx.Tx) error {
		if err := clearStream(ctx, tx, stream); err != nil {
			return err
		}
		if row != nil {
			return writeRow(ctx, tx, stream, *row)
		}
		return nil
	})
}

func (s stateStore) UpdateState(ctx context.Context, stream string, update func(target.StateRow) (target.StateRow, error)) error {
	return pgx.BeginFunc(ctx, s.conn, func(tx pgx.Tx) error {
		row, err := lockRow(ctx, tx, stream, true)
		if err != nil {
			return err
		}
		if row.Token == "" {
			return target.ErrNoState
		}
		next, err := update(row)
		if err != nil {
			return err
		}
		return writeRow(ctx, tx, stream, next)
	})
}

func (s stateStore) ReadMarks(ctx context.Context, stream string, add func(chain.Identity, uint32, uint32)) error {
	return readMarks(ctx, s.conn, stream, add)
}

// lane is one PostgreSQL connection applying its share of the changes in
// its own transactions, each checking the stream's lease.
type lane struct {
	conn    *pgx.Conn
	applier *applier
	cfg     target.LaneConfig
	tx      pgx.Tx
	marks   marksLayout
}

func (l *lane) begin(ctx context.Context) error {
	if l.tx != nil {
		return nil
	}
	tx, err := l.conn.Begin(ctx)
	if err != nil {
		return classify(err, "begin apply transaction")
	}
	row, err := lockRow(ctx, tx, l.cfg.Stream, false)
	if err == nil && l.cfg.Lease != nil {
		err = l.cfg.Lease(row)
	}
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	l.tx = tx
	return nil
}

func (l *lane) Apply(ctx context.Context, c *chain.Change) error {
	if err := l.begin(ctx); err != nil {
		return err
	}
	return l.applier.Apply(ctx, l.tx, c)
}

func (l *lane) Track(c *chain.Change) { l.applier.Track(c) }

func (l *lane) Commit(ctx context.Context, c target.Commit) error {
	if l.tx == nil && c.Position == nil {
		return nil
	}
	if err := l.begin(ctx); err != nil {
		return err
	}
	err := l.applier.Flush(ctx, l.tx)
	if err == nil {
		err = writeMarks(ctx, l.tx, l.cfg.Stream, c.Marks, &l.marks)
	}
	if err == nil && c.Position != nil {
		err = l.writePosition(ctx, c)
	}
	if err == nil {
		if cerr := l.tx.Commit(ctx); cerr != nil {
			err = classify(cerr, "commit apply transaction")
		}
	}
	if err != nil {
		_ = l.tx.Rollback(context.WithoutCancel(ctx))
	}
	l.tx = nil
	return err
}

func (l *lane) writePosition(ctx context.Context, c target.Commit) error {
	row, err := lockRow(ctx, l.tx, l.cfg.Stream, true)
	if err != nil {
		return err
	}
	if l.cfg.Lease != nil {
		if err := l.cfg.Lease(row); err != nil {
			return err
		}
	}
	if err := writeRow(ctx, l.tx, l.cfg.Stream, *c.Position); err != nil {
		return err
	}
	if c.PruneMarksExcept != "" {
		return pruneMarks(ctx, l.tx, l.cfg.Stream, c.PruneMarksExcept)
	}
	return nil
}

func (l *lane) Close(ctx context.Context) error {
	var errs []error
	if l.tx != nil {
		errs = append(errs, l.tx.Rollback(ctx))
	}
	errs = append(errs, l.applier.Release(ctx, l.conn), l.conn.Close(ctx))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close apply lane: %w", err)
	}
	return nil
}

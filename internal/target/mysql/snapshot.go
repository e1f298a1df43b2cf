package mysql

import (
	"context"
	"database/sql"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/readback"
	"github.com/sluicehq/sluice/internal/value"
)

var _ readback.Reader = (*Target)(nil)

// snapshot is one InnoDB consistent snapshot on a connection of its own.
type snapshot struct {
	t    *Target
	conn *sql.Conn
}

// OpenSnapshot starts a consistent, read-only snapshot of the target
// database (REPEATABLE READ, WITH CONSISTENT SNAPSHOT), for a comparison
// (`sluice verify`). Values read back by the rules ReadRows follows.
func (t *Target) OpenSnapshot(ctx context.Context) (readback.Snapshot, error) {
	conn, err := t.db.Conn(ctx)
	if err != nil {
		return nil, classify(err, "connect for a snapshot")
	}
	for _, q := range []string{"SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ", "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			conn.Close()
			return nil, classify(err, "begin a snapshot")
		}
	}
	return &snapshot{t: t, conn: conn}, nil
}

func (s *snapshot) Count(ctx context.Context, tb *chain.Table) (int64, bool, error) {
	typ, err := objectType(ctx, s.conn, tableName(tb))
	if err != nil {
		return 0, false, err
	}
	if typ == "" {
		return 0, false, nil
	}
	var n int64
	if err := s.conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+quoteIdent(tableName(tb))).Scan(&n); err != nil {
		return 0, true, classify(err, "count "+tableName(tb))
	}
	return n, true, nil
}

// Scan reads the table as ReadRows does, in the snapshot.
func (s *snapshot) Scan(ctx context.Context, tb *chain.Table, fn func([]value.Value) error) error {
	return s.t.scanTable(ctx, s.conn, tb, "", fn)
}

func (s *snapshot) Close(ctx context.Context) error {
	_, _ = s.conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	return s.conn.Close()
}

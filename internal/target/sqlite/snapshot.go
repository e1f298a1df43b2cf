package sqlite

import (
	"context"
	"database/sql"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/readback"
	"github.com/sluicehq/sluice/internal/value"
)

var _ readback.Reader = (*Target)(nil)

// snapshot is one read transaction on a connection of its own: in WAL mode
// every read in it sees the file as of its first read.
type snapshot struct {
	conn *sql.Conn
}

// OpenSnapshot starts a read transaction on the target file for a
// comparison (`sluice verify`); values read back by the rules ReadRows
// follows.
func (t *Target) OpenSnapshot(ctx context.Context) (readback.Snapshot, error) {
	conn, err := t.db.Conn(ctx)
	if err != nil {
		return nil, classify(err, "connect for a snapshot")
	}
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		conn.Close()
		return nil, classify(err, "begin a snapshot")
	}
	// The first read fixes the snapshot for every later one.
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&n); err != nil {
		conn.Close()
		return nil, classify(err, "begin a snapshot")
	}
	return &snapshot{conn: conn}, nil
}

func (s *snapshot) Count(ctx context.Context, tb *chain.Table) (int64, bool, error) {
	var tables int
	if err := s.conn.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", tableName(tb)).Scan(&tables); err != nil {
		return 0, false, classify(err, "look up "+tableName(tb))
	}
	if tables == 0 {
		return 0, false, nil
	}
	var n int64
	if err := s.conn.QueryRowContext(ctx, "SELECT count(*) FROM "+quoteIdent(tableName(tb))).Scan(&n); err != nil {
		return 0, true, classify(err, "count "+tableName(tb))
	}
	return n, true, nil
}

func (s *snapshot) Scan(ctx context.Context, tb *chain.Table, fn func([]value.Value) error) error {
	return scanTable(ctx, s.conn, tb, "", fn)
}

func (s *snapshot) Close(ctx context.Context) error {
	_, _ = s.conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	return s.conn.Close()
}

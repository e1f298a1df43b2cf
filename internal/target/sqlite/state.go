package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"math"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// controlTablesSQL creates the broker's position and marks tables. A
// commit LSN is stored as the 64-bit signed integer of the same bits, and
// a mark's applied ordinals as a JSON array of inclusive bounds
// [lo1, hi1, lo2, hi2, …].
var controlTablesSQL = []string{
	`CREATE TABLE IF NOT EXISTS ` + stateTable + ` (
		stream_id  TEXT PRIMARY KEY,
		token      TEXT NOT NULL,
		checksum   TEXT NOT NULL,
		updated_at TEXT)`,
	`CREATE TABLE IF NOT EXISTS ` + marksTable + ` (
		stream_id     TEXT    NOT NULL,
		link_id       TEXT    NOT NULL,
		xid           INTEGER NOT NULL,
		commit_lsn    INTEGER NOT NULL,
		tx_id         TEXT    NOT NULL DEFAULT '',
		first_ordinal INTEGER NOT NULL,
		ranges        TEXT    NOT NULL,
		PRIMARY KEY (stream_id, xid, commit_lsn, tx_id, first_ordinal))`,
}

// nowSQL is the current time as the control tables record it.
const nowSQL = `strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`

// marksErr codes a failure to create or write the control tables: a
// database that may not be written leaves the marks unusable.
func marksErr(err error, what string) error {
	if readOnly(err) {
		return errcode.Wrap(errcode.ApplyMarksUnavailable, err, "%s", what)
	}
	return classify(err, what)
}

// ensureControlTables creates the control tables on q when missing.
func ensureControlTables(ctx context.Context, q execer) error {
	for _, s := range controlTablesSQL {
		if _, err := q.ExecContext(ctx, s); err != nil {
			return marksErr(err, "create the broker's control tables")
		}
	}
	return nil
}

// tableExists reports whether the database has a table of that name.
func tableExists(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, name string) (bool, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`, name).Scan(&n); err != nil {
		return false, classify(err, "look up "+name)
	}
	return n > 0, nil
}

// readRow reads a stream's position row on q; found is false when there
// is none, or no control table yet.
func readRow(ctx context.Context, q execer, stream string) (row target.StateRow, found bool, err error) {
	ok, err := tableExists(ctx, q, stateTable)
	if err != nil || !ok {
		return row, false, err
	}
	err = q.QueryRowContext(ctx, `SELECT token, checksum FROM `+stateTable+` WHERE stream_id = ?`, stream).Scan(&row.Token, &row.Checksum)
	if errors.Is(err, sql.ErrNoRows) {
		return target.StateRow{}, false, nil
	}
	if err != nil {
		return target.StateRow{}, false, classify(err, "read "+stateTable)
	}
	return row, true, nil
}

// writeRow stores a stream's position row on q (insert or replace).
func writeRow(ctx context.Context, q execer, stream string, row target.StateRow) error {
	_, err := q.ExecContext(ctx, `INSERT INTO `+stateTable+` (stream_id, token, checksum, updated_at) VALUES (?, ?, ?, `+nowSQL+`)
		ON CONFLICT (stream_id) DO UPDATE SET token = excluded.token, checksum = excluded.checksum, updated_at = excluded.updated_at`,
		stream, row.Token, row.Checksum)
	if err != nil {
		return marksErr(err, "write "+stateTable)
	}
	return nil
}

// writeMarks stores a batch of marks on q; a mark already there stays.
func writeMarks(ctx context.Context, q execer, stream string, b *target.MarkBatch) error {
	if b.Empty() {
		return nil
	}
	return b.Each(func(id chain.Identity, ranges []uint32) error {
		_, err := q.ExecContext(ctx, `INSERT INTO `+marksTable+` (stream_id, link_id, xid, commit_lsn, tx_id, first_ordinal, ranges) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING`, stream, b.Link, int64(id.XID), int64(id.CommitLSN), id.Tx, int64(ranges[0]), target.RangesJSON(ranges))
		if err != nil {
			return marksErr(err, "write "+marksTable)
		}
		return nil
	})
}

// pruneMarks deletes a stream's marks of every link but keep.
func pruneMarks(ctx context.Context, q execer, stream, keep string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM `+marksTable+` WHERE stream_id = ? AND link_id <> ?`, stream, keep); err != nil {
		return marksErr(err, "prune "+marksTable)
	}
	return nil
}

// stateStore is the StateStore of an SQLite target.
type stateStore struct{ db *sql.DB }

// EnsureControlTables creates the position and marks tables when missing.
func (s stateStore) EnsureControlTables(ctx context.Context) error {
	return withWrite(ctx, s.db, "create the broker's control tables", func(conn *sql.Conn) error {
		if err := ensureControlTables(ctx, conn); err != nil {
			return err
		}
		// Restores once recorded their incrementals in a table of their
		// own; they apply under a position now, and the old table goes.
		if _, err := conn.ExecContext(ctx, `DROP TABLE IF EXISTS `+legacyRestoreLinksTable); err != nil {
			return classify(err, "drop "+legacyRestoreLinksTable)
		}
		return nil
	})
}

// ReadState returns a stream's position row; found is false when there is
// none or the control tables do not exist.
func (s stateStore) ReadState(ctx context.Context, stream string) (target.StateRow, bool, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return target.StateRow{}, false, classify(err, "connect to read "+stateTable)
	}
	defer conn.Close()
	return readRow(ctx, conn, stream)
}

// ReplaceState deletes a stream's position and marks and, when row is not
// nil, writes row as its position, in one transaction.
func (s stateStore) ReplaceState(ctx context.Context, stream string, row *target.StateRow) error {
	return withWrite(ctx, s.db, "replace the position of stream "+stream, func(conn *sql.Conn) error {
		if err := ensureControlTables(ctx, conn); err != nil {
			return err
		}
		if _, err := conn.ExecContext(ctx, `DELETE FROM `+stateTable+` WHERE stream_id = ?`, stream); err != nil {
			return marksErr(err, "clear "+stateTable)
		}
		if _, err := conn.ExecContext(ctx, `DELETE FROM `+marksTable+` WHERE stream_id = ?`, stream); err != nil {
			return marksErr(err, "clear "+marksTable)
		}
		if row == nil {
			return nil
		}
		return writeRow(ctx, conn, stream, *row)
	})
}

// UpdateState replaces a stream's row by what update returns, under the
// database's write lock; target.ErrNoState when there is no row.
func (s stateStore) UpdateState(ctx context.Context, stream string, update func(target.StateRow) (target.StateRow, error)) error {
	return withWrite(ctx, s.db, "update the position of stream "+stream, func(conn *sql.Conn) error {
		row, found, err := readRow(ctx, conn, stream)
		if err != nil {
			return err
		}
		if !found {
			return target.ErrNoState
		}
		next, err := update(row)
		if err != nil {
			return err
		}
		return writeRow(ctx, conn, stream, next)
	})
}

// ReadMarks calls add with every range of ordinals the stream's marks
// record as applied.
func (s stateStore) ReadMarks(ctx context.Context, stream string, add func(tx chain.Identity, first, last uint32)) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return classify(err, "connect to read "+marksTable)
	}
	defer conn.Close()
	ok, err := tableExists(ctx, conn, marksTable)
	if err != nil || !ok {
		return err
	}
	rows, err := conn.QueryContext(ctx, `SELECT xid, commit_lsn, tx_id, ranges FROM `+marksTable+` WHERE stream_id = ?`, stream)
	if err != nil {
		return marksErr(err, "read "+marksTable)
	}
	defer rows.Close()
	for rows.Next() {
		var xid, lsn int64
		var txID, text string
		if err := rows.Scan(&xid, &lsn, &txID, &text); err != nil {
			return marksErr(err, "read "+marksTable)
		}
		ranges, err := target.ParseRangesJSON(text)
		if err != nil || xid < 0 || xid > math.MaxUint32 {
			return errcode.New(errcode.ApplyMarksUnavailable, "a row of %s (xid %d) is damaged: ranges %q", marksTable, xid, text)
		}
		id := chain.Identity{XID: uint32(xid), CommitLSN: uint64(lsn), Tx: txID}
		for i := 0; i < len(ranges); i += 2 {
			add(id, ranges[i], ranges[i+1])
		}
	}
	if err := rows.Err(); err != nil {
		return marksErr(err, "read "+marksTable)
	}
	return nil
}

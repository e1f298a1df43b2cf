package mysql

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// controlTablesSQL creates the broker's position and marks tables. A
// mark's applied ordinals are a JSON array of inclusive bounds
// [lo1, hi1, lo2, hi2, …]; tx_id is the opaque transaction identity (a
// MySQL or MariaDB GTID, empty for a PostgreSQL xid and commit LSN).
func controlTablesSQL(f flavor) []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + stateTable + ` (
			stream_id  VARCHAR(255) NOT NULL PRIMARY KEY,
			token      LONGTEXT     NOT NULL,
			checksum   VARCHAR(255) NOT NULL,
			updated_at DATETIME(6)  NOT NULL)` + tableOptions(f),
		`CREATE TABLE IF NOT EXISTS ` + marksTable + ` (
			stream_id     VARCHAR(255)    NOT NULL,
			link_id       VARCHAR(255)    NOT NULL,
			xid           BIGINT UNSIGNED NOT NULL,
			commit_lsn    BIGINT UNSIGNED NOT NULL,
			tx_id         VARCHAR(255)    NOT NULL DEFAULT '',
			first_ordinal INT UNSIGNED    NOT NULL,
			ranges        LONGTEXT        NOT NULL,
			PRIMARY KEY (stream_id, xid, commit_lsn, tx_id, first_ordinal),
			KEY sluice_marks_link (stream_id, link_id))` + tableOptions(f),
	}
}

// marksErr codes a failure to create or write the control tables: a role
// that may not do it leaves the marks unusable.
func marksErr(err error, what string) error {
	if privileged(err) {
		return errcode.Wrap(errcode.ApplyMarksUnavailable, err, "%s", what)
	}
	return classify(err, what)
}

// ensureControlTables creates the control tables on q when missing (a
// user that may only write tables an administrator created needs no
// CREATE). Each CREATE commits implicitly, so it runs outside any
// transaction.
func ensureControlTables(ctx context.Context, q execer, f flavor) error {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN (?, ?)`,
		stateTable, marksTable).Scan(&n); err != nil {
		return classify(err, "look up the broker's control tables")
	}
	if n == 2 {
		return nil
	}
	for _, s := range controlTablesSQL(f) {
		if _, err := q.ExecContext(ctx, s); err != nil {
			return marksErr(err, "create the broker's control tables")
		}
	}
	return nil
}

// readRow reads a stream's position row on q, with lock (" FOR UPDATE",
// " LOCK IN SHARE MODE" or ""); found is false when there is none, or no
// control table yet.
func readRow(ctx context.Context, q execer, stream, lock string) (row target.StateRow, found bool, err error) {
	err = q.QueryRowContext(ctx, `SELECT token, checksum FROM `+stateTable+` WHERE stream_id = ?`+lock, stream).Scan(&row.Token, &row.Checksum)
	if errors.Is(err, sql.ErrNoRows) {
		return target.StateRow{}, false, nil
	}
	if e, ok := serverError(err); ok && e.Number == erNoSuchTable {
		return target.StateRow{}, false, nil
	}
	if err != nil {
		return target.StateRow{}, false, classify(err, "read "+stateTable)
	}
	return row, true, nil
}

// writeRow stores a stream's position row on q (insert or replace).
func writeRow(ctx context.Context, q execer, stream string, row target.StateRow) error {
	_, err := q.ExecContext(ctx, `INSERT INTO `+stateTable+` (stream_id, token, checksum, updated_at) VALUES (?, ?, ?, UTC_TIMESTAMP(6))
		ON DUPLICATE KEY UPDATE token = VALUES(token), checksum = VALUES(checksum), updated_at = VALUES(updated_at)`,
		stream, row.Token, row.Checksum)
	if err != nil {
		return marksErr(err, "write "+stateTable)
	}
	return nil
}

// writeMarks stores a batch of marks on q in one statement; a mark already
// there stays.
func writeMarks(ctx context.Context, q execer, stream string, b *target.MarkBatch) error {
	if b.Empty() {
		return nil
	}
	var sb strings.Builder
	sb.WriteString(`INSERT INTO ` + marksTable + ` (stream_id, link_id, xid, commit_lsn, tx_id, first_ordinal, ranges) VALUES `)
	var args []any
	err := b.Each(func(id chain.Identity, ranges []uint32) error {
		if len(args) > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("(?, ?, ?, ?, ?, ?, ?)")
		args = append(args, stream, b.Link, uint64(id.XID), id.CommitLSN, id.Tx, uint64(ranges[0]), target.RangesJSON(ranges))
		return nil
	})
	if err != nil {
		return err
	}
	sb.WriteString(" ON DUPLICATE KEY UPDATE stream_id = stream_id")
	if _, err := q.ExecContext(ctx, sb.String(), args...); err != nil {
		return marksErr(err, "write "+marksTable)
	}
	return nil
}

// pruneMarks deletes a stream's marks of every link but keep.
func pruneMarks(ctx context.Context, q execer, stream, keep string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM `+marksTable+` WHERE stream_id = ? AND link_id <> ?`, stream, keep); err != nil {
		return marksErr(err, "prune "+marksTable)
	}
	return nil
}

// stateStore is the StateStore of a MySQL target.
type stateStore struct{ t *Target }

// EnsureControlTables creates the position and marks tables when missing.
func (s stateStore) EnsureControlTables(ctx context.Context) error {
	conn, err := s.t.db.Conn(ctx)
	if err != nil {
		return classify(err, "connect to create the broker's control tables")
	}
	defer conn.Close()
	if err := ensureControlTables(ctx, conn, s.t.flavor); err != nil {
		return err
	}
	// Restores once recorded their incrementals in a table of their own;
	// they apply under a position now, and the old table goes.
	if _, err := conn.ExecContext(ctx, `DROP TABLE IF EXISTS `+legacyRestoreLinksTable); err != nil {
		return classify(err, "drop "+legacyRestoreLinksTable)
	}
	return nil
}

// ReadState returns a stream's position row; found is false when there is
// none or the control tables do not exist.
func (s stateStore) ReadState(ctx context.Context, stream string) (target.StateRow, bool, error) {
	conn, err := s.t.db.Conn(ctx)
	if err != nil {
		return target.StateRow{}, false, classify(err, "connect to read "+stateTable)
	}
	defer conn.Close()
	return readRow(ctx, conn, stream, "")
}

// ReplaceState deletes a stream's position and marks and, when row is not
// nil, writes row as its position, in one transaction.
func (s stateStore) ReplaceState(ctx context.Context, stream string, row *target.StateRow) error {
	if err := s.EnsureControlTables(ctx); err != nil {
		return err
	}
	return withTx(ctx, s.t.db, "replace the position of stream "+stream, func(conn *sql.Conn) error {
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

// UpdateState replaces a stream's row by what update returns, with the
// row locked; target.ErrNoState when there is no row.
func (s stateStore) UpdateState(ctx context.Context, stream string, update func(target.StateRow) (target.StateRow, error)) error {
	return withTx(ctx, s.t.db, "update the position of stream "+stream, func(conn *sql.Conn) error {
		row, found, err := readRow(ctx, conn, stream, " FOR UPDATE")
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
	rows, err := s.t.db.QueryContext(ctx, `SELECT xid, commit_lsn, tx_id, ranges FROM `+marksTable+` WHERE stream_id = ?`, stream)
	if e, ok := serverError(err); ok && e.Number == erNoSuchTable {
		return nil
	}
	if err != nil {
		return marksErr(err, "read "+marksTable)
	}
	defer rows.Close()
	for rows.Next() {
		var xid, lsn uint64
		var txID, text string
		if err := rows.Scan(&xid, &lsn, &txID, &text); err != nil {
			return marksErr(err, "read "+marksTable)
		}
		ranges, err := target.ParseRangesJSON(text)
		if err != nil || xid > math.MaxUint32 {
			return errcode.New(errcode.ApplyMarksUnavailable, "a row of %s (xid %d, tx %q) is damaged: ranges %q", marksTable, xid, txID, text)
		}
		id := chain.Identity{XID: uint32(xid), CommitLSN: lsn, Tx: txID}
		for i := 0; i < len(ranges); i += 2 {
			add(id, ranges[i], ranges[i+1])
		}
	}
	if err := rows.Err(); err != nil {
		return marksErr(err, "read "+marksTable)
	}
	return nil
}

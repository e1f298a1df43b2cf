package sqlkit

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// Control is the broker's two control tables on a database/sql target: the
// position table (a stream's row: token, checksum, updated_at) and the
// marks table (per stream, link and source transaction, the ranges of
// ordinals applied, as a JSON array of inclusive bounds [lo1, hi1, …]). It
// reads and writes them the same way on every engine; an engine gives its
// dialect: the DDL, the upsert clauses, how it locks and how it says a
// table is missing.
type Control struct {
	// StateTable and MarksTable name the two tables.
	StateTable, MarksTable string
	// Create holds the statements creating both tables when missing.
	Create []string
	// CountSQL counts how many of the two tables, named by its two
	// arguments (StateTable, MarksTable), exist.
	CountSQL string
	// Missing reports whether err says a control table does not exist.
	Missing func(err error) bool
	// Now is the SQL expression of the current time updated_at records.
	Now string
	// UpsertRow is the clause after INSERT … VALUES that replaces a
	// stream's existing row.
	UpsertRow string
	// KeepMark is the clause after INSERT … VALUES that leaves a mark
	// already there as it is.
	KeepMark string
	// SignedLSN stores a commit LSN as the signed 64-bit integer of the
	// same bits, for an engine without unsigned 64-bit integers.
	SignedLSN bool
	// Begin opens a write transaction.
	Begin string
	// ForUpdate follows the SELECT of a row read to be replaced: the
	// engine's row lock, or "" where a write transaction locks already.
	ForUpdate string
	// CreateInTx creates the tables inside a write transaction (an
	// engine whose DDL is transactional) instead of outside any (one whose
	// DDL commits implicitly).
	CreateInTx bool
	// Legacy names tables of earlier releases EnsureControlTables drops.
	Legacy []string
	// Classify codes a driver error; MarksErr a failure to create or
	// write the control tables (a role or file that may not leaves the
	// marks unusable).
	Classify, MarksErr Classify
}

// marksPerStatement bounds the rows of one marks INSERT (7 arguments
// each), within every engine's limit on a statement's arguments.
const marksPerStatement = 500

// Ensure creates the control tables through conn unless both exist (then
// it writes nothing and takes no lock).
func (c *Control) Ensure(ctx context.Context, conn *sql.Conn) error {
	var n int
	if err := conn.QueryRowContext(ctx, c.CountSQL, c.StateTable, c.MarksTable).Scan(&n); err != nil {
		return c.Classify(err, "look up the broker's control tables")
	}
	if n == 2 {
		return nil
	}
	create := func(q Execer) error {
		for _, s := range c.Create {
			if _, err := q.ExecContext(ctx, s); err != nil {
				return c.MarksErr(err, "create the broker's control tables")
			}
		}
		return nil
	}
	if !c.CreateInTx {
		return create(conn)
	}
	if err := Begin(ctx, conn, c.Begin, c.MarksErr, "creating the control tables"); err != nil {
		return err
	}
	if err := create(conn); err != nil {
		Rollback(ctx, conn)
		return err
	}
	if err := Commit(ctx, conn, c.Classify, "creating the control tables"); err != nil {
		Rollback(ctx, conn)
		return err
	}
	return nil
}

// ReadRow reads a stream's position row on q, followed by lock (the
// engine's locking clause, or ""); found is false when there is none or no
// control table yet.
func (c *Control) ReadRow(ctx context.Context, q Execer, stream, lock string) (row target.StateRow, found bool, err error) {
	err = q.QueryRowContext(ctx, `SELECT token, checksum FROM `+c.StateTable+` WHERE stream_id = ?`+lock, stream).Scan(&row.Token, &row.Checksum)
	switch {
	case errors.Is(err, sql.ErrNoRows), err != nil && c.Missing(err):
		return target.StateRow{}, false, nil
	case err != nil:
		return target.StateRow{}, false, c.Classify(err, "read "+c.StateTable)
	}
	return row, true, nil
}

// WriteRow stores a stream's position row on q, inserted or replaced.
func (c *Control) WriteRow(ctx context.Context, q Execer, stream string, row target.StateRow) error {
	_, err := q.ExecContext(ctx, `INSERT INTO `+c.StateTable+` (stream_id, token, checksum, updated_at) VALUES (?, ?, ?, `+c.Now+`) `+c.UpsertRow,
		stream, row.Token, row.Checksum)
	if err != nil {
		return c.MarksErr(err, "write "+c.StateTable)
	}
	return nil
}

// WriteMarks stores a batch of marks on q, a few hundred rows a
// statement; a mark already there stays.
func (c *Control) WriteMarks(ctx context.Context, q Execer, stream string, b *target.MarkBatch) error {
	if b.Empty() {
		return nil
	}
	var args []any
	flush := func() error {
		if len(args) == 0 {
			return nil
		}
		rows := strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?), ", len(args)/7), ", ")
		_, err := q.ExecContext(ctx, `INSERT INTO `+c.MarksTable+` (stream_id, link_id, xid, commit_lsn, tx_id, first_ordinal, ranges) VALUES `+rows+` `+c.KeepMark, args...)
		args = args[:0]
		if err != nil {
			return c.MarksErr(err, "write "+c.MarksTable)
		}
		return nil
	}
	err := b.Each(func(id chain.Identity, ranges []uint32) error {
		var lsn any = id.CommitLSN
		if c.SignedLSN {
			lsn = int64(id.CommitLSN)
		}
		args = append(args, stream, b.Link, int64(id.XID), lsn, id.Tx, int64(ranges[0]), target.RangesJSON(ranges))
		if len(args) == 7*marksPerStatement {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// PruneMarks deletes a stream's marks of every link but keep.
func (c *Control) PruneMarks(ctx context.Context, q Execer, stream, keep string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM `+c.MarksTable+` WHERE stream_id = ? AND link_id <> ?`, stream, keep); err != nil {
		return c.MarksErr(err, "prune "+c.MarksTable)
	}
	return nil
}

// Store is the control tables of db as a target.StateStore.
func (c *Control) Store(db *sql.DB) target.StateStore { return controlStore{c: c, db: db} }

// controlStore is Control's StateStore on one database.
type controlStore struct {
	c  *Control
	db *sql.DB
}

// EnsureControlTables creates the position and marks tables when missing
// and drops the tables of earlier releases.
func (s controlStore) EnsureControlTables(ctx context.Context) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return s.c.Classify(err, "connect to create the broker's control tables")
	}
	defer conn.Close()
	if err := s.c.Ensure(ctx, conn); err != nil {
		return err
	}
	for _, name := range s.c.Legacy {
		if _, err := conn.ExecContext(ctx, `DROP TABLE IF EXISTS `+name); err != nil {
			return s.c.Classify(err, "drop "+name)
		}
	}
	return nil
}

// ReadState returns a stream's position row; found is false when there is
// none or the control tables do not exist.
func (s controlStore) ReadState(ctx context.Context, stream string) (target.StateRow, bool, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return target.StateRow{}, false, s.c.Classify(err, "connect to read "+s.c.StateTable)
	}
	defer conn.Close()
	return s.c.ReadRow(ctx, conn, stream, "")
}

// ReplaceState deletes a stream's position and marks and, when row is not
// nil, writes row as its position, in one transaction.
func (s controlStore) ReplaceState(ctx context.Context, stream string, row *target.StateRow) error {
	if err := s.EnsureControlTables(ctx); err != nil {
		return err
	}
	return WithTx(ctx, s.db, s.c.Begin, s.c.Classify, "replace the position of stream "+stream, func(conn *sql.Conn) error {
		for _, table := range []string{s.c.StateTable, s.c.MarksTable} {
			if _, err := conn.ExecContext(ctx, `DELETE FROM `+table+` WHERE stream_id = ?`, stream); err != nil {
				return s.c.MarksErr(err, "clear "+table)
			}
		}
		if row == nil {
			return nil
		}
		return s.c.WriteRow(ctx, conn, stream, *row)
	})
}

// UpdateState replaces a stream's row by what update returns, the row
// locked meanwhile; target.ErrNoState when there is no row.
func (s controlStore) UpdateState(ctx context.Context, stream string, update func(target.StateRow) (target.StateRow, error)) error {
	return WithTx(ctx, s.db, s.c.Begin, s.c.Classify, "update the position of stream "+stream, func(conn *sql.Conn) error {
		row, found, err := s.c.ReadRow(ctx, conn, stream, s.c.ForUpdate)
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
		return s.c.WriteRow(ctx, conn, stream, next)
	})
}

// ReadMarks calls add with every range of ordinals the stream's marks
// record as applied.
func (s controlStore) ReadMarks(ctx context.Context, stream string, add func(tx chain.Identity, first, last uint32)) error {
	rows, err := s.db.QueryContext(ctx, `SELECT xid, commit_lsn, tx_id, ranges FROM `+s.c.MarksTable+` WHERE stream_id = ?`, stream)
	if err != nil && s.c.Missing(err) {
		return nil
	}
	if err != nil {
		return s.c.MarksErr(err, "read "+s.c.MarksTable)
	}
	defer rows.Close()
	for rows.Next() {
		var xid, lsn, txID, text string
		if err := rows.Scan(&xid, &lsn, &txID, &text); err != nil {
			return s.c.MarksErr(err, "read "+s.c.MarksTable)
		}
		x, xErr := strconv.ParseUint(xid, 10, 32)
		commit, lErr := parseLSN(lsn)
		ranges, err := target.ParseRangesJSON(text)
		if err != nil || xErr != nil || lErr != nil {
			return errcode.New(errcode.ApplyMarksUnavailable, "a row of %s (xid %s, commit LSN %s, tx %q) is damaged: ranges %q", s.c.MarksTable, xid, lsn, txID, text)
		}
		id := chain.Identity{XID: uint32(x), CommitLSN: commit, Tx: txID}
		for i := 0; i < len(ranges); i += 2 {
			add(id, ranges[i], ranges[i+1])
		}
	}
	if err := rows.Err(); err != nil {
		return s.c.MarksErr(err, "read "+s.c.MarksTable)
	}
	return nil
}

// parseLSN reads a stored commit LSN: an unsigned 64-bit integer, or the
// signed one of the same bits (SignedLSN).
func parseLSN(s string) (uint64, error) {
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return u, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v >= 0 {
		return 0, errors.New("not a 64-bit integer")
	}
	return uint64(v), nil
}

package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// Control tables of the broker in the target's public schema.
const (
	stateTable = "public.sluice_cdc_state"
	marksTable = "public.sluice_cdc_apply_marks"
)

// ensureControlTables creates the broker's position and marks tables when
// they are missing. A marks table of the first layout (marks keyed by XID
// and commit LSN only) is kept as it is: it serves PostgreSQL sources as
// ever, and gains a transaction ID column only when a change named by an
// opaque ID is marked (upgradeMarks).
func ensureControlTables(ctx context.Context, conn *pgx.Conn) error {
	// One statement a call, as every statement the target sends
	// (docs/security.md).
	for _, stmt := range []string{`
		CREATE TABLE IF NOT EXISTS ` + stateTable + ` (
			stream_id  text PRIMARY KEY,
			token      text NOT NULL,
			checksum   text NOT NULL,
			updated_at timestamptz NOT NULL DEFAULT now())`, `
		CREATE TABLE IF NOT EXISTS ` + marksTable + ` (
			stream_id     text   NOT NULL,
			link_id       text   NOT NULL,
			xid           bigint NOT NULL,
			commit_lsn    bigint NOT NULL,
			-- the opaque transaction ID of engines that name transactions
			-- by one (a GTID); '' for PostgreSQL's XID and commit LSN
			tx_id         text   NOT NULL DEFAULT '',
			first_ordinal int    NOT NULL,
			-- applied ordinals as inclusive ranges: lo1, hi1, lo2, hi2, …
			ranges        int[]  NOT NULL,
			PRIMARY KEY (stream_id, xid, commit_lsn, tx_id, first_ordinal))`,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return marksErr(err, "create the broker's control tables")
		}
	}
	return nil
}

// marksHaveTxID reports whether the marks table has the transaction ID
// column (tables created before it do not).
func marksHaveTxID(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (bool, error) {
	var has bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute
		WHERE attrelid = to_regclass($1) AND attname = 'tx_id' AND NOT attisdropped)`, marksTable).Scan(&has)
	if err != nil {
		return false, marksErr(err, "look up "+marksTable)
	}
	return has, nil
}

// upgradeMarks adds the transaction ID column to a marks table of the first
// layout and makes it part of the key, in tx.
func upgradeMarks(ctx context.Context, tx pgx.Tx) error {
	for _, stmt := range []string{
		`ALTER TABLE ` + marksTable + ` ADD COLUMN IF NOT EXISTS tx_id text NOT NULL DEFAULT ''`,
		`ALTER TABLE ` + marksTable + ` DROP CONSTRAINT IF EXISTS sluice_cdc_apply_marks_pkey,
			ADD PRIMARY KEY (stream_id, xid, commit_lsn, tx_id, first_ordinal)`,
	} {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return marksErr(err, "add the transaction ID column to "+marksTable)
		}
	}
	return nil
}

// marksErr codes a failure to create or write the control tables.
func marksErr(err error, what string) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		return errcode.Wrap(errcode.ApplyMarksUnavailable, err, "%s", what)
	}
	return classify(err, what)
}

// stateRow is a stream's stored position as it is, before decoding.
type stateRow struct {
	Token, Checksum string
}

// readState returns the stream's stored row; ok is false when there is none.
func readState(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, stream string) (stateRow, bool, error) {
	var r stateRow
	err := q.QueryRow(ctx, `SELECT token, checksum FROM `+stateTable+` WHERE stream_id = $1`, stream).Scan(&r.Token, &r.Checksum)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, classify(err, "read "+stateTable)
	}
	return r, true, nil
}

// readStateIfAny is ReadState on a target that may not have the control
// tables yet (then there is no row).
func readStateIfAny(ctx context.Context, conn *pgx.Conn, stream string) (stateRow, bool, error) {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, stateTable).Scan(&exists); err != nil {
		return stateRow{}, false, classify(err, "look up "+stateTable)
	}
	if !exists {
		return stateRow{}, false, nil
	}
	return readState(ctx, conn, stream)
}

// writeState stores a token for its stream (insert or replace) in tx.
func writeState(ctx context.Context, tx pgx.Tx, t apply.Token) error {
	row, err := apply.Row(t)
	if err != nil {
		return err
	}
	return writeRow(ctx, tx, t.Stream, row)
}

// writeRow stores a stream's position row (insert or replace) in tx.
func writeRow(ctx context.Context, tx pgx.Tx, stream string, row target.StateRow) error {
	_, err := tx.Exec(ctx, `INSERT INTO `+stateTable+` (stream_id, token, checksum, updated_at) VALUES ($1, $2, $3, now())
		ON CONFLICT (stream_id) DO UPDATE SET token = EXCLUDED.token, checksum = EXCLUDED.checksum, updated_at = now()`, stream, row.Token, row.Checksum)
	if err != nil {
		return classify(err, "write "+stateTable)
	}
	return nil
}

// clearStream deletes a stream's position and all its marks in tx.
func clearStream(ctx context.Context, tx pgx.Tx, stream string) error {
	if _, err := tx.Exec(ctx, `DELETE FROM `+stateTable+` WHERE stream_id = $1`, stream); err != nil {
		return classify(err, "clear "+stateTable)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM `+marksTable+` WHERE stream_id = $1`, stream); err != nil {
		return marksErr(err, "clear "+marksTable)
	}
	return nil
}

// lockRow reads the stream's position row in tx, locked for share or for
// update; the zero row when there is none.
func lockRow(ctx context.Context, tx pgx.Tx, stream string, forUpdate bool) (target.StateRow, error) {
	lock := "FOR SHARE"
	if forUpdate {
		lock = "FOR UPDATE"
	}
	var row target.StateRow
	err := tx.QueryRow(ctx, `SELECT token, checksum FROM `+stateTable+` WHERE stream_id = $1 `+lock, stream).Scan(&row.Token, &row.Checksum)
	if errors.Is(err, pgx.ErrNoRows) {
		return target.StateRow{}, nil
	}
	if err != nil {
		return target.StateRow{}, classify(err, "lock "+stateTable)
	}
	return row, nil
}

// lockOwned locks the stream's position row in tx (share or update) and
// checks that owner still holds the lease: a run whose lease was taken over
// is a zombie, and its transaction must not commit.
func lockOwned(ctx context.Context, tx pgx.Tx, stream, owner string, forUpdate bool) (apply.Token, error) {
	row, err := lockRow(ctx, tx, stream, forUpdate)
	if err != nil {
		return apply.Token{}, err
	}
	if err := apply.Lease(stream, owner)(row); err != nil {
		return apply.Token{}, err
	}
	return apply.Decode(row.Token, row.Checksum)
}

// readAllMarks loads every mark of a stream.
func readAllMarks(ctx context.Context, conn *pgx.Conn, stream string) (apply.Marks, error) {
	return apply.ReadMarks(ctx, stateStore{conn: conn}, stream)
}

// readMarks calls add with every range of a stream's marks.
func readMarks(ctx context.Context, conn *pgx.Conn, stream string, add func(chain.Identity, uint32, uint32)) error {
	hasTx, err := marksHaveTxID(ctx, conn)
	if err != nil {
		return err
	}
	txCol := "''"
	if hasTx {
		txCol = "tx_id"
	}
	rows, err := conn.Query(ctx, `SELECT xid, commit_lsn, `+txCol+`, ranges FROM `+marksTable+` WHERE stream_id = $1`, stream)
	if err != nil {
		return marksErr(err, "read "+marksTable)
	}
	defer rows.Close()
	for rows.Next() {
		var xid, lsn int64
		var txID string
		var ranges []int32
		if err := rows.Scan(&xid, &lsn, &txID, &ranges); err != nil {
			return marksErr(err, "read "+marksTable)
		}
		if len(ranges)%2 != 0 {
			return errcode.New(errcode.ApplyMarksUnavailable, "a row of %s holds an odd number of range bounds", marksTable)
		}
		id := chain.Identity{XID: uint32(xid), CommitLSN: uint64(lsn), Tx: txID}
		for i := 0; i < len(ranges); i += 2 {
			add(id, uint32(ranges[i]), uint32(ranges[i+1]))
		}
	}
	if err := rows.Err(); err != nil {
		return marksErr(err, "read "+marksTable)
	}
	return nil
}

// writeMarks stores a lane transaction's marks in tx. On a marks table of
// the first layout, PostgreSQL identities are written as ever; the first
// mark of a transaction named by an opaque ID upgrades the table.
// known caches whether the table has the transaction ID column across a
// lane's transactions (nil: look it up each time).
func writeMarks(ctx context.Context, tx pgx.Tx, stream string, b *target.MarkBatch, known *marksLayout) error {
	if b.Empty() {
		return nil
	}
	var xids, lsns []int64
	var firsts []int32
	var ranges, txIDs []string
	opaque := false
	_ = b.Each(func(id chain.Identity, r []uint32) error {
		xids, lsns = append(xids, int64(id.XID)), append(lsns, int64(id.CommitLSN))
		txIDs = append(txIDs, id.Tx)
		opaque = opaque || id.Tx != ""
		firsts = append(firsts, int32(r[0]))
		ranges = append(ranges, intArrayLiteral(r))
		return nil
	})
	if known == nil {
		known = &marksLayout{}
	}
	if !known.checked {
		has, err := marksHaveTxID(ctx, tx)
		if err != nil {
			return err
		}
		known.checked, known.txID = true, has
	}
	hasTx := known.txID
	if opaque && !hasTx {
		if err := upgradeMarks(ctx, tx); err != nil {
			return err
		}
		// Known only once the transaction commits: look again next time.
		known.checked, hasTx = false, true
	}
	var err error
	if hasTx {
		_, err = tx.Exec(ctx, `INSERT INTO `+marksTable+` (stream_id, link_id, xid, commit_lsn, tx_id, first_ordinal, ranges)
			SELECT $1, $2, x, l, t, f, r::int[] FROM unnest($3::bigint[], $4::bigint[], $5::text[], $6::int[], $7::text[]) AS u(x, l, t, f, r)
			ON CONFLICT DO NOTHING`, stream, b.Link, xids, lsns, txIDs, firsts, ranges)
	} else {
		_, err = tx.Exec(ctx, `INSERT INTO `+marksTable+` (stream_id, link_id, xid, commit_lsn, first_ordinal, ranges)
			SELECT $1, $2, x, l, f, r::int[] FROM unnest($3::bigint[], $4::bigint[], $5::int[], $6::text[]) AS u(x, l, f, r)
			ON CONFLICT DO NOTHING`, stream, b.Link, xids, lsns, firsts, ranges)
	}
	if err != nil {
		return marksErr(err, "write "+marksTable)
	}
	return nil
}

// marksLayout is what a lane learned of the marks table's columns.
type marksLayout struct {
	checked, txID bool
}

func intArrayLiteral(v []uint32) string {
	b := make([]byte, 0, 2+len(v)*4)
	b = append(b, '{')
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, "%d", int32(x))
	}
	return string(append(b, '}'))
}

// pruneMarks deletes a stream's marks of links other than keep: the
// position covers them, and marks of the newest applied incremental stay to
// catch a transaction delivered again at the start of the next one.
func pruneMarks(ctx context.Context, tx pgx.Tx, stream string, keep ...string) error {
	if _, err := tx.Exec(ctx, `DELETE FROM `+marksTable+` WHERE stream_id = $1 AND NOT (link_id = ANY($2))`, stream, keep); err != nil {
		return marksErr(err, "prune "+marksTable)
	}
	return nil
}

// claimStream gives the stream's lease to owner: from its commit on, every
// apply transaction of any other run fails its lease check and rolls back.
func claimStream(ctx context.Context, dsn, stream, owner string) error {
	conn, err := connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return apply.Claim(ctx, stateStore{conn: conn}, stream, owner)
}

// legacyRestoreLinksTable is where restores once recorded the incrementals
// they applied, before they applied under a position.
const legacyRestoreLinksTable = "public.sluice_restore_links"

// dropLegacyRestoreLinks drops the table restores once recorded their
// incrementals in, when the target still has one: only a table of exactly
// its three columns, so a table of the application that happens to bear
// the name is left alone.
func dropLegacyRestoreLinks(ctx context.Context, conn *pgx.Conn) error {
	var cols string
	err := conn.QueryRow(ctx, `SELECT coalesce(string_agg(column_name::text, ',' ORDER BY column_name::text), '')
		FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'sluice_restore_links'`).Scan(&cols)
	if err != nil {
		return classify(err, "look up "+legacyRestoreLinksTable)
	}
	if cols != "applied_at,chain_id,link_id" {
		return nil
	}
	if _, err := conn.Exec(ctx, `DROP TABLE `+legacyRestoreLinksTable); err != nil {
		return classify(err, "drop "+legacyRestoreLinksTable)
	}
	return nil
}

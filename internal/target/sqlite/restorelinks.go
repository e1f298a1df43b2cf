package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// restoreLinksSQL creates the table recording which incrementals a restore
// applied, written in the same transaction as each incremental, so a
// restore retried after a commit skips it instead of applying it twice.
const restoreLinksSQL = `CREATE TABLE IF NOT EXISTS ` + restoreLinksTable + ` (
	chain_id   TEXT NOT NULL,
	link_id    TEXT NOT NULL,
	applied_at TEXT NOT NULL,
	PRIMARY KEY (chain_id, link_id))`

// RestoreIncremental applies incremental m of chain chainID in one BEGIN
// IMMEDIATE transaction unless the target records it as applied, and
// reports whether it applied it. schema is the schema in force before m.
// It checks the transaction framing and that m's chunks hold the changes
// and transactions m records before it commits. records, when positive,
// applies only m's first records, and sel, when not nil, only the changes
// it keeps of them.
func (t *Target) RestoreIncremental(ctx context.Context, ch *chain.Chain, chainID string, m *chain.Manifest, schema *chain.Schema, sel *target.Selection, records int64, progress func(changes int64)) (bool, error) {
	if m == nil || m.Kind != chain.KindIncremental {
		return false, errcode.New(errcode.ManifestInvalid, "restore incremental: link is not an incremental")
	}
	applied := false
	err := withWrite(ctx, t.db, "restore of incremental "+m.ID, func(conn *sql.Conn) error {
		if _, err := conn.ExecContext(ctx, restoreLinksSQL); err != nil {
			return classify(err, "create "+restoreLinksTable)
		}
		var one int
		err := conn.QueryRowContext(ctx, `SELECT 1 FROM `+restoreLinksTable+` WHERE chain_id = ? AND link_id = ?`, chainID, m.ID).Scan(&one)
		if err == nil {
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return classify(err, "read "+restoreLinksTable)
		}
		if err := applyIncremental(ctx, conn, ch, m, schema, sel, records, progress); err != nil {
			return err
		}
		if _, err := conn.ExecContext(ctx, `INSERT INTO `+restoreLinksTable+` (chain_id, link_id, applied_at) VALUES (?, ?, `+nowSQL+`)`, chainID, m.ID); err != nil {
			return classify(err, "record incremental "+m.ID)
		}
		applied = true
		return nil
	})
	if err != nil {
		return false, err
	}
	return applied, nil
}

// ClearRestoreLinks forgets which incrementals of chainID a restore
// applied; a restore that starts over calls it before loading anything.
func (t *Target) ClearRestoreLinks(ctx context.Context, chainID string) error {
	ok, err := tableExists(ctx, t.db, restoreLinksTable)
	if err != nil || !ok {
		return err
	}
	if _, err := t.db.ExecContext(ctx, `DELETE FROM `+restoreLinksTable+` WHERE chain_id = ?`, chainID); err != nil {
		return classify(err, "clear "+restoreLinksTable)
	}
	return nil
}

// applyIncremental applies (only the first records when records is
// positive; of those, only the changes sel keeps) and checks every change
// of m on conn, inside its open transaction.
func applyIncremental(ctx context.Context, conn *sql.Conn, ch *chain.Chain, m *chain.Manifest, schema *chain.Schema, sel *target.Selection, records int64, progress func(changes int64)) error {
	a := newApplier(schema, nil)
	defer a.close()
	var err error
	if a.holdBack, err = foreignKeysOff(ctx, conn); err != nil {
		return err
	}
	err = ch.WalkIncremental(ctx, m, chain.FirstRecords(records, sel.Visit(func(c *chain.Change) error {
		if err := a.apply(ctx, conn, c); err != nil {
			return fmt.Errorf("incremental %s: %w", m.ID, err)
		}
		return nil
	})), func(changes int64) error {
		if progress != nil {
			progress(changes)
		}
		return nil
	})
	if err == nil {
		if err = a.flush(ctx, conn); err != nil {
			err = fmt.Errorf("incremental %s: %w", m.ID, err)
		}
	}
	return err
}

package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/target"
)

// restoreLinksTable records which incrementals a restore has applied to the
// target, written in the same transaction as the incremental itself, so a
// restore activity retried after its commit skips the incremental instead of
// applying it twice.
const restoreLinksTable = "public.sluice_restore_links"

// RestoreIncremental applies incremental m of chain chainID once: if the
// target already records it as applied it does nothing and reports false.
// sel, when not nil, applies only the changes it keeps; records, when
// positive, applies only m's first records.
func RestoreIncremental(ctx context.Context, conn *pgx.Conn, ch *chain.Chain, chainID string, m *chain.Manifest, schema *chain.Schema, sel *target.Selection, records int64, progress func(changes int64)) (bool, error) {
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+restoreLinksTable+` (
		chain_id text NOT NULL, link_id text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(),
		PRIMARY KEY (chain_id, link_id))`); err != nil {
		return false, classify(err, "create "+restoreLinksTable)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, classify(err, "begin apply of incremental "+m.ID)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var one int
	err = tx.QueryRow(ctx, `SELECT 1 FROM `+restoreLinksTable+` WHERE chain_id = $1 AND link_id = $2 FOR UPDATE`, chainID, m.ID).Scan(&one)
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return false, classify(err, "read "+restoreLinksTable)
	}
	if _, err := applyIncrementalTx(ctx, conn, tx, ch, m, schema, sel, records, progress); err != nil {
		return false, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+restoreLinksTable+` (chain_id, link_id) VALUES ($1, $2)`, chainID, m.ID); err != nil {
		return false, classify(err, "record incremental "+m.ID)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, classify(err, "commit apply of incremental "+m.ID)
	}
	return true, nil
}

// ClearRestoreLinks forgets which incrementals of chainID a restore applied;
// a restore that starts over calls it before loading anything.
func ClearRestoreLinks(ctx context.Context, conn *pgx.Conn, chainID string) error {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, restoreLinksTable).Scan(&exists); err != nil {
		return classify(err, "look up "+restoreLinksTable)
	}
	if !exists {
		return nil
	}
	if _, err := conn.Exec(ctx, `DELETE FROM `+restoreLinksTable+` WHERE chain_id = $1`, chainID); err != nil {
		return classify(err, "clear "+restoreLinksTable)
	}
	return nil
}

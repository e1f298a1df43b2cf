package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// ApplyIncremental applies every change of incremental m to the target in
// one transaction, so an interrupted or retried apply never applies a source
// transaction twice. It reads m's change chunks in order (each verified
// against its reference), checks the transaction framing (changes only
// between a begin and its commit, ordinals increasing inside a
// transaction) and that the change records and transactions number what m
// records, and commits only then. schema is the schema in force before m;
// the one in force after it is returned, for the next incremental.
//
// Changes count as the manifest counts them: every record except the
// begin and commit records that frame a transaction. progress, when not
// nil, is called after each chunk with the number of changes applied so far.
// Damaged chunks surface as the chain package's coded errors, unchanged.
func ApplyIncremental(ctx context.Context, conn *pgx.Conn, ch *chain.Chain, m *chain.Manifest, schema *chain.Schema, progress func(changes int64)) (*chain.Schema, error) {
	if m == nil || m.Kind != chain.KindIncremental {
		return nil, errcode.New(errcode.ManifestInvalid, "apply incremental: link is not an incremental")
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, classify(err, "begin apply of incremental "+m.ID)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	after, err := applyIncrementalTx(ctx, conn, tx, ch, m, schema, nil, 0, progress)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, classify(err, "commit apply of incremental "+m.ID)
	}
	return after, nil
}

// applyIncrementalTx applies and checks incremental m inside tx: only its
// first records when records is positive, all of it otherwise; of those,
// only the changes sel keeps.
func applyIncrementalTx(ctx context.Context, conn *pgx.Conn, tx pgx.Tx, ch *chain.Chain, m *chain.Manifest, schema *chain.Schema, sel *target.Selection, records int64, progress func(changes int64)) (*chain.Schema, error) {
	a := NewApplier(schema)
	defer func() { _ = a.Release(context.WithoutCancel(ctx), conn) }()
	var role string
	if err := tx.QueryRow(ctx, "SHOW session_replication_role", pgx.QueryExecModeSimpleProtocol).Scan(&role); err == nil {
		a.HoldBack(role == "replica")
	}

	err := ch.WalkIncremental(ctx, m, chain.FirstRecords(records, sel.Visit(func(c *chain.Change) error {
		if err := a.Apply(ctx, tx, c); err != nil {
			return fmt.Errorf("incremental %s: %w", m.ID, err)
		}
		return nil
	})), func(changes int64) error {
		if err := a.Flush(ctx, tx); err != nil {
			return fmt.Errorf("incremental %s: %w", m.ID, err)
		}
		if progress != nil {
			progress(changes)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return a.Schema(), nil
}

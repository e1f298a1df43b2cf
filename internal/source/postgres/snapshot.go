package postgres

import (
	"context"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/pgrows"
	"github.com/sluicehq/sluice/internal/readback"
)

// sourceSnapshot is a snapshot of the source database that also reads its
// schema, as a full backup records it, in the same transaction.
type sourceSnapshot struct {
	*pgrows.Snapshot
}

var _ readback.SourceReader = (*engine)(nil)

// OpenSourceSnapshot opens a REPEATABLE READ, READ ONLY snapshot of the
// source for a comparison (`sluice verify`).
func (e *engine) OpenSourceSnapshot(ctx context.Context) (readback.SourceSnapshot, error) {
	conn, err := connect(ctx, e.dsn)
	if err != nil {
		return nil, err
	}
	s, err := pgrows.Begin(ctx, conn, classify)
	if err != nil {
		return nil, err
	}
	return sourceSnapshot{s}, nil
}

// Schema reads the source's tables in the snapshot.
func (s sourceSnapshot) Schema(ctx context.Context) (*chain.Schema, error) {
	schema, _, err := ReadSchema(ctx, s.Tx())
	if err != nil {
		return nil, classify(err, "read the source's schema")
	}
	return schema, nil
}

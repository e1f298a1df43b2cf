package postgres

import (
	"context"

	"github.com/sluicehq/sluice/internal/pgrows"
	"github.com/sluicehq/sluice/internal/readback"
)

var _ readback.Reader = (*Target)(nil)

// OpenSnapshot opens a REPEATABLE READ, READ ONLY snapshot of the target's
// tables on a connection of its own, for a comparison (`sluice verify`).
func (t *Target) OpenSnapshot(ctx context.Context) (readback.Snapshot, error) {
	conn, err := connect(ctx, t.dsn)
	if err != nil {
		return nil, err
	}
	return pgrows.Begin(ctx, conn, classify)
}

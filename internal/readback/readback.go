// Package readback is the seam by which sluice reads a database's tables back
// as neutral values inside one consistent, read-only snapshot, to compare
// two databases (`sluice verify`). Each engine's package implements it for
// its own tables, so nothing outside an engine imports its driver: a source
// engine (whose snapshot also reads the schema the comparison goes by) and
// every target engine.
package readback

import (
	"context"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/value"
)

// Snapshot is one consistent, read-only view of a database: every read
// through it sees the database as of the snapshot's start.
type Snapshot interface {
	// Count returns how many rows the database's table for tb holds;
	// found is false when there is no such table.
	Count(ctx context.Context, tb *chain.Table) (n int64, found bool, err error)
	// Scan calls fn with every row of the table for tb, in no particular
	// order, as one neutral value per column of tb decoded by the column's
	// kind. The slice is valid only during the call.
	Scan(ctx context.Context, tb *chain.Table, fn func(row []value.Value) error) error
	// Close ends the snapshot and releases its connection.
	Close(ctx context.Context) error
}

// SourceSnapshot is a snapshot of a source database, which also reads the
// schema (as a full backup would record it) in the same snapshot.
type SourceSnapshot interface {
	Snapshot
	// Schema returns the database's tables as of the snapshot.
	Schema(ctx context.Context) (*chain.Schema, error)
}

// Reader is a target that can open a snapshot of its own tables.
type Reader interface {
	OpenSnapshot(ctx context.Context) (Snapshot, error)
}

// SourceReader is a source that can open a snapshot of its tables.
type SourceReader interface {
	OpenSourceSnapshot(ctx context.Context) (SourceSnapshot, error)
}

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

// ColumnReader is a snapshot that can list the columns its table for tb
// stores, so a comparison finds a column missing on one side or added on
// the other before it reads a row. Generated columns are left out: no
// target stores the source's, and a row image never carries them.
type ColumnReader interface {
	// Columns returns the names of the stored (not generated) columns of
	// the database's table for tb, in the table's order; found is false
	// when there is no such table.
	Columns(ctx context.Context, tb *chain.Table) (names []string, found bool, err error)
}

// Normaliser is a snapshot of an engine that stores some values by a
// documented rule that keeps the value but not its exact rendering (a
// MySQL DECIMAL(65,30) holding an unconstrained numeric reads 1.50 back as
// 1.5). A comparison passes every value of such a column, from both sides,
// through the engine's function, so a value the rule kept compares equal
// and any other difference still shows.
type Normaliser interface {
	// Normalisers returns one function per column of tb (nil for a column
	// whose values read back exactly), each bringing a value of that
	// column to the form the engine keeps.
	Normalisers(tb *chain.Table) []func(value.Value) value.Value
}

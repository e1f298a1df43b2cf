// Package source is the seam between the producer and each source database
// engine: the Source and Capture interfaces every engine implements, the
// engine-neutral types that cross it (limits and windows of a capture, the
// health of the source's log, a full's progress), and the registry the CLI,
// workflows and activities open a source through by driver name. Engine
// packages (source/postgres) register themselves; the producer, which
// commits every incremental and every rotation, knows only this package.
//
// What commits what: Source.FullBackup commits the chain's first full itself
// (it makes the catalog write that creates the chain); every other link — a
// window's incremental, and a rotation's closing incremental with its new
// full — is committed by the producer, which stores their manifests and makes
// the catalog write, and only then confirms the capture.
package source

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/filter"
)

// Source is one source database, opened by Open with the driver's options.
// It holds no connection between calls: each operation connects for its own
// duration, so a Source may be kept for a whole activity.
type Source interface {
	// FullBackup takes a consistent snapshot of every table into ch,
	// anchored on a log position, and commits it as the first full of a new
	// chain: it writes the chunks and the manifest and makes the catalog
	// write that creates the chain. A store that already holds a chain is
	// refused with SLUICE-E-CHAIN-EXISTS, also when another full committed
	// first. Nothing is named by the catalog unless every table was copied;
	// a failed attempt leaves only unreferenced objects under
	// data/<AttemptID>/, which it tries to delete.
	FullBackup(ctx context.Context, ch *chain.Chain, o FullOptions) (*chain.Manifest, error)
	// RotationFull takes a new full of the chain's source for a new
	// segment, anchored at the source's current position. It writes the
	// chunks but neither the manifest nor the catalog: the caller sets the
	// full's parent, stores the manifest and commits it in the catalog write
	// that caps the old segment. cleanup deletes the chunks when that commit
	// cannot happen. src is what the chain records of its source; another
	// source is refused with SLUICE-E-SOURCE-MISMATCH. o.ChainLog is ignored:
	// the chain's log position already exists.
	RotationFull(ctx context.Context, ch *chain.Chain, o FullOptions, src chain.SourceInfo) (m *chain.Manifest, cleanup func(), err error)
	// OpenCapture opens a capture session on the chain's log at o.Start.
	// It refuses a chain whose full created no log position for
	// incrementals (SLUICE-E-SOURCE-ANCHOR-MISSING) and another source than the one
	// the chain records. The caller checks the chain's engine is Engine().
	OpenCapture(ctx context.Context, o CaptureOptions) (Capture, error)
	// Engine is the engine name the source's chains record
	// (chain.SourceInfo.Engine).
	Engine() string
	// Close releases what the source holds.
	Close()
}

// FullOptions configure a full backup or a rotation's full.
type FullOptions struct {
	// ChainLog creates the chain's own position in the source's log at the
	// snapshot's anchor (PostgreSQL: the chain slot and its publication),
	// so incrementals follow the full with no gap. Without it the anchor
	// is temporary and the chain cannot be fed.
	ChainLog bool
	// Parallel is how many tables are copied at once (0: the engine's default).
	Parallel int
	// ChunkBytes is the uncompressed size of a chunk (0: the engine's default).
	ChunkBytes int
	// AttemptID names this attempt's data folder, data/<AttemptID>/. Required.
	AttemptID string
	// Progress, when set, is called about once a second and at the end.
	Progress func(Progress)
	// OnTableFixed, when set, is told of each table the engine changed so
	// that the application's writes to it keep working once its changes
	// are captured (the PostgreSQL engine's set_replica_identity=auto).
	OnTableFixed func(TableIssue)
	// AfterSnapshot, when set, runs once the snapshot is held and before any
	// row is read (tests use it).
	AfterSnapshot func(context.Context) error
	// Now returns the time recorded in the manifest (default time.Now).
	Now func() time.Time
	// Filter decides which tables and columns cross and masks values
	// before they are encoded (nil: everything crosses as is). The engine
	// reads only the tables it includes, records each through
	// Filter.ShapeSchema, passes every row through its table's Shape, and
	// records Filter.Record() in the full's manifest. Its refusals come
	// before the engine creates any slot or publication.
	Filter *filter.Filter
}

// CaptureOptions configure a capture session on a chain's log.
type CaptureOptions struct {
	// Source is what the chain records about its source: its engine, the
	// source it was taken from (another one is refused) and the log
	// position incrementals are read from (Source.Slot).
	Source chain.SourceInfo
	// Start is the chain tip's end position, where the first window starts.
	Start string
	// Schema is the chain's recorded schema as of Start.
	Schema *chain.Schema
	// Owner names the run that reads the chain's log (a streaming
	// producer's workflow). A reader session of the same owner that still
	// holds the log is a dead attempt's, which the capture may end to take
	// the log over; any other holder is refused with SLUICE-E-SOURCE-READER-IN-USE.
	// Empty: every holder is refused.
	Owner string
	// OnTakeOver, when set, is told the ID of a session the capture ended
	// to take the log over (PostgreSQL: the backend's process ID).
	OnTakeOver func(session int64)
	// Filter is the filter the chain's segment was written with (nil:
	// none). Schema is already shaped by it; the capture compares what the
	// log says of a table with Schema only after shaping it through
	// Filter.Shape, skips the row changes of tables it does not include
	// (their transactions still pass, so positions move), leaves excluded
	// tables out of truncates and schema changes, and passes every row
	// image through its table's Shape.Project.
	Filter *filter.Filter
}

// Capture reads whole source transactions from a chain's log, one window at
// a time. It is not safe for concurrent use.
type Capture interface {
	// Next captures one window of whole transactions into sink, starting
	// where the previous window ended (the session's start for the first).
	Next(ctx context.Context, lim Limits, sink Sink) (Window, error)
	// Confirm tells the source that everything before pos is in the chain,
	// so its log may release it. The caller confirms only after the catalog
	// write that names pos. The position never moves backwards.
	Confirm(ctx context.Context, pos string) error
	// CurrentPosition returns the source's current log position.
	CurrentPosition(ctx context.Context) (string, error)
	// LogHealth reads the health of the chain's log. A log position the
	// source no longer has (lost, dropped) is returned with a refusal.
	LogHealth(ctx context.Context) (LogHealth, error)
	// Sequences reads the source's sequence counters now, for what the
	// session's schema holds (chain.Manifest.Sequences): by qualified name,
	// the highest value each has handed out — PostgreSQL's sequences
	// (identity ones included), a MySQL-family source's tables with an
	// AUTO_INCREMENT counter. A counter that has handed out nothing is left
	// out. Counters are not transactional: the producer reads them after a
	// window's capture, so they are at or past its last commit.
	Sequences(ctx context.Context) (map[string]int64, error)
	// Close ends the session.
	Close()
}

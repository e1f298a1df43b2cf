// Package target is the seam between the engine-neutral broker and restore
// and each target database engine: the Target, Lane and StateStore
// interfaces every engine implements, and the registry the CLI, workflows and
// activities open a target through by driver name. Engine packages
// (target/postgres, target/sqlite) register themselves and hold only SQL,
// connections, control tables and key probes; the dispatcher that drives
// lanes lives in internal/apply.
package target

import (
	"context"
	"errors"

	"github.com/sluicehq/sluice/internal/chain"
)

// Target is one open target database. Restore calls Prepare, LoadTable and
// Finish; the incrementals after a full, restore's and the broker's alike,
// are judged, applied through lanes and recorded in the position and marks
// of State (internal/apply drives them). A Target is safe to use from one goroutine;
// lanes it opens have connections of their own.
type Target interface {
	// Prepare readies the target for the tables of a schema: it refuses when
	// a table the restore would write already holds rows (unless replace,
	// which drops them) and creates what the tables need before their data.
	Prepare(ctx context.Context, s *chain.Schema, replace bool) error
	// LoadTable creates one table of a full and loads its rows, returning
	// how many it loaded.
	LoadTable(ctx context.Context, ch *chain.Chain, s *chain.Schema, td chain.TableData, progress LoadProgress) (int64, error)
	// Finish adds keys, indexes, constraints and sequence values after the data.
	Finish(ctx context.Context, s *chain.Schema) error

	// RaiseSequences raises the target's sequence counters to the values
	// an incremental records (chain.Manifest.Sequences, or several merged
	// with chain.SequencesThrough), never lowering one: after the broker
	// applies the incremental, and after a restore's incrementals. s is the
	// schema in force after them; sel, when not nil, leaves the counters of
	// tables it does not take alone. margin (0 or more; a cutover's
	// --sequence-margin) moves each counter that much further, in its
	// direction, than its value. A counter the target has no equivalent
	// of, or whose value plus margin it cannot hold, is skipped and said
	// so in the result.
	RaiseSequences(ctx context.Context, s *chain.Schema, values map[string]int64, margin int64, sel *Selection) (SequenceResult, error)

	// ApplyObjects moves the target's recorded schema objects (views,
	// routines, triggers, ...: chain.Schema.Objects) from the set from to
	// the set to, after the tables and keys exist: nil from creates every
	// object of to (a restore, a broker's cold start); otherwise objects
	// only in from are dropped, objects only in to created, and objects
	// whose definition changed replaced. A target runs only definitions
	// of its own engine; the caller has checked that the chain's
	// signature was verified or that the operator trusts the store. What
	// it does not apply is listed in the result's Skipped, with why.
	ApplyObjects(ctx context.Context, from, to []chain.Object, o ObjectOptions) (ObjectResult, error)

	// JudgeIncremental decides, before any of m is applied, whether its
	// replay can be exactly-once on this target (keys, keyless tables,
	// marks), refusing with a coded error when it cannot. sel, when not
	// nil, leaves the tables it does not take out of the judgment.
	JudgeIncremental(ctx context.Context, ch *chain.Chain, m *chain.Manifest, schema *chain.Schema, sel *Selection) (Judgment, error)
	// JudgeColdStart refuses a reset whose restore could not be replayed
	// into exactly once.
	JudgeColdStart(ctx context.Context, schema *chain.Schema) error

	// State is the target's store of broker positions and apply marks.
	State() StateStore
	// OpenLane opens one apply lane: a connection applying changes in one
	// target transaction at a time.
	OpenLane(ctx context.Context, cfg LaneConfig) (Lane, error)
	// MaxLanes is how many lanes may apply at once (0: no limit; 1: a single
	// writer, such as SQLite).
	MaxLanes() int

	// Close releases the target's connection.
	Close(ctx context.Context) error
}

// ImplicitCommitter is implemented by a target on which a schema change or
// a truncate commits the lane's open transaction by itself (MySQL's DDL
// does). The broker then commits every lane, marks included, before such a
// change, applies it alone and commits its mark right after it, with a
// single lane too, so no row is ever made durable without its mark. The
// change itself must be idempotent: a crash between it and its mark applies
// it again on resume.
type ImplicitCommitter interface {
	// CommitsImplicitly reports whether the target commits implicitly.
	CommitsImplicitly() bool
}

// LoadProgress is told the rows and raw bytes a load has written so far.
type LoadProgress func(rows, rawBytes int64)

// Judgment is what the broker learned about an incremental before applying
// any of it.
type Judgment struct {
	// Unidentified counts changes to keyed tables that carry no apply
	// identity: they re-apply without marks and converge by key.
	Unidentified int64
	// Tables lists the tables the incremental touches.
	Tables []string
	// Arbiters are, for each keyed table that exists on the target, the
	// columns of the key the judgment found there: inserts arbitrate on
	// exactly the key judged.
	Arbiters map[string][]string
}

// StateRow is a stream's stored position as it is, before decoding: the
// token text and its checksum (apply.Token encodes and decodes them).
type StateRow struct {
	Token, Checksum string
}

// ErrNoState is returned by StateStore.UpdateState when the stream has no
// position row.
var ErrNoState = errors.New("the stream has no position row")

// StateStore keeps broker positions (one row per stream) and apply marks in
// the target, so they commit with the rows they describe.
type StateStore interface {
	// EnsureControlTables creates the position and marks tables when
	// missing, and drops the table restores once recorded their
	// incrementals in (sluice_restore_links) when the target has one.
	EnsureControlTables(ctx context.Context) error
	// ReadState returns a stream's row; found is false when there is none,
	// or when the control tables do not exist yet.
	ReadState(ctx context.Context, stream string) (row StateRow, found bool, err error)
	// ReplaceState deletes the stream's position and marks and, when row is
	// not nil, writes row as its position, in one transaction.
	ReplaceState(ctx context.Context, stream string, row *StateRow) error
	// UpdateState locks the stream's row, replaces it with what update
	// returns and commits; ErrNoState when there is no row.
	UpdateState(ctx context.Context, stream string, update func(StateRow) (StateRow, error)) error
	// ReadMarks calls add with every range of ordinals the stream's marks
	// record as applied, by transaction.
	ReadMarks(ctx context.Context, stream string, add func(tx chain.Identity, first, last uint32)) error
}

// LaneConfig configures one apply lane.
type LaneConfig struct {
	// Schema is the schema in force before the first change the lane applies.
	Schema *chain.Schema
	// Stream is the --stream-id whose position row fences the lane.
	Stream string
	// Arbiters are the insert arbiters the judgment found, by table.
	Arbiters map[string][]string
	// Lease checks a stream's row read under lock at the start of each lane
	// transaction and before a position write (a stream without a row is
	// passed the zero StateRow): an error (the run was fenced, the row is
	// damaged or gone) rolls the transaction back and is returned.
	Lease func(StateRow) error
}

// Commit is what a lane's commit writes beside the rows.
type Commit struct {
	// Marks are the apply identities the transaction applied.
	Marks *MarkBatch
	// Position, when set, is the stream's new position row, written after
	// the lease is checked with the row locked for update.
	Position *StateRow
	// PruneMarksExcept, when set with Position, deletes the stream's marks
	// of every link but this one.
	PruneMarksExcept string
}

// Lane applies changes in one target transaction at a time. It is not safe
// for concurrent use.
type Lane interface {
	// Apply applies a change in the lane's open transaction, beginning one
	// (and checking the lease) when none is open. The change's buffers are
	// only valid during the call. Begin and commit records are no-ops.
	Apply(ctx context.Context, c *chain.Change) error
	// Track moves the lane's view of a table past a schema change another
	// lane applied.
	Track(c *chain.Change)
	// Commit writes the marks (and position) and commits the open
	// transaction; with nothing open and no position it does nothing.
	Commit(ctx context.Context, c Commit) error
	// Close rolls back what is open and releases the lane's connection.
	Close(ctx context.Context) error
}

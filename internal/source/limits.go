package source

import (
	"time"

	"github.com/sluicehq/sluice/internal/chain"
)

// Limits bound one window. A window ends only between source transactions.
type Limits struct {
	// Duration ends the window at the first transaction boundary after it
	// elapsed, once the window holds a transaction.
	Duration time.Duration
	// Changes and Bytes end the window at the next transaction boundary
	// once reached (0: no bound).
	Changes int64
	Bytes   int64
	// Until, when set, ends the window once the stream has passed it: a
	// one-shot incremental up to the source's position at its start.
	Until string
	// Before, when set, delivers only transactions whose commit lies before
	// it and ends the window at the first that does not (a rotation closes
	// the old segment exactly at the new full's anchor). The capture cannot
	// be used for another window after a Before window.
	Before string
	// Idle returns an empty window after this long without a transaction
	// (0: never; the window waits for one).
	Idle time.Duration
	// Stop is polled between transactions (so it must be cheap); true ends
	// the window there, with what it holds.
	Stop func() bool
	// Tick, when set, is called as the loop turns: between transactions and
	// every so many messages inside one (so it must be cheap). It tells a
	// health tracker the capture is alive while a large transaction decodes.
	Tick func()
	// Drained, when set, is called when the source shows the window holds
	// nothing and no transaction is open: the source has nothing the chain
	// lacks up to its current position. A health tracker reads it as a poll
	// that ended well (a failure before it no longer holds).
	Drained func()
	// Log, when set, receives the log's health at the window's first turn
	// and then every ReportEvery, between transactions, so a quiet window
	// (which may last minutes) still reports the log it retains.
	Log func(LogHealth)
	// Tables, when set, receives at the window's first turn and then every
	// ReportEvery, between transactions, the tables the capture reads whose
	// application writes fail on the source for want of what capturing
	// them needs (empty when there are none; PostgreSQL: published tables
	// without a usable replica identity). A table created while the stream
	// runs is captured at once, so its writes may start failing mid-stream.
	Tables func([]TableIssue)
}

// ReportEvery is how often a window reads the log's health for Limits.Log
// and the tables for Limits.Tables.
const ReportEvery = 30 * time.Second

// Window is what one window captured.
type Window struct {
	// Transactions and Changes count what was delivered to the sink.
	Transactions int64
	Changes      int64
	// Bytes is the volume of decoded log messages read.
	Bytes int64
	// End is the position after the last delivered transaction (the start
	// position when none was).
	End string
	// Schema is the whole schema after the window's schema changes, or nil.
	Schema *chain.Schema
	// LastCommit is the commit time of the last transaction.
	LastCommit time.Time
}

// Sink receives each change in order. The Change and its value slices are
// only valid during the call.
type Sink func(*chain.Change) error

// LogState is how safe the chain's position in the source's log is.
type LogState string

// The states of a chain's log position.
const (
	// LogOK: the source keeps every change the chain has not confirmed.
	LogOK LogState = "ok"
	// LogAtRisk: the source may soon remove changes the chain has not
	// confirmed (PostgreSQL: wal_status unreserved, past
	// max_slot_wal_keep_size).
	LogAtRisk LogState = "at-risk"
	// LogLost: the source removed changes the chain needs; only a new full
	// can recover.
	LogLost LogState = "lost"
)

// LogHealth is the health of the chain's position in the source's log. Its
// JSON keys are those of the producer's recorded results.
type LogHealth struct {
	// State is ok, at-risk or lost ("" in results recorded before it existed).
	State LogState `json:"state,omitempty"`
	// RetainedBytes is how much log the source keeps for the chain.
	RetainedBytes int64 `json:"retained_bytes"`
	// WalStatus is the engine's own word for the log position's state, which
	// health reports and metrics carry as is (PostgreSQL:
	// pg_replication_slots.wal_status — reserved, extended, unreserved or
	// lost).
	WalStatus string `json:"wal_status"`
	// Confirmed is the position the source was last told the chain holds.
	Confirmed string `json:"confirmed_flush"`
	// Active is true while a reader session holds the log position.
	Active bool `json:"active"`
}

// Progress reports how far a full backup has come.
type Progress struct {
	TablesTotal int   `json:"tables_total"`
	TablesDone  int   `json:"tables_done"`
	Rows        int64 `json:"rows"`
	RawBytes    int64 `json:"raw_bytes"`
	StoredBytes int64 `json:"stored_bytes"`
}

// TableIssue is a table whose application writes fail on the source because
// its changes are captured, or would fail once they are, with what is wrong
// and the statement that fixes it.
type TableIssue struct {
	// Table is the table's qualified name, quoted where SQL needs it.
	Table string `json:"table"`
	// Why says what is wrong with it.
	Why string `json:"why"`
	// Fails lists the statements that fail (UPDATE, DELETE).
	Fails []string `json:"fails"`
	// Fix is the statement that makes the table's writes work.
	Fix string `json:"fix"`
}

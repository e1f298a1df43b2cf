package sqlite

import (
	"errors"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target/sqlkit"
)

// control is the broker's position and marks tables in an SQLite database
// (sqlkit.Control). A commit LSN is stored as the 64-bit signed integer of
// the same bits. The tables are created under the write lock, and only
// when missing, so a lane that finds them takes no lock for it.
var control = &sqlkit.Control{
	StateTable: stateTable,
	MarksTable: marksTable,
	Create: []string{
		`CREATE TABLE IF NOT EXISTS ` + stateTable + ` (
			stream_id  TEXT PRIMARY KEY,
			token      TEXT NOT NULL,
			checksum   TEXT NOT NULL,
			updated_at TEXT)`,
		`CREATE TABLE IF NOT EXISTS ` + marksTable + ` (
			stream_id     TEXT    NOT NULL,
			link_id       TEXT    NOT NULL,
			xid           INTEGER NOT NULL,
			commit_lsn    INTEGER NOT NULL,
			tx_id         TEXT    NOT NULL DEFAULT '',
			first_ordinal INTEGER NOT NULL,
			ranges        TEXT    NOT NULL,
			PRIMARY KEY (stream_id, xid, commit_lsn, tx_id, first_ordinal))`,
	},
	CountSQL:   `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN (?, ?)`,
	Missing:    noSuchTable,
	Now:        `strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`,
	UpsertRow:  "ON CONFLICT (stream_id) DO UPDATE SET token = excluded.token, checksum = excluded.checksum, updated_at = excluded.updated_at",
	KeepMark:   "ON CONFLICT DO NOTHING",
	SignedLSN:  true,
	Begin:      "BEGIN IMMEDIATE",
	CreateInTx: true,
	Legacy:     []string{legacyRestoreLinksTable},
	Classify:   classify,
	MarksErr:   marksErr,
}

// noSuchTable reports whether err is SQLite's "no such table".
func noSuchTable(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_ERROR && strings.Contains(e.Error(), "no such table")
}

// marksErr codes a failure to create or write the control tables: a
// database that may not be written leaves the marks unusable.
func marksErr(err error, what string) error {
	if readOnly(err) {
		return errcode.Wrap(errcode.ApplyMarksUnavailable, err, "%s", what)
	}
	return classify(err, what)
}

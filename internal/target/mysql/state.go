package mysql

import (
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target/sqlkit"
)

// control is the broker's position and marks tables on a server of flavor
// f (sqlkit.Control): tx_id is the opaque transaction identity (a MySQL
// or MariaDB GTID, empty for a PostgreSQL xid and commit LSN). A CREATE
// commits implicitly, so the tables are created outside any transaction,
// and only when missing: a user that may only write tables an
// administrator created needs no CREATE.
func control(f flavor) *sqlkit.Control {
	return &sqlkit.Control{
		StateTable: stateTable,
		MarksTable: marksTable,
		Create: []string{
			`CREATE TABLE IF NOT EXISTS ` + stateTable + ` (
				stream_id  VARCHAR(255) NOT NULL PRIMARY KEY,
				token      LONGTEXT     NOT NULL,
				checksum   VARCHAR(255) NOT NULL,
				updated_at DATETIME(6)  NOT NULL)` + tableOptions(f),
			`CREATE TABLE IF NOT EXISTS ` + marksTable + ` (
				stream_id     VARCHAR(255)    NOT NULL,
				link_id       VARCHAR(255)    NOT NULL,
				xid           BIGINT UNSIGNED NOT NULL,
				commit_lsn    BIGINT UNSIGNED NOT NULL,
				tx_id         VARCHAR(255)    NOT NULL DEFAULT '',
				first_ordinal INT UNSIGNED    NOT NULL,
				ranges        LONGTEXT        NOT NULL,
				PRIMARY KEY (stream_id, xid, commit_lsn, tx_id, first_ordinal),
				KEY sluice_marks_link (stream_id, link_id))` + tableOptions(f),
		},
		CountSQL:  `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN (?, ?)`,
		Missing:   func(err error) bool { return isServerError(err, erNoSuchTable) },
		Now:       "UTC_TIMESTAMP(6)",
		UpsertRow: "ON DUPLICATE KEY UPDATE token = VALUES(token), checksum = VALUES(checksum), updated_at = VALUES(updated_at)",
		KeepMark:  "ON DUPLICATE KEY UPDATE stream_id = stream_id",
		Begin:     "START TRANSACTION",
		ForUpdate: " FOR UPDATE",
		Legacy:    []string{legacyRestoreLinksTable},
		Classify:  classify,
		MarksErr:  marksErr,
	}
}

// marksErr codes a failure to create or write the control tables: a role
// that may not do it leaves the marks unusable.
func marksErr(err error, what string) error {
	if privileged(err) {
		return errcode.Wrap(errcode.ApplyMarksUnavailable, err, "%s", what)
	}
	return classify(err, what)
}

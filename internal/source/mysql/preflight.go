package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicehq/sluice/internal/errcode"
)

// server is what the source engine knows of the server it reads.
type server struct {
	mariadb bool
	version string
	major   int
	minor   int
	// serverID is the server's own @@server_id.
	serverID uint32
	// systemID names the server's binlog history for the chain
	// (chain.SourceInfo.SystemID): MySQL's server_uuid, or MariaDB's
	// host, port and server ID (MariaDB has no server UUID).
	systemID string
}

func (s server) flavor() string {
	if s.mariadb {
		return "mariadb"
	}
	return "mysql"
}

// readServer reads the server's version and identity.
func readServer(ctx context.Context, db *sql.DB) (server, error) {
	var s server
	var host string
	var port int
	if err := db.QueryRowContext(ctx, `SELECT VERSION(), @@server_id, @@hostname, @@port`).Scan(&s.version, &s.serverID, &host, &port); err != nil {
		return s, classify(err, "read the source's version")
	}
	s.mariadb = strings.Contains(strings.ToLower(s.version), "mariadb")
	num := s.version
	if i := strings.IndexFunc(num, func(r rune) bool { return r != '.' && (r < '0' || r > '9') }); i >= 0 {
		num = num[:i]
	}
	parts := strings.Split(num, ".")
	if len(parts) >= 2 {
		s.major, _ = strconv.Atoi(parts[0])
		s.minor, _ = strconv.Atoi(parts[1])
	}
	if s.mariadb {
		s.systemID = fmt.Sprintf("mariadb:%s:%d/%d", host, port, s.serverID)
		return s, nil
	}
	if err := db.QueryRowContext(ctx, `SELECT @@server_uuid`).Scan(&s.systemID); err != nil {
		return s, classify(err, "read the source's server_uuid")
	}
	return s, nil
}

// atLeast reports whether the server's version is major.minor or later.
func (s server) atLeast(major, minor int) bool {
	return s.major > major || (s.major == major && s.minor >= minor)
}

// setting is one server variable the capture needs, with the value it
// needs and why.
type setting struct {
	name, want, why string
}

// logSettings are the binlog settings a capture needs on s.
func logSettings(s server) []setting {
	out := []setting{
		{"log_bin", "1", "without a binlog there is no change stream to read"},
		{"binlog_format", "ROW", "STATEMENT and MIXED log statements instead of rows, which a capture cannot read back: the stream would be silently empty"},
		{"binlog_row_image", "FULL", "MINIMAL and NOBLOB leave columns out of UPDATE and DELETE images"},
	}
	if (s.mariadb && s.atLeast(10, 5)) || (!s.mariadb && s.atLeast(8, 0)) {
		out = append(out, setting{"binlog_row_metadata", "FULL", "without column names in each table map, rows logged before a schema change cannot be told from rows logged after it"})
	}
	if !s.mariadb {
		out = append(out, setting{"gtid_mode", "ON", "without GTIDs a change carries no transaction identity to apply it exactly once by"})
	}
	return out
}

// checkLogSettings refuses a server whose binlog settings would lose or
// misread changes, naming the first wrong setting and how to set it.
func checkLogSettings(ctx context.Context, db *sql.DB, s server) error {
	if !s.mariadb && !s.atLeast(8, 0) {
		return errcode.New(errcode.SourceLogConfig, "MySQL %s is not supported: the MySQL-family source needs MySQL 8.0 or later, or MariaDB 10.5 or later", s.version)
	}
	if s.mariadb && !s.atLeast(10, 5) {
		return errcode.New(errcode.SourceLogConfig, "MariaDB %s is not supported: the source needs MariaDB 10.5 or later (binlog_row_metadata = FULL)", s.version)
	}
	for _, st := range logSettings(s) {
		var got string
		if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL."+st.name).Scan(&got); err != nil {
			return classify(err, "read @@"+st.name)
		}
		if !strings.EqualFold(got, st.want) {
			shown := got
			if st.name == "log_bin" {
				shown = map[string]string{"0": "OFF", "1": "ON"}[got]
				st.want = "ON"
			}
			return &errcode.Error{Code: errcode.SourceLogConfig,
				Message: fmt.Sprintf("the source runs with %s = %s: %s", st.name, shown, st.why),
				Hint:    settingHint(st, s)}
		}
	}
	return nil
}

// settingHint says how to set one binlog setting on the server.
func settingHint(st setting, s server) string {
	section := "[mysqld]"
	if s.mariadb {
		section = "[mariadbd]"
	}
	if st.name == "log_bin" {
		return fmt.Sprintf("Turn the binlog on: add log_bin = <basename> (and a unique server_id) under %s in the server's configuration file and restart it; then run again.", section)
	}
	if st.name == "gtid_mode" {
		return "Set gtid_mode = ON and enforce_gtid_consistency = ON (step by step on a live server: OFF_PERMISSIVE, ON_PERMISSIVE, ON), put both in the configuration file, then run again."
	}
	return fmt.Sprintf("Run SET GLOBAL %s = '%s' and add %s = %s under %s in the server's configuration file so it survives a restart; sessions opened before the change keep the old value, so restart long-lived application connections too. Then run again.",
		st.name, st.want, st.name, st.want, section)
}

// checkBinlogAccess refuses a user that may not list the binlogs (the
// capture reads the log's health with SHOW BINARY LOGS).
func checkBinlogAccess(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, `SHOW BINARY LOGS`)
	if err != nil {
		if me, ok := errors.AsType[*mysql.MySQLError](err); ok && me.Number == erSpecificAccess {
			return &errcode.Error{Code: errcode.SourcePrivileges, Err: err,
				Message: "the source user may not list the binlogs (SHOW BINARY LOGS needs REPLICATION CLIENT, named BINLOG MONITOR on MariaDB 10.5 and later)",
				Hint:    privilegesHint}
		}
		if me, ok := errors.AsType[*mysql.MySQLError](err); ok && me.Number == erNoBinaryLogging {
			return &errcode.Error{Code: errcode.SourceLogConfig, Err: err, Message: "the source runs with log_bin = OFF",
				Hint: settingHint(setting{name: "log_bin"}, server{mariadb: true})}
		}
		return classify(err, "list the source's binlogs")
	}
	return rows.Close()
}

// checkServerID refuses a replica server ID the server or another replica
// uses: registering with it would disconnect that replica (or be
// refused). owner is the report host this reader registers with; a
// registered replica of the same ID and owner is a dead attempt of this
// reader, which the server replaces.
func checkServerID(ctx context.Context, db *sql.DB, s server, id uint32, owner string) error {
	if id == s.serverID {
		return errcode.New(errcode.SourceServerIDClash, "server_id=%d is the source's own @@server_id", id)
	}
	rows, err := db.QueryContext(ctx, `SHOW SLAVE HOSTS`)
	if err != nil {
		// Listing replicas needs REPLICATION MASTER ADMIN on MariaDB; a user
		// without it registers and lets the server judge.
		return nil
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return classify(err, "list the source's replicas")
	}
	var inUse []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return classify(err, "list the source's replicas")
		}
		var sid, host string
		for i, c := range cols {
			switch strings.ToLower(c) {
			case "server_id":
				sid = vals[i].String
			case "host":
				host = vals[i].String
			}
		}
		inUse = append(inUse, sid)
		if sid == strconv.FormatUint(uint64(id), 10) && (owner == "" || host != owner) {
			return errcode.New(errcode.SourceServerIDClash, "server_id=%d is already used by a replica connected from %q (replica server IDs in use: %s)",
				id, host, strings.Join(inUse, ", "))
		}
	}
	return classify(rows.Err(), "list the source's replicas")
}

package errcode

// Source log refusals named by concept (exit 3). The engine's message names
// its own setting (binlog_format, gtid_mode) and the instance's hint says
// how to set it.
var (
	SourceLogConfig = register("SLUICE-E-SOURCE-LOG-CONFIG", ExitRefused,
		"The source's change log is not configured so that every change can be read back exactly (MySQL family: log_bin off, binlog_format not ROW, binlog_row_image not FULL, binlog_row_metadata not FULL, gtid_mode not ON). Nothing was written.",
		"Set the setting the message names on the source (in its configuration file, so it survives a restart), then run again.")
	SourceServerIDClash = register("SLUICE-E-SOURCE-SERVER-ID-CLASH", ExitRefused,
		"The server ID sluice would read the MySQL-family binlog with is the source's own, or another replica connected to the source already uses it; the server would disconnect one of the two.",
		"Give the source DSN a server_id=N parameter that no server or replica in the replication topology uses (the message names the ones in use).")
	SourceLogLost = register("SLUICE-E-SOURCE-LOG-LOST", ExitRefused,
		"The source no longer holds the log file the chain's position is in (MySQL family: the binlog was purged by binlog_expire_logs_seconds or PURGE BINARY LOGS): the changes since the chain's tip are gone.",
		"The chain cannot continue. Take a new full backup into a new chain, and keep the producer running or raise binlog_expire_logs_seconds so the source keeps the binlog until the chain has read it.")
	SourceTextLossy = register("SLUICE-E-SOURCE-TEXT-LOSSY", ExitRefused,
		"The MySQL-family source's catalog shows an ENUM or SET label or a column default with '?' in place of its four-byte characters (MariaDB keeps that text in utf8mb3), and the server gave the exact text no other way; sluice records no '?' in its place. Nothing of it was written.",
		"The message names each table and column. A NOT NULL column's default is read through a row of its table: insert one (or make the column NULL-able, or its default free of four-byte characters), then run again; a producer that met the column while streaming resumes from its chain once started again. Labels are read with MariaDB's TYPE OF (10.3 and later): on a server without it, keep four-byte characters out of labels.")
)

package errcode

// Source log refusals named by concept (exit 3), raised by every source
// engine. The engine's message names its own setting or object (wal_level
// or binlog_format, a replication slot or a replica server ID) and the
// instance's hint says what to do about it there.
var (
	SourceLogConfig = register("SLUICE-E-SOURCE-LOG-CONFIG", ExitRefused,
		"The source's change log is not configured so that every change can be read back exactly (PostgreSQL: wal_level not logical; MySQL family: log_bin off, binlog_format not ROW, binlog_row_image not FULL, binlog_row_metadata not FULL, gtid_mode not ON). Nothing was written.",
		"Set the setting the message names on the source (in its configuration file, so it survives a restart), then run again.")
	SourceReaderInUse = register("SLUICE-E-SOURCE-READER-IN-USE", ExitRefused,
		"Another reader already reads the source's change log as this chain's producer (PostgreSQL: another connection streams from the chain's replication slot; MySQL family: a replica connection with the chain's server ID): a second producer runs on this chain.",
		"Run one producer per chain: stop the other one (the message names its process or connection) or wait for it to end, then run again.")
	SourceAnchorMissing = register("SLUICE-E-SOURCE-ANCHOR-MISSING", ExitRefused,
		"The source holds nothing that anchors the chain's read position (PostgreSQL: the chain's replication slot does not exist, dropped or never made because the chain was taken without --chain-slot; MySQL family: the chain records no replica server ID).",
		"Incrementals need what anchors the chain. Take a new full into a new chain (on PostgreSQL with --chain-slot); on a MySQL-family chain of an earlier release, give the DSN a server_id=N parameter.")
	SourceServerIDClash = register("SLUICE-E-SOURCE-SERVER-ID-CLASH", ExitRefused,
		"The server ID sluice would read the MySQL-family binlog with is the source's own, or another replica connected to the source already uses it; the server would disconnect one of the two.",
		"Give the source DSN a server_id=N parameter that no server or replica in the replication topology uses (the message names the ones in use).")
	SourceLogLost = register("SLUICE-E-SOURCE-LOG-LOST", ExitRefused,
		"The source no longer holds the log the chain's position is in (PostgreSQL: the chain's replication slot was invalidated, its WAL removed past max_slot_wal_keep_size; MySQL family: the binlog was purged by binlog_expire_logs_seconds or PURGE BINARY LOGS): the changes since the chain's tip are gone.",
		"The chain cannot continue. Take a new full backup into a new chain, and keep the producer running or raise binlog_expire_logs_seconds so the source keeps the binlog until the chain has read it.")
	SourceTextLossy = register("SLUICE-E-SOURCE-TEXT-LOSSY", ExitRefused,
		"The MySQL-family source's catalog shows an ENUM or SET label or a column default with '?' in place of its four-byte characters (MariaDB keeps that text in utf8mb3), and the server gave the exact text no other way; sluice records no '?' in its place. Nothing of it was written.",
		"The message names each table and column. A NOT NULL column's default is read through a row of its table: insert one (or make the column NULL-able, or its default free of four-byte characters), then run again; a producer that met the column while streaming resumes from its chain once started again. Labels are read with MariaDB's TYPE OF (10.3 and later): on a server without it, keep four-byte characters out of labels.")
)

// Codes of earlier releases, each now an alias of the concept code that
// replaced it: the PostgreSQL source raised engine-named codes, and the
// MySQL family reused the slot codes.
var (
	// SourceWalLevel is SourceLogConfig's earlier name, for PostgreSQL's wal_level.
	SourceWalLevel = alias("SLUICE-E-SOURCE-WAL-LEVEL", SourceLogConfig)
	// SlotInUse is SourceReaderInUse's earlier name.
	SlotInUse = alias("SLUICE-E-SLOT-IN-USE", SourceReaderInUse)
	// SlotMissing is SourceAnchorMissing's earlier name.
	SlotMissing = alias("SLUICE-E-SLOT-MISSING", SourceAnchorMissing)
	// SlotInvalidated is SourceLogLost's earlier name, for PostgreSQL's invalidated slot.
	SlotInvalidated = alias("SLUICE-E-SLOT-INVALIDATED", SourceLogLost)
)

package errcode

// Usage and configuration (exit 2).
var (
	Usage = register("SLUICE-E-USAGE", ExitUsage,
		"The command line is malformed: an unknown flag, a missing required flag, or a bad value.",
		"Run the command with --help and correct the flag the message names.")
	ConfigInvalid = register("SLUICE-E-CONFIG-INVALID", ExitUsage,
		"A setting has a value sluice cannot use (a malformed URL or DSN, an unknown driver).",
		"Correct the setting the message names; `sluice <command> --help` lists the accepted values.")
	LiteralSecret = register("SLUICE-E-CONFIG-LITERAL-SECRET", ExitUsage,
		"A DSN handed to the starter carries a literal password, which would be stored in plain text in Temporal's history.",
		"Remove the password from the DSN and pass a reference instead: --source-password-env VAR / --target-password-env VAR (read by the worker), --*-password-file PATH, or PGPASSWORD / a .pgpass file in the worker's environment.")
	SecretUnresolved = register("SLUICE-E-SECRET-UNRESOLVED", ExitUsage,
		"The worker could not resolve a secret reference (the environment variable is unset or the file is unreadable).",
		"Set the named environment variable, or make the named file readable, in the worker's environment, then run again.")
)

// Reachability (exit 1: transient, retried before it surfaces).
var (
	StoreUnreachable = register("SLUICE-E-STORE-UNREACHABLE", ExitRuntime,
		"The backup store did not answer or refused the request after retries.",
		"Check the store URL, --backup-endpoint, network reachability and credentials (the standard AWS chain for s3://), then run again.")
	SourceUnreachable = register("SLUICE-E-SOURCE-UNREACHABLE", ExitRuntime,
		"The source database could not be reached or refused the connection.",
		"Check the source DSN, that the database is up, and that the worker's host can reach it.")
	TargetUnreachable = register("SLUICE-E-TARGET-UNREACHABLE", ExitRuntime,
		"The target database could not be reached or refused the connection.",
		"Check the target DSN, that the database is up, and that the worker's host can reach it.")
	TemporalUnreachable = register("SLUICE-E-TEMPORAL-UNREACHABLE", ExitRuntime,
		"The starter could not reach the Temporal server.",
		"Start the services (`make services`) or point --temporal-address / TEMPORAL_ADDRESS at a running Temporal frontend.")
)

// Chain integrity (exit 3: sluice refuses to use damaged or inconsistent data).
var (
	ChunkCorrupt = register("SLUICE-E-CHUNK-CORRUPT", ExitRefused,
		"A chunk's bytes do not match the SHA-256 its manifest records, or the chunk does not decode.",
		"The chunk named in the message is damaged in the store. Restore it from a copy of the store if you have one; otherwise take a new full backup into a new chain.")
	ManifestInvalid = register("SLUICE-E-MANIFEST-INVALID", ExitRefused,
		"A manifest is missing, does not parse, or its content does not hash to its ID.",
		"The store holds a damaged or hand-edited manifest; take a new full backup into a new chain, or restore the store from a copy.")
	ChainInvalid = register("SLUICE-E-CHAIN-INVALID", ExitRefused,
		"The catalog does not validate: a link's parent, positions or ID do not agree with its neighbours.",
		"The chain cannot be replayed safely. Take a new full backup into a new chain; keep the damaged one for diagnosis.")
	ChainNotFound = register("SLUICE-E-CHAIN-NOT-FOUND", ExitRefused,
		"There is no chain at the given store URL (no catalog).",
		"Check the URL; create the chain with `sluice backup full` first.")
	LinkNotFound = register("SLUICE-E-LINK-NOT-FOUND", ExitRefused,
		"The chain has no link with the ID given (--through, --at-chain-id).",
		"List the chain's links (the catalog under catalog/ in the store) and pass an ID it names.")
	ChainExists = register("SLUICE-E-CHAIN-EXISTS", ExitRefused,
		"A full backup was asked for at a store URL that already holds a chain.",
		"Use a new --target prefix for a new chain. An existing chain gains new segments only through its producer's rotation (`sluice backup stream run`).")
	CatalogConflict = register("SLUICE-E-CATALOG-CONFLICT", ExitRefused,
		"Another writer committed to the chain's catalog first; this attempt's work was not committed.",
		"Make sure only one producer writes to this chain. Nothing this attempt wrote is named by the catalog; it is safe to run again once the other writer is gone.")
	FormatUnsupported = register("SLUICE-E-FORMAT-UNSUPPORTED", ExitRefused,
		"The chain, manifest or chunk was written in a format version this sluice does not read.",
		"Upgrade sluice to a version that reads the format named in the message.")
)

// Source refusals (exit 3).
var (
	SourcePrivileges = register("SLUICE-E-SOURCE-PRIVILEGES", ExitRefused,
		"The source role lacks a privilege the backup needs (SELECT on a table, REPLICATION).",
		"Grant the privilege the message names to the source role (e.g. GRANT SELECT ON ALL TABLES IN SCHEMA public TO <role>; ALTER ROLE <role> REPLICATION), then run again.")
	SourceWalLevel = register("SLUICE-E-SOURCE-WAL-LEVEL", ExitRefused,
		"The source PostgreSQL does not run with wal_level = logical, so no replication slot can anchor the snapshot.",
		"Set wal_level = logical (and max_replication_slots, max_wal_senders > 0) in postgresql.conf and restart the source.")
	SlotInUse = register("SLUICE-E-SLOT-IN-USE", ExitRefused,
		"Another connection is streaming from the chain's replication slot: a second producer is running on this chain.",
		"Run one producer per chain. Find the other one (SELECT active_pid FROM pg_replication_slots WHERE slot_name = '<slot>') and stop it, or wait for it to end.")
	SlotMissing = register("SLUICE-E-SLOT-MISSING", ExitRefused,
		"The chain's replication slot does not exist on the source (dropped, or the chain was taken without --chain-slot).",
		"Incrementals need the slot that anchors the chain. Take a new full with --chain-slot into a new chain.")
	SlotInvalidated = register("SLUICE-E-SLOT-INVALIDATED", ExitRefused,
		"PostgreSQL invalidated the chain's replication slot (max_slot_wal_keep_size exceeded): the changes since the chain's tip are gone from the WAL.",
		"The chain cannot continue. Take a new full with --chain-slot into a new chain, drop the invalidated slot, and raise max_slot_wal_keep_size or keep the producer running.")
	SourceMismatch = register("SLUICE-E-SOURCE-MISMATCH", ExitRefused,
		"The source database is not the one the chain was taken from (another cluster system identifier or database).",
		"Point --source at the chain's source, or start a new chain for this database with `sluice backup full`.")
	PublicationMissing = register("SLUICE-E-PUBLICATION-MISSING", ExitRefused,
		"The publication named with --publication does not exist on the source.",
		"Create it (CREATE PUBLICATION <name> FOR ALL TABLES, as a superuser) or omit --publication to use sluice's own.")
	SlotExists = register("SLUICE-E-SLOT-EXISTS", ExitRefused,
		"The replication slot the chain would create already exists on the source.",
		"Another chain may own it. Name another slot with --slot-name, or drop the stale slot (SELECT pg_drop_replication_slot('<name>')) if you are sure nothing uses it.")
)

// Target refusals (exit 3).
var (
	TargetNotEmpty = register("SLUICE-E-TARGET-NOT-EMPTY", ExitRefused,
		"A table restore would write into already holds rows.",
		"Restore into an empty database, drop the tables named, or pass --replace-existing to drop and recreate them.")
	TargetPrivileges = register("SLUICE-E-TARGET-PRIVILEGES", ExitRefused,
		"The target role may not create or write a table the restore needs.",
		"Grant CREATE on the target schema and ownership of the tables to the target role, then run again.")
)

// Workflow-level outcomes.
var (
	AlreadyRunning = register("SLUICE-E-ALREADY-RUNNING", ExitRefused,
		"A workflow with the same ID is already running, so Temporal refused a second one.",
		"Follow or stop the running one (the message names its workflow ID); start a second only after it ended.")
	NotRunning = register("SLUICE-E-NOT-RUNNING", ExitRefused,
		"No workflow of that name is running, so there is nothing to query or stop.",
		"Check the --target / --stream-id; `temporal workflow list` shows what runs.")
	Canceled = register("SLUICE-E-CANCELED", ExitRuntime,
		"The run was cancelled before it finished; what it had written is not committed.",
		"Run the command again; a cancelled backup leaves nothing the catalog names, a cancelled restore leaves partly loaded tables that the next run with --replace-existing rebuilds.")
	Internal = register("SLUICE-E-INTERNAL", ExitRuntime,
		"An unexpected failure without a more specific code.",
		"Read the message and the worker log; run again. Report it with the message if it repeats.")
)
